// Command a2a-stream is the Lambda function behind the A2A function URL
// (InvokeMode RESPONSE_STREAM): the A2A routes with streaming, which API
// Gateway's buffered responses cannot carry.
package main

import (
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/molt-dev/molt/internal/awsbackend"
)

func main() { lambdaurl.Start(awsbackend.MustA2AStream()) }
