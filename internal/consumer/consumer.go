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
	// Batch, when above 1 and Handler is a queue.BatchHandler, is the most
	// messages one receive takes and hands to HandleBatch together (SQS
	// delivers at most 10 a receive; the executor of internal/work claims a
	// batch in one store round trip). Workers still bounds the messages
	// worked at once: a receive asks for at most the free places, and each
	// message's place frees as its own work ends (queue.Report.Ended: its
	// final write may still be in flight, as a River worker slot frees before
	// its job's completion is committed), or else with its result.
	Batch int
	// Gather, with Batch, is how long a receive may wait for more places to
	// free while messages are in flight, so that a burst of handlings ending
	// together (a batch's final writes, committed together) frees places for
	// one batch instead of many small ones. A receive while nothing is in
	// flight never waits: an idle consumer picks a wake-up up at once.
	Gather time.Duration
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
	if bh, ok := c.Handler.(queue.BatchHandler); ok && c.Batch > 1 && workers > 1 {
		c.batches(ctx, bh, workers)
		return nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { c.loop(ctx) })
	}
	wg.Wait()
	return nil
}

// pause waits out a failed receive (the failures-th in a row), or until ctx
// ends.
func (c *Consumer) pause(ctx context.Context, failures int, err error) {
	delay := Backoff(failures)
	c.log().WarnContext(ctx, "receive failed", slog.String("error", err.Error()), slog.Duration("retry_in", delay))
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
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
			c.pause(ctx, failures, err)
			continue
		}
		failures = 0
		for _, d := range ds {
			c.handle(ctx, d)
		}
	}
}

// batches is Run for a BatchHandler: one receiver loop takes up to Batch
// messages at a time, as many as there are free places of workers, and hands
// them to HandleBatch together; a message's place frees when its handling ends.
func (c *Consumer) batches(ctx context.Context, h queue.BatchHandler, workers int) {
	wait := c.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	free := make(chan struct{}, workers)
	for range workers {
		free <- struct{}{}
	}
	giveBack := func(n int) {
		for range n {
			free <- struct{}{}
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	failures := 0
	for ctx.Err() == nil {
		select {
		case <-free:
		case <-ctx.Done():
			return
		}
		n := 1
		want := min(c.Batch, workers)
	more:
		for n < want {
			select {
			case <-free:
				n++
			default:
				break more
			}
		}
		if n < want && c.Gather > 0 && n+len(free) < workers {
			t := time.NewTimer(c.Gather)
		gather:
			for n < want {
				select {
				case <-free:
					n++
				case <-t.C:
					break gather
				case <-ctx.Done():
					break gather
				}
			}
			t.Stop()
		}
		ds, err := c.Receiver.Receive(ctx, n, wait)
		if err != nil {
			giveBack(n)
			if ctx.Err() != nil {
				return
			}
			failures++
			c.pause(ctx, failures, err)
			continue
		}
		failures = 0
		giveBack(n - min(n, len(ds)))
		if len(ds) == 0 {
			continue
		}
		wg.Go(func() { c.handleBatch(ctx, h, ds, func() { free <- struct{}{} }) })
	}
}

// handleBatch hands the deliveries that are wake-ups to h together, settles
// each as its handling ends (as handle does) and calls freed once per delivery:
// when the handler reports its work ended (its final write under way), or else
// with its result.
func (c *Consumer) handleBatch(ctx context.Context, h queue.BatchHandler, ds []queue.Delivery, freed func()) {
	type entry struct {
		ctx context.Context
		d   queue.Delivery
	}
	var es []entry
	var ms []queue.Message
	for _, d := range ds {
		mctx, m, ok := c.accept(ctx, d)
		if !ok {
			freed()
			continue
		}
		es, ms = append(es, entry{mctx, d}), append(ms, m)
	}
	if len(ms) == 0 {
		return
	}
	var mu sync.Mutex
	settled := make([]bool, len(ms))
	free := make([]bool, len(ms)) // the message's place is given back
	give := func(i int) {
		mu.Lock()
		already := free[i]
		free[i] = true
		mu.Unlock()
		if !already {
			freed()
		}
	}
	done := func(i int, err error) {
		mu.Lock()
		if i < 0 || i >= len(ms) || settled[i] {
			mu.Unlock()
			return
		}
		settled[i] = true
		mu.Unlock()
		c.settle(es[i].ctx, es[i].d, err)
		give(i)
	}
	ended := func(i int) {
		if i >= 0 && i < len(ms) {
			give(i)
		}
	}
	err := callBatch(ctx, h, ms, queue.Report{Done: done, Ended: ended})
	// A handler that panicked, or forgot a message, leaves it to be retried.
	if err == nil {
		err = fmt.Errorf("handler returned without a result")
	}
	for i := range ms {
		done(i, err)
	}
}

// accept parses d and checks its receive count; a poison message is dropped
// (deleted, after logging) and ok is false. mctx carries the message's log
// attributes.
func (c *Consumer) accept(ctx context.Context, d queue.Delivery) (mctx context.Context, m queue.Message, ok bool) {
	ctx = obs.With(ctx, slog.String("message_id", d.MessageID), slog.Int("receive_count", d.ReceiveCount))
	m, err := message(d)
	if err != nil {
		c.log().ErrorContext(ctx, "dropping unparseable message",
			slog.String("body", Preview(d.Body)), slog.String("error", err.Error()))
		c.delete(ctx, d)
		return ctx, m, false
	}
	ctx = obs.With(ctx, slog.String("kind", m.Kind), slog.String("id", m.ID))
	if limit := c.maxReceives(); d.ReceiveCount > limit {
		c.log().ErrorContext(ctx, "dropping message received too often", slog.Int("max_receives", limit))
		c.delete(ctx, d)
		return ctx, m, false
	}
	return ctx, m, true
}

func (c *Consumer) maxReceives() int {
	if c.MaxReceives <= 0 {
		return DefaultMaxReceives
	}
	return c.MaxReceives
}

func (c *Consumer) handle(ctx context.Context, d queue.Delivery) {
	ctx, m, ok := c.accept(ctx, d)
	if !ok {
		return
	}
	c.settle(ctx, d, call(ctx, c.Handler, m))
}

// settle deletes d when its handling succeeded, and otherwise releases it
// for a retry after a backoff (at once when stopping), or drops it after its
// last allowed handling.
func (c *Consumer) settle(ctx context.Context, d queue.Delivery, err error) {
	limit := c.maxReceives()
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

// callBatch runs HandleBatch, turning a panic into an error (returned) for the
// messages not yet done.
func callBatch(ctx context.Context, h queue.BatchHandler, ms []queue.Message, r queue.Report) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	h.HandleBatch(ctx, ms, r)
	return nil
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
