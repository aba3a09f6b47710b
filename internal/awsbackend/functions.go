package awsbackend

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/work"
)

// The constructors below are the whole of each functions/<name>/main.go:
// lambda.Start(awsbackend.MustAPI()) and so on. Each runs once, at the
// function's start and outside its handler: it sets up JSON logging, reads the
// configuration from the environment and builds the App on the AWS adapters.
// When that fails it logs the error ("start") and exits with status 1, which
// Lambda reports as an init error; handlers themselves never exit.

// MustAPI returns the api function's handler (App.APILambda).
func MustAPI() func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return mustApp().APILambda()
}

// MustA2AStream returns the a2a-stream function's handler
// (App.A2AStreamHandler), for lambdaurl.Start: a function URL in
// RESPONSE_STREAM mode, so SSE reaches the client as it is written.
func MustA2AStream() http.Handler {
	return mustApp().A2AStreamHandler()
}

// MustTicker returns the ticker function's handler (App.TickerLambda).
func MustTicker() func(context.Context, events.EventBridgeEvent) (app.TickResult, error) {
	return mustApp().TickerLambda()
}

// MustWorker returns the handler of kind's worker function (<kind>-worker:
// App.WorkerLambda); it exits as above when no worker is registered for kind.
func MustWorker(kind work.Kind) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	a := mustApp()
	h, err := a.WorkerLambda(kind)
	if err != nil {
		exit(a.Logger, err)
	}
	return h
}

func mustApp() *app.App {
	logger := obs.NewLogger(os.Stdout)
	slog.SetDefault(logger)
	a, err := NewApp(context.Background(), app.ConfigFromEnv(os.Environ()), logger)
	if err != nil {
		exit(logger, err)
	}
	return a
}

func exit(logger *slog.Logger, err error) {
	logger.Error("start", slog.String("error", err.Error()))
	os.Exit(1)
}
