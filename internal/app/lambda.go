package app

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqsbatch"
	"github.com/molt-dev/molt/internal/work"
)

// Function names: one Lambda function (functions/<name>) each.
const (
	FnAPI    = "api"
	FnTicker = "ticker"
)

// APILambda returns the API Gateway HTTP API (payload 2.0) handler
// (httpapi.Lambda: the proxy, with named stages and malformed events handled).
func (a *App) APILambda() func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return httpapi.Lambda(a.HTTPHandler())
}

// TickerLambda returns the scheduled handler: one bounded maintenance pass,
// answering its counts. A failed pass returns its error so Lambda records it; the
// next scheduled pass retries.
func (a *App) TickerLambda() func(context.Context, events.EventBridgeEvent) (TickResult, error) {
	m := a.Maintainer()
	return func(ctx context.Context, ev events.EventBridgeEvent) (TickResult, error) {
		res, err := a.Tick(ctx, m)
		if err != nil {
			a.Logger.ErrorContext(ctx, "tick failed", slog.String("error", err.Error()))
			return res, err
		}
		a.Logger.InfoContext(ctx, "tick", slog.Int("requeued", res.Requeued), slog.Int("expired", res.Expired),
			slog.Int("resent", res.Resent), slog.Int("raced", res.Raced), slog.Int("notices", res.Notified),
			slog.Int("archived", res.Archived), slog.Int("purged", res.Purged))
		return res, nil
	}
}

// WorkerLambda returns the SQS handler for one kind's queue, reporting partial
// batch failures.
func (a *App) WorkerLambda(kind work.Kind) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	for _, w := range a.workers {
		if w.Kind == kind {
			h := w.Handler
			return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				return sqsbatch.Handle(ctx, ev, h, a.Logger), nil
			}, nil
		}
	}
	return nil, molt.Invalid("function", "no worker for kind %q", kind)
}

// Function returns the named function's handler as a lambda.Handler, the way
// lambda.Start would run it: `molt invoke` uses it to run a handler in process.
func (a *App) Function(name string) (lambda.Handler, error) {
	switch name {
	case FnAPI:
		return lambda.NewHandler(a.APILambda()), nil
	case FnTicker:
		return lambda.NewHandler(a.TickerLambda()), nil
	}
	for _, w := range a.workers {
		if name == string(w.Kind)+"-worker" {
			h, err := a.WorkerLambda(w.Kind)
			if err != nil {
				return nil, err
			}
			return lambda.NewHandler(h), nil
		}
	}
	return nil, molt.Invalid("function", "unknown function %q", name)
}

// FunctionNames lists the functions Function knows.
func (a *App) FunctionNames() []string {
	names := []string{FnAPI, FnTicker}
	for _, w := range a.workers {
		names = append(names, string(w.Kind)+"-worker")
	}
	return names
}
