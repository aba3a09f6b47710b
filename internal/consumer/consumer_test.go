package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/consumer"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
)

// recorder wraps a receiver and signals each delete.
type recorder struct {
	queue.Receiver
	deleted chan queue.Delivery
}

func (r *recorder) Delete(ctx context.Context, d queue.Delivery) error {
	err := r.Receiver.Delete(ctx, d)
	r.deleted <- d
	return err
}

// run starts c and returns a function that stops it and waits for Run to return.
func run(t *testing.T, c *consumer.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("consumer did not stop after its context ended")
		}
	}
}

func noBackoff(int) time.Duration { return 0 }

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	rec := &recorder{q.Receiver("run"), make(chan queue.Delivery, 10)}
	var calls atomic.Int32
	c := &consumer.Consumer{
		Receiver: rec,
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			if calls.Add(1) == 1 {
				return errors.New("transient")
			}
			return nil
		}),
		Log:     obs.NewLogger(&bytes.Buffer{}),
		Backoff: noBackoff,
		Wait:    time.Second,
	}
	stop := run(t, c)
	if err := q.Send(t.Context(), queue.Message{Kind: "run", ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	d := <-rec.deleted
	stop()
	if d.ReceiveCount != 2 || calls.Load() != 2 {
		t.Errorf("deleted at receive %d after %d calls, want 2 and 2", d.ReceiveCount, calls.Load())
	}
	if n := q.Queue("run").Len(); n != 0 {
		t.Errorf("queue length %d, want 0", n)
	}
}

func TestDropAfterMaxReceives(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	rec := &recorder{q.Receiver("run"), make(chan queue.Delivery, 10)}
	var calls atomic.Int32
	var logs syncBuffer
	c := &consumer.Consumer{
		Receiver: rec,
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			calls.Add(1)
			return errors.New("always fails")
		}),
		Log:     obs.NewLogger(&logs),
		Backoff: noBackoff,
		Wait:    time.Second,
	}
	stop := run(t, c)
	if err := q.Send(t.Context(), queue.Message{Kind: "run", ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	d := <-rec.deleted
	stop()
	if d.ReceiveCount != consumer.DefaultMaxReceives || calls.Load() != consumer.DefaultMaxReceives {
		t.Errorf("dropped at receive %d after %d calls, want %d", d.ReceiveCount, calls.Load(), consumer.DefaultMaxReceives)
	}
	if n := q.Queue("run").Len(); n != 0 {
		t.Errorf("queue length %d, want 0", n)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"dropping message after its last allowed handling failed"`, `"kind":"run"`, `"id":"r1"`, `"message_id":"`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

// script is a receiver that delivers a fixed list once, then waits like an empty
// queue, recording what the consumer does with each delivery.
type script struct {
	mu       sync.Mutex
	pending  []queue.Delivery
	deleted  []string
	released map[string]time.Duration
	done     chan struct{} // closed when every delivery was deleted or released
}

func newScript(ds ...queue.Delivery) *script {
	return &script{pending: ds, released: map[string]time.Duration{}, done: make(chan struct{})}
}

func (s *script) Receive(ctx context.Context, n int, wait time.Duration) ([]queue.Delivery, error) {
	s.mu.Lock()
	if len(s.pending) > 0 {
		d := s.pending[0]
		s.pending = s.pending[1:]
		s.mu.Unlock()
		return []queue.Delivery{d}, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *script) Delete(ctx context.Context, d queue.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, d.MessageID)
	s.check()
	return nil
}

func (s *script) Release(ctx context.Context, d queue.Delivery, delay time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released[d.MessageID] = delay
	s.check()
	return nil
}

func (s *script) check() {
	if len(s.pending) == 0 && len(s.deleted)+len(s.released) == 4 {
		close(s.done)
	}
}

func TestPoisonAndPanics(t *testing.T) {
	t.Parallel()
	s := newScript(
		queue.Delivery{MessageID: "garbage", Body: strings.Repeat("x", 500), ReceiveCount: 1},
		queue.Delivery{MessageID: "worn", Body: `{"kind":"run","id":"r1"}`, ReceiveCount: 6},
		queue.Delivery{MessageID: "panics", Body: `{"kind":"run","id":"boom"}`, ReceiveCount: 2},
		queue.Delivery{MessageID: "fine", Body: `{"kind":"run","id":"ok"}`, ReceiveCount: 1},
	)
	var handled []string
	var mu sync.Mutex
	var logs syncBuffer
	c := &consumer.Consumer{
		Receiver: s,
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			mu.Lock()
			handled = append(handled, m.ID)
			mu.Unlock()
			if m.ID == "boom" {
				panic("handler bug")
			}
			return nil
		}),
		Log: obs.NewLogger(&logs),
	}
	stop := run(t, c)
	<-s.done
	stop()
	if got, want := strings.Join(s.deleted, ","), "garbage,worn,fine"; got != want {
		t.Errorf("deleted %s, want %s", got, want)
	}
	if d, ok := s.released["panics"]; !ok || d != consumer.Backoff(2) {
		t.Errorf("released %v, want panics after %v", s.released, consumer.Backoff(2))
	}
	if got, want := strings.Join(handled, ","), "boom,ok"; got != want {
		t.Errorf("handled %s, want %s (poison messages must not reach the handler)", got, want)
	}
	out := logs.String()
	if strings.Contains(out, strings.Repeat("x", 201)) || !strings.Contains(out, strings.Repeat("x", 200)) {
		t.Errorf("poison body not logged as a 200 character preview:\n%s", out)
	}
	if !strings.Contains(out, "handler panic: handler bug") {
		t.Errorf("panic not logged:\n%s", out)
	}
}

func TestStopReleasesInFlight(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	started := make(chan struct{})
	c := &consumer.Consumer{
		Receiver: q.Receiver("apply"),
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}),
		Log:  obs.NewLogger(&bytes.Buffer{}),
		Wait: 20 * time.Second,
	}
	stop := run(t, c)
	if err := q.Send(t.Context(), queue.Message{Kind: "apply", ID: "a1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	// Released at once, not after the backoff or the visibility timeout.
	ds, err := q.Receiver("apply").Receive(t.Context(), 1, 0)
	if err != nil || len(ds) != 1 || ds[0].Message.ID != "a1" {
		t.Fatalf("after stop: %v, %+v; want a1 visible again", err, ds)
	}
}

func TestWorkersRunConcurrently(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	const n = 3
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	rec := &recorder{q.Receiver("turn"), make(chan queue.Delivery, n)}
	c := &consumer.Consumer{
		Receiver: rec,
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			arrived.Done()
			select { // each handler waits until all n run at once
			case <-all:
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("handlers did not run concurrently")
			}
		}),
		Log:     obs.NewLogger(&bytes.Buffer{}),
		Workers: n,
		Wait:    time.Second,
	}
	stop := run(t, c)
	for _, id := range []string{"t1", "t2", "t3"} {
		if err := q.Send(t.Context(), queue.Message{Kind: "turn", ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if d := <-rec.deleted; d.ReceiveCount != 1 {
			t.Errorf("message %s deleted at receive %d, want 1", d.Message.ID, d.ReceiveCount)
		}
	}
	stop()
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {7, time.Minute}, {100, time.Minute}} {
		if got := consumer.Backoff(c.n); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestHandledDuringStopIsDeleted(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	started := make(chan struct{})
	c := &consumer.Consumer{
		Receiver: q.Receiver("run"),
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			close(started)
			<-ctx.Done()
			return nil // finished its work despite the stop
		}),
		Log: obs.NewLogger(&bytes.Buffer{}),
	}
	stop := run(t, c)
	if err := q.Send(t.Context(), queue.Message{Kind: "run", ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	if n := q.Queue("run").Len(); n != 0 {
		t.Errorf("queue length %d after a handled message, want 0", n)
	}
}

// batcher is a queue.BatchHandler that records the batches it is handed and
// how many messages it holds at once; its messages fail when their id starts
// with "fail", and one with id "panic" panics after the others are done.
type batcher struct {
	mu       sync.Mutex
	sizes    []int
	held     atomic.Int32
	maxHeld  atomic.Int32
	release  chan struct{} // closed: let the handlings end
	handling chan struct{} // one send per message taken
}

func (b *batcher) Handle(ctx context.Context, m queue.Message) error {
	panic("Handle called on a batch consumer")
}

func (b *batcher) HandleBatch(ctx context.Context, ms []queue.Message, r queue.Report) {
	done := r.Done
	b.mu.Lock()
	b.sizes = append(b.sizes, len(ms))
	b.mu.Unlock()
	h := b.held.Add(int32(len(ms)))
	for {
		m := b.maxHeld.Load()
		if h <= m || b.maxHeld.CompareAndSwap(m, h) {
			break
		}
	}
	for range ms {
		b.handling <- struct{}{}
	}
	<-b.release
	b.held.Add(-int32(len(ms)))
	for i, m := range ms {
		switch {
		case m.ID == "panic":
			defer panic("boom")
		case strings.HasPrefix(m.ID, "fail"):
			done(i, errors.New("failed"))
		default:
			done(i, nil)
		}
	}
}

// TestBatches: with Batch, queued messages reach a BatchHandler together, at
// most Workers at once; each is settled on its own result (deleted, released
// for a retry), and one a panicking batch had not finished is released.
func TestBatches(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	rec := &recorder{q.Receiver("run"), make(chan queue.Delivery, 20)}
	ids := []string{"a", "b", "fail-c", "d", "panic", "e", "f"}
	for _, id := range ids {
		if err := q.Send(t.Context(), queue.Message{Kind: "run", ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	b := &batcher{release: make(chan struct{}), handling: make(chan struct{}, len(ids))}
	c := &consumer.Consumer{Receiver: rec, Handler: b, Log: obs.NewLogger(&bytes.Buffer{}),
		Workers: 4, Batch: 3, Wait: 50 * time.Millisecond, Backoff: func(int) time.Duration { return time.Hour }}
	stop := run(t, c)
	for range 4 {
		<-b.handling
	}
	select {
	case <-b.handling:
		t.Fatal("more than Workers messages handled at once")
	case <-time.After(50 * time.Millisecond):
	}
	close(b.release)
	deleted := map[string]bool{}
	for range len(ids) - 2 {
		d := <-rec.deleted
		deleted[d.Message.ID] = true
	}
	stop()
	for _, id := range []string{"a", "b", "d", "e", "f"} {
		if !deleted[id] {
			t.Errorf("%s not deleted (deleted: %v)", id, deleted)
		}
	}
	if deleted["fail-c"] || deleted["panic"] {
		t.Errorf("a failed or panicked message was deleted: %v", deleted)
	}
	if n := q.Queue("run").Len(); n != 2 {
		t.Errorf("%d messages left in the queue, want 2 (released for a retry)", n)
	}
	if m := b.maxHeld.Load(); m > 4 {
		t.Errorf("%d messages held at once, want at most Workers (4)", m)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The first receive took 3 (Batch) of the 4 free places; the batches run
	// at once, so any of them may have reached the handler first.
	if len(b.sizes) == 0 || slices.Max(b.sizes) != 3 {
		t.Errorf("batch sizes %v, want one of 3 (Batch)", b.sizes)
	}
}

// endedFirst is a BatchHandler whose first batch reports its first message's
// work ended at once but holds every result until release is closed.
type endedFirst struct {
	batches chan []queue.Message
	release chan struct{}
	first   atomic.Bool
}

func (h *endedFirst) Handle(ctx context.Context, m queue.Message) error {
	panic("Handle called on a batch consumer")
}

func (h *endedFirst) HandleBatch(ctx context.Context, ms []queue.Message, r queue.Report) {
	h.batches <- ms
	if h.first.CompareAndSwap(false, true) {
		r.Ended(0)
		<-h.release
	}
	for i := range ms {
		r.Done(i, nil)
	}
}

// TestEndedFreesPlace: a message whose work ended gives its place to the next
// message before its result (its final write) is in.
func TestEndedFreesPlace(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	for _, id := range []string{"a", "b", "c"} {
		if err := q.Send(t.Context(), queue.Message{Kind: "run", ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	h := &endedFirst{batches: make(chan []queue.Message, 3), release: make(chan struct{})}
	rec := &recorder{q.Receiver("run"), make(chan queue.Delivery, 3)}
	c := &consumer.Consumer{Receiver: rec, Handler: h, Log: obs.NewLogger(&bytes.Buffer{}),
		Workers: 2, Batch: 2, Wait: 50 * time.Millisecond}
	stop := run(t, c)
	defer stop()
	if first := recv(t, h.batches); len(first) != 2 {
		t.Fatalf("first batch %v, want 2 messages", first)
	}
	// Both places are taken until a's work ends, which frees one for c.
	if next := recv(t, h.batches); len(next) != 1 || next[0].ID != "c" {
		t.Fatalf("second batch %v, want [c] while the first holds its results", next)
	}
	close(h.release)
	for range 3 {
		<-rec.deleted
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}
