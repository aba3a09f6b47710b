// Command run-worker is the Lambda function behind the runs queue: each SQS
// wake-up names an evolution run, which it claims and runs (draft, dry-run,
// score, the auto-apply gates; internal/runs), reporting partial batch failures.
// One attempt fits in one invocation: see internal/runs (Lambda time limit).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/work"
)

func main() { lambda.Start(awsbackend.MustWorker(work.KindRun)) }
