// Command api is the Lambda function behind API Gateway (HTTP API, payload 2.0):
// the UI API and /health.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
)

func main() { lambda.Start(awsbackend.MustAPI()) }
