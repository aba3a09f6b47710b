// Package queuetest is the conformance suite of the queue port. Every adapter
// (internal/memqueue, internal/sqsqueue) runs it, so the in-process queue and SQS
// agree on what workers rely on: delivery, deletion, visibility, redelivery with a
// growing receive count, routing by kind, and long polls that end with their
// context.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
)

// Queues is one isolated set of queues made by a Factory.
type Queues struct {
	// Sender routes the kinds the factory was given, and refuses any other.
	Sender queue.Sender
	// Receiver returns the receiving end of one kind's queue.
	Receiver func(kind string) queue.Receiver
}

// Factory makes fresh, empty queues for kinds, whose visibility timeout is long
// enough (≥ 30 s) that a received message does not come back during a test on its
// own. It registers any cleanup with t.
type Factory func(t *testing.T, kinds []string) Queues

// Run runs the suite. Subtests run in parallel, each on its own queues.
func Run(t *testing.T, factory Factory) {
	kinds := []string{"run", "apply"}
	setup := func(t *testing.T) Queues {
		t.Helper()
		t.Parallel()
		return factory(t, kinds)
	}

	t.Run("SendReceiveDelete", func(t *testing.T) {
		q := setup(t)
		ctx := t.Context()
		want := queue.Message{Kind: "run", ID: "r1"}
		send(t, q, want)
		r := q.Receiver("run")
		d := receiveOne(t, r)
		if d.Message != want {
			t.Errorf("received %+v, want %+v", d.Message, want)
		}
		if d.Body == "" || d.MessageID == "" || d.Receipt == "" {
			t.Errorf("delivery lacks body, message id or receipt: %+v", d)
		}
		if d.ReceiveCount != 1 {
			t.Errorf("receive count = %d, want 1", d.ReceiveCount)
		}
		if err := r.Delete(ctx, d); err != nil {
			t.Fatalf("delete: %v", err)
		}
		expectNone(t, r)
	})

	t.Run("ReleaseRedeliversWithHigherCount", func(t *testing.T) {
		q := setup(t)
		ctx := t.Context()
		want := queue.Message{Kind: "run", ID: "r2"}
		send(t, q, want)
		r := q.Receiver("run")
		first := receiveOne(t, r)
		if err := r.Release(ctx, first, 0); err != nil {
			t.Fatalf("release: %v", err)
		}
		second := receiveOne(t, r)
		if second.Message != want || second.MessageID != first.MessageID {
			t.Errorf("redelivered %+v (%s), want %+v (%s)", second.Message, second.MessageID, want, first.MessageID)
		}
		if second.ReceiveCount <= first.ReceiveCount {
			t.Errorf("receive count %d after %d, want it to grow", second.ReceiveCount, first.ReceiveCount)
		}
		if err := r.Delete(ctx, second); err != nil {
			t.Fatalf("delete: %v", err)
		}
		expectNone(t, r)
	})

	t.Run("ReleaseWithDelay", func(t *testing.T) {
		q := setup(t)
		ctx := t.Context()
		send(t, q, queue.Message{Kind: "run", ID: "r3"})
		r := q.Receiver("run")
		d := receiveOne(t, r)
		if err := r.Release(ctx, d, time.Hour); err != nil {
			t.Fatalf("release: %v", err)
		}
		expectNone(t, r)
	})

	t.Run("ReceivedMessageIsInvisible", func(t *testing.T) {
		q := setup(t)
		ctx := t.Context()
		send(t, q, queue.Message{Kind: "run", ID: "r4"})
		r := q.Receiver("run")
		d := receiveOne(t, r)
		expectNone(t, r)
		if err := r.Release(ctx, d, 0); err != nil {
			t.Fatalf("release: %v", err)
		}
		again := receiveOne(t, r)
		if again.MessageID != d.MessageID {
			t.Errorf("got message %s after release, want %s", again.MessageID, d.MessageID)
		}
	})

	t.Run("DuplicatesAreDelivered", func(t *testing.T) {
		q := setup(t)
		m := queue.Message{Kind: "run", ID: "dup"}
		send(t, q, m)
		send(t, q, m)
		ds := receiveN(t, q.Receiver("run"), 2)
		if ds[0].MessageID == ds[1].MessageID {
			t.Errorf("two sends share message id %s", ds[0].MessageID)
		}
		for _, d := range ds {
			if d.Message != m {
				t.Errorf("received %+v, want %+v", d.Message, m)
			}
		}
	})

	t.Run("RoutesByKind", func(t *testing.T) {
		q := setup(t)
		run := queue.Message{Kind: "run", ID: "x1"}
		apply := queue.Message{Kind: "apply", ID: "x2"}
		send(t, q, run)
		send(t, q, apply)
		if got := receiveOne(t, q.Receiver("apply")).Message; got != apply {
			t.Errorf("apply queue gave %+v, want %+v", got, apply)
		}
		if got := receiveOne(t, q.Receiver("run")).Message; got != run {
			t.Errorf("run queue gave %+v, want %+v", got, run)
		}
		expectNone(t, q.Receiver("apply"))
	})

	t.Run("RefusesUnknownKindAndBadMessages", func(t *testing.T) {
		q := setup(t)
		ctx := t.Context()
		err := q.Sender.Send(ctx, queue.Message{Kind: "nope", ID: "n1"})
		if err == nil {
			t.Fatal("send to an unknown kind succeeded")
		}
		if code := molt.ErrorCode(err); code != molt.EINTERNAL {
			t.Errorf("unknown kind: code %q, want %q (%v)", code, molt.EINTERNAL, err)
		}
		for _, m := range []queue.Message{{Kind: "run"}, {ID: "x"}} {
			if err := q.Sender.Send(ctx, m); molt.ErrorCode(err) != molt.EINVALID {
				t.Errorf("send %+v: %v, want %s", m, err, molt.EINVALID)
			}
		}
		expectNone(t, q.Receiver("run"))
	})

	t.Run("BatchReceive", func(t *testing.T) {
		q := setup(t)
		for i := range 3 {
			send(t, q, queue.Message{Kind: "apply", ID: fmt.Sprintf("b%d", i)})
		}
		ds := receiveN(t, q.Receiver("apply"), 3)
		seen := map[string]bool{}
		for _, d := range ds {
			seen[d.Message.ID] = true
		}
		if len(seen) != 3 {
			t.Errorf("received ids %v, want b0, b1, b2", seen)
		}
	})

	t.Run("LongPollWakesOnSend", func(t *testing.T) {
		q := setup(t)
		r := q.Receiver("run")
		type result struct {
			ds  []queue.Delivery
			err error
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			ds, err := r.Receive(t.Context(), 1, 15*time.Second)
			done <- result{ds, err}
		}()
		send(t, q, queue.Message{Kind: "run", ID: "w1"})
		res := <-done
		if res.err != nil {
			t.Fatalf("receive: %v", res.err)
		}
		if len(res.ds) != 1 || res.ds[0].Message.ID != "w1" {
			t.Fatalf("received %+v, want w1", res.ds)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("long poll returned after %v; it should return when the message arrives", el)
		}
	})

	t.Run("LongPollEndsWithContext", func(t *testing.T) {
		q := setup(t)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		ds, err := q.Receiver("run").Receive(ctx, 1, 20*time.Second)
		el := time.Since(start)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Errorf("receive ended by its context: %v, want nil or the context's error", err)
		}
		if len(ds) != 0 {
			t.Errorf("received %d messages from an empty queue", len(ds))
		}
		if el > 5*time.Second {
			t.Errorf("receive returned %v after its context ended, want promptly", el)
		}
	})
}

