// Command apply-worker is the Lambda function behind the applies queue: each SQS
// wake-up names an evolution apply, which it claims (or resumes at publish) and
// runs (internal/applies), reporting partial batch failures.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/work"
)

func main() { lambda.Start(awsbackend.MustWorker(work.KindApply)) }
