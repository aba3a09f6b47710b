// Command decision-worker is the Lambda function behind the decision queue:
// each SQS wake-up names a supervisor decision (internal/supervisor), which
// it claims and runs: the campaign's supervising agent proposes an action for
// a material event, the built-in reviewer gives its verdict, and an approved
// proposal is relayed to the campaign once. It reports partial batch
// failures.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/supervisor"
)

func main() { lambda.Start(awsbackend.MustWorker(supervisor.KindDecision)) }
