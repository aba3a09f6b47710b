// Command turn-worker is the Lambda function behind the turns queue: each SQS
// wake-up names a chat turn, which it claims and answers (internal/chat),
// reporting partial batch failures.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/work"
)

func main() { lambda.Start(awsbackend.MustWorker(work.KindTurn)) }
