// Command api is the Lambda function behind API Gateway (HTTP API, payload 2.0):
// the UI API and /health.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/obs"
)

func main() {
	logger := obs.NewLogger(os.Stdout)
	slog.SetDefault(logger)
	a, err := awsbackend.NewApp(context.Background(), app.ConfigFromEnv(os.Environ()), logger)
	if err != nil {
		logger.Error("start", slog.String("error", err.Error()))
		os.Exit(1)
	}
	lambda.Start(a.APILambda())
}
