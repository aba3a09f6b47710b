// Package consumer runs a queue's handlers in process: it receives wake-ups from
// any queue.Receiver (internal/memqueue in `molt serve`, or SQS), hands each to a
// queue.Handler, deletes it when handled, releases it with a backoff when the
// handler fails, and drops poison messages — bodies that do not parse, and
// messages received more than MaxReceives times — after logging them. Dropping is
// the in-process stand-in for SQS's dead-letter queue; since the store is the
// source of truth, the tick still finds work whose wake-up was dropped.
//
// On AWS the Lambda event source mapping plays this role instead (see
// internal/sqsbatch).
package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
)

// DefaultMaxReceives is how many times a message is handled before it is dropped;
// it matches the SQS redrive policy's maxReceiveCount.
const DefaultMaxReceives = 5

// DefaultWait is the long-poll wait of one receive.
const DefaultWait = 20 * time.Second

// Consumer receives from one queue and runs Handler on each message with Workers
// goroutines. Set the fields before calling Run and do not change them after.
type Consumer struct {
	Receiver queue.Receiver
	Handler  queue.Handler
	// Log receives one record per dropped message and per failed handling. Use an
	// obs logger so the records carry the message's attributes (message_id, kind,
	// id), which are attached to the handler's context with obs.With.
	Log *slog.Logger
	// Workers is the number of messages handled at once (default 1).
	Workers int
	// MaxReceives bounds the handlings of one message (default DefaultMaxReceives).
	MaxReceives int
	// Backoff is how long a message whose handling failed stays invisible, given its
	// receive count (default Backoff).
	Backoff func(receiveCount int) time.Duration
	// Wait is the long-poll wait of each receive (default DefaultWait).
	Wait time.Duration
}

// Backoff is the default retry delay: 1s, 2s, 4s, … capped at one minute.
func Backoff(receiveCount int) time.Duration {
	if receiveCount < 1 {
		receiveCount = 1
	}
	if receiveCount > 7 {
		return time.Minute
	}
	return min(time.Second<<(receiveCount-1), time.Minute)
}

// Run receives and handles messages until ctx ends, then waits for the handlers
// in flight to return and returns nil. A handler sees ctx (with log attributes
// added), so it is cancelled when Run is asked to stop; the message it was
// handling is released for redelivery.
func (c *Consumer) Run(ctx context.Context) error {
	if c.Receiver == nil || c.Handler == nil {
		return fmt.Errorf("run consumer: receiver and handler are required")
	}
	workers := max(c.Workers, 1)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { c.loop(ctx) })
	}
	wg.Wait()
	return nil
}

func (c *Consumer) loop(ctx context.Context) {
	wait := c.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	failures := 0
	for ctx.Err() == nil {
		ds, err := c.Receiver.Receive(ctx, 1, wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := Backoff(failures)
			c.log().WarnContext(ctx, "receive failed", slog.String("error", err.Error()), slog.Duration("retry_in", delay))
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		failures = 0
		for _, d := range ds {
			c.handle(ctx, d)
		}
	}
}

func (c *Consumer) handle(ctx context.Context, d queue.Delivery) {
	ctx = obs.With(ctx, slog.String("message_id", d.MessageID), slog.Int("receive_count", d.ReceiveCount))
	m, err := message(d)
	if err != nil {
		c.log().ErrorContext(ctx, "dropping unparseable message",
			slog.String("body", Preview(d.Body)), slog.String("error", err.Error()))
		c.delete(ctx, d)
		return
	}
	ctx = obs.With(ctx, slog.String("kind", m.Kind), slog.String("id", m.ID))
	limit := c.MaxReceives
	if limit <= 0 {
		limit = DefaultMaxReceives
	}
	if d.ReceiveCount > limit {
		c.log().ErrorContext(ctx, "dropping message received too often", slog.Int("max_receives", limit))
		c.delete(ctx, d)
		return
	}
	err = call(ctx, c.Handler, m)
	switch {
	case err == nil:
		c.delete(ctx, d)
	case ctx.Err() != nil:
		// Stopping: let the message come back at once (a persistent queue
		// redelivers it to the next process; memqueue forgets it and the tick
		// re-sends it).
		c.release(ctx, d, 0)
	case d.ReceiveCount >= limit:
		c.log().ErrorContext(ctx, "dropping message after its last allowed handling failed",
			slog.Int("max_receives", limit), slog.String("error", err.Error()))
		c.delete(ctx, d)
	default:
		backoff := c.Backoff
		if backoff == nil {
			backoff = Backoff
		}
		delay := backoff(d.ReceiveCount)
		c.log().WarnContext(ctx, "handler failed; message released for retry",
			slog.String("error", err.Error()), slog.Duration("retry_in", delay))
		c.release(ctx, d, delay)
	}
}

// message returns the delivery's message, parsing its body when the receiver did
// not.
func message(d queue.Delivery) (queue.Message, error) {
	if d.Message.Kind != "" && d.Message.ID != "" {
		return d.Message, nil
	}
	return queue.Parse(d.Body)
}

// call runs the handler, turning a panic into an error so one bad message cannot
// take the process down.
func call(ctx context.Context, h queue.Handler, m queue.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h.Handle(ctx, m)
}

// delete and release outlive a stop: a message handled just before Run was asked
// to stop is still deleted, not handled again.
func (c *Consumer) delete(ctx context.Context, d queue.Delivery) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Receiver.Delete(actx, d); err != nil {
		c.log().WarnContext(ctx, "delete message failed", slog.String("error", err.Error()))
	}
}

func (c *Consumer) release(ctx context.Context, d queue.Delivery, delay time.Duration) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Receiver.Release(actx, d, delay); err != nil {
		c.log().WarnContext(ctx, "release message failed", slog.String("error", err.Error()))
	}
}

func (c *Consumer) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// Preview returns at most the first 200 characters of a message body, for logs:
// enough to recognise a poison message without copying arbitrary content.
func Preview(body string) string {
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
