// Command naming-worker is the Lambda function behind the naming queue: each
// SQS wake-up names a naming job, which it claims and runs (internal/naming):
// one title for a session, saved only if the session is still as the job
// found it. It reports partial batch failures.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/work"
)

func main() { lambda.Start(awsbackend.MustWorker(work.KindNaming)) }
