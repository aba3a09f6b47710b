package memqueue_test

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, kinds []string) queuetest.Queues {
		q := memqueue.New(memqueue.WithKinds(kinds...), memqueue.WithVisibilityTimeout(time.Minute))
		return queuetest.Queues{Sender: q, Receiver: q.Receiver}
	})
}

func TestVisibilityTimeoutRedelivers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memqueue.New(memqueue.WithVisibilityTimeout(100 * time.Millisecond))
	if err := q.Send(ctx, queue.Message{Kind: "run", ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	r := q.Receiver("run")
	first, err := r.Receive(ctx, 1, time.Second)
	if err != nil || len(first) != 1 {
		t.Fatalf("first receive: %v, %d messages", err, len(first))
	}
	start := time.Now()
	// Neither deleted nor released: the message comes back when its visibility
	// timeout passes, and the waiting receive wakes up for it.
	again, err := r.Receive(ctx, 1, 5*time.Second)
	if err != nil || len(again) != 1 {
		t.Fatalf("second receive: %v, %d messages", err, len(again))
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("redelivery took %v, want about the 100ms visibility timeout", el)
	}
	if again[0].ReceiveCount != 2 || again[0].MessageID != first[0].MessageID {
		t.Errorf("redelivered %+v, want message %s with receive count 2", again[0], first[0].MessageID)
	}
	// The first receipt is stale now: deleting with it leaves the message.
	if err := r.Delete(ctx, first[0]); err != nil {
		t.Fatal(err)
	}
	if n := q.Queue("run").Len(); n != 1 {
		t.Errorf("stale delete removed the message: len %d, want 1", n)
	}
	if err := r.Delete(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if n := q.Queue("run").Len(); n != 0 {
		t.Errorf("len after delete = %d, want 0", n)
	}
}

func TestReleaseWakesWaitingReceiver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memqueue.New()
	if err := q.Send(ctx, queue.Message{Kind: "turn", ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	r := q.Receiver("turn")
	ds, err := r.Receive(ctx, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(ds))
	}
	got := make(chan []queue.Delivery, 1)
	go func() {
		again, _ := r.Receive(ctx, 1, 20*time.Second)
		got <- again
	}()
	if err := r.Release(ctx, ds[0], 0); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-got:
		if len(again) != 1 || again[0].Message.ID != "t1" {
			t.Errorf("waiting receiver got %+v, want t1", again)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("release did not wake the waiting receiver")
	}
}

func TestAnyKindWithoutWithKinds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memqueue.New()
	if err := q.Send(ctx, queue.Message{Kind: "whatever", ID: "w"}); err != nil {
		t.Fatalf("send to a new kind: %v", err)
	}
	if n := q.Queue("whatever").Len(); n != 1 {
		t.Errorf("len = %d, want 1", n)
	}
}
