// Package obs sets up structured logging: log/slog JSON records carrying the Lambda
// request id (when running in Lambda) and the attributes a caller attached to the
// context (a work item's id, an HTTP request's id).
package obs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

type ctxKey struct{}

// With returns a context whose log records carry attrs in addition to any already
// attached.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(ctxKey{}).([]slog.Attr)
	all := make([]slog.Attr, 0, len(prev)+len(attrs))
	all = append(append(all, prev...), attrs...)
	return context.WithValue(ctx, ctxKey{}, all)
}

// Handler wraps a slog.Handler, adding the Lambda request id and the context's
// attributes to every record logged with a context.
type Handler struct{ slog.Handler }

// Handle adds the context attributes and passes the record on.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("aws_request_id", lc.AwsRequestID))
	}
	if attrs, ok := ctx.Value(ctxKey{}).([]slog.Attr); ok {
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around derived handlers.
func (h Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Handler{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper around derived handlers.
func (h Handler) WithGroup(name string) slog.Handler { return Handler{h.Handler.WithGroup(name)} }

// NewLogger returns a JSON logger writing to w at the level named by MOLT_LOG_LEVEL
// (debug, info, warn, error; default info).
func NewLogger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	switch strings.ToLower(os.Getenv("MOLT_LOG_LEVEL")) {
	case "debug":
		lvl = slog.LevelDebug
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	}
	return slog.New(Handler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})})
}
