// Command ticker is the Lambda function run by the EventBridge schedule: one
// bounded maintenance pass per event (stale claims, lost wake-ups).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
)

func main() { lambda.Start(awsbackend.MustTicker()) }