func send(t *testing.T, q Queues, m queue.Message) {
	t.Helper()
	if err := q.Sender.Send(t.Context(), m); err != nil {
		t.Fatalf("send %+v: %v", m, err)
	}
}

// receiveOne waits for exactly one message.
func receiveOne(t *testing.T, r queue.Receiver) queue.Delivery {
	t.Helper()
	return receiveN(t, r, 1)[0]
}

// receiveN collects n messages, over several receives if needed (SQS may return
// fewer than asked), and fails if it takes over 15 s.
func receiveN(t *testing.T, r queue.Receiver, n int) []queue.Delivery {
	t.Helper()
	var out []queue.Delivery
	deadline := time.Now().Add(15 * time.Second)
	for len(out) < n {
		wait := time.Until(deadline)
		if wait <= 0 {
			t.Fatalf("received %d messages, want %d", len(out), n)
		}
		ds, err := r.Receive(t.Context(), 10, min(wait, 5*time.Second))
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		out = append(out, ds...)
	}
	if len(out) > n {
		t.Fatalf("received %d messages, want %d: %+v", len(out), n, out)
	}
	return out
}

// expectNone checks that nothing is delivered within a short wait.
func expectNone(t *testing.T, r queue.Receiver) {
	t.Helper()
	ds, err := r.Receive(t.Context(), 10, time.Second)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(ds) != 0 {
		t.Fatalf("received %d unexpected messages: %+v", len(ds), ds)
	}
}
