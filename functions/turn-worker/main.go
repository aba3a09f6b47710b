// Command turn-worker is the Lambda function behind the turns queue: each SQS
// wake-up names a chat turn, which it claims and answers (internal/chat),
// reporting partial batch failures.
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
	h, err := a.WorkerLambda(work.KindTurn)
	if err != nil {
		logger.Error("start", slog.String("error", err.Error()))
		os.Exit(1)
	}
	lambda.Start(h)
}
