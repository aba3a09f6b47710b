// Command apply-worker is the Lambda function behind the applies queue: each SQS
// wake-up names an evolution apply, which it claims (or resumes at publish) and
// runs (internal/applies), reporting partial batch failures.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/work"
)

func main() {
	logger := obs.NewLogger(os.Stdout)
	slog.SetDefault(logger)
	a, err := awsbackend.NewApp(context.Background(), app.ConfigFromEnv(os.Environ()), logger)
	if err != nil {
		logger.Error("start", slog.String("error", err.Error()))
		os.Exit(1)
	}
	h, err := a.WorkerLambda(work.KindApply)
	if err != nil {
		logger.Error("start", slog.String("error", err.Error()))
		os.Exit(1)
	}
	lambda.Start(h)
}
