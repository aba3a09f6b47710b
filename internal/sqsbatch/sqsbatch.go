// Package sqsbatch is the Lambda side of a work queue: it turns an SQS event into
// calls of a queue.Handler and reports the records that failed as partial batch
// failures (the event source mapping needs FunctionResponseTypes:
// [ReportBatchItemFailures]). Only failed records are retried; after the queue's
// maxReceiveCount (5) SQS moves a record to the dead-letter queue.
//
// A record whose body is not a wake-up (queue.Parse fails) cannot succeed on a
// retry, but it is still reported as a failure: it then reaches the dead-letter
// queue after five receives, where an operator can inspect it and the DLQ alarm
// fires, instead of vanishing. Its body is logged once per receive, cut to 200
// characters.
package sqsbatch

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
)

// Handle handles each record of ev in order with h and returns the message ids of
// the records that failed. A record fails when its body does not parse, when h
// returns an error or panics, or when ctx ends before it is handled (the rest of
// the batch is then reported without being tried). Each record is handled with a
// context carrying its log attributes (message_id, receive_count, kind, id) via
// obs.With; log should be an obs logger so the records show them.
func Handle(ctx context.Context, ev events.SQSEvent, h queue.Handler, log *slog.Logger) events.SQSEventResponse {
	if log == nil {
		log = slog.Default()
	}
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, r := range ev.Records {
		if !handleRecord(ctx, r, h, log) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp
}

// Handler returns a Lambda handler (for lambda.Start) that calls Handle. It never
// returns an error: failures are reported per record.
func Handler(h queue.Handler, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return Handle(ctx, ev, h, log), nil
	}
}

func handleRecord(ctx context.Context, r events.SQSMessage, h queue.Handler, log *slog.Logger) bool {
	attrs := []slog.Attr{slog.String("message_id", r.MessageId)}
	if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil {
		attrs = append(attrs, slog.Int("receive_count", n))
	}
	ctx = obs.With(ctx, attrs...)
	if err := ctx.Err(); err != nil {
		log.WarnContext(ctx, "message not handled before the invocation ended", slog.String("error", err.Error()))
		return false
	}
	m, err := queue.Parse(r.Body)
	if err != nil {
		log.ErrorContext(ctx, "message is not a wake-up; reported as failed so it reaches the dead-letter queue",
			slog.String("body", preview(r.Body)), slog.String("error", err.Error()))
		return false
	}
	ctx = obs.With(ctx, slog.String("kind", m.Kind), slog.String("id", m.ID))
	if err := call(ctx, h, m); err != nil {
		log.ErrorContext(ctx, "handling failed; message will be retried", slog.String("error", err.Error()))
		return false
	}
	return true
}

// call runs the handler, turning a panic into an error so one record cannot fail
// the whole batch.
func call(ctx context.Context, h queue.Handler, m queue.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h.Handle(ctx, m)
}

// preview returns at most the first 200 characters of body.
func preview(body string) string {
	const n = 200
	if utf8.RuneCountInString(body) <= n {
		return body
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(body[i:])
		i += size
	}
	return body[:i] + "…"
}
