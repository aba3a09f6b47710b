package storetest

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/consumer"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// Peer benchmark workload, the same as bench/river's (scripts/bench-peer.sh
// runs both in alternating rounds).
const (
	peerWorkers  = 16
	peerLatencyN = 200                  // items created one at a time in the latency phase
	peerInterval = 5 * time.Millisecond // between them
	peerKind     = work.Kind("peer")
)

// PeerBatch is the batch BenchPeer's consumer hands the executor by default
// (up to this many wake-ups claimed in one round trip, within the 16 places).
const PeerBatch = 8

// PeerGather is how long BenchPeer's consumer may wait for places to free
// while wake-ups are in flight (consumer.Consumer.Gather).
var PeerGather = time.Millisecond

// BenchPeer measures molt's claim path on the workload of the peer benchmark
// against River: b.N no-op items of a kind without a budget, created before the
// consumer starts. The path is the one `molt serve` runs, with batching on: an
// in-process queue (memqueue), a consumer (internal/consumer) with 16 places
// handing the work.Executor batches of up to batch wake-ups (batch <= 1: one
// at a time, the consumer's default), which reads the items (one round trip),
// claims a batch in one round trip, runs the no-op attempts (each with its
// keep-alive and deadline) and commits their final writes, those ready
// together in one round trip; a place frees when its attempt has returned
// (queue.Report.Ended), as a River worker slot does. It reports jobs/s from
// the consumer's start to the last final write committed, and the store's
// write round trips (commits/job) and requests of any kind (requests/job) per
// item. Then, the workers idle,
// 200 items are created one at a time 5 ms apart, each with its wake-up, and
// it reports the pickup latency from the start of an item's create to the
// start of its attempt (after the claim), median and 90th percentile.
func BenchPeer(b *testing.B, open BenchOpener, batch int) {
	p, _, rec := benchProtocol(b, open)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	qs := memqueue.New()
	recv := qs.Receiver(string(peerKind))
	quiet := slog.New(slog.DiscardHandler)

	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		lat     []time.Duration
		ended   atomic.Int64
		allDone = make(chan struct{}, 1)
		target  atomic.Int64
	)
	attempt := func(ctx context.Context, a *work.Attempt) work.Outcome {
		started := time.Now()
		mu.Lock()
		if at, ok := created[a.Claim.ID]; ok {
			lat = append(lat, started.Sub(at))
		}
		mu.Unlock()
		return work.End("done", "", nil).Then(func(context.Context, work.Item) {
			if ended.Add(1) == target.Load() {
				signal(allDone)
			}
		})
	}
	ex := &work.Executor[struct{}]{Protocol: p, Queue: qs, Logger: quiet, Kind: peerKind,
		Policy: func(context.Context) (work.Policy, struct{}, error) {
			return work.Policy{Kind: peerKind, Timeout: time.Minute, MaxAttempts: 3}, struct{}{}, nil
		},
		Prepare: func(context.Context, work.Item, work.Policy, struct{}) (work.AttemptFunc, error) {
			return attempt, nil
		},
	}
	var failures atomic.Int64
	c := &consumer.Consumer{Receiver: recv, Handler: failCounter{ex, &failures}, Log: quiet,
		Workers: peerWorkers, Batch: batch, Gather: PeerGather, Wait: time.Second}
	var wg sync.WaitGroup
	startWorkers := func() { wg.Go(func() { _ = c.Run(ctx) }) }
	defer wg.Wait()
	defer cancel()
	wait := func(what string, n int64) {
		b.Helper()
		select {
		case <-allDone:
		case <-time.After(5 * time.Minute):
			b.Fatalf("%s: %d of %d items ended", what, ended.Load(), n)
		}
		if n := failures.Load(); n > 0 {
			b.Fatalf("%s: %d wake-ups failed", what, n)
		}
	}

	// Throughput: b.N items waiting, then the workers.
	items := make([]work.Item, b.N)
	for i := range items {
		it, err := p.Create(ctx, work.Item{Kind: peerKind})
		if err != nil {
			b.Fatal(err)
		}
		items[i] = it
		if err := qs.Send(ctx, queue.Message{Kind: string(peerKind), ID: it.ID}); err != nil {
			b.Fatal(err)
		}
	}
	target.Store(int64(b.N))
	commits0, reqs0 := rec.commits.Load(), rec.reqs.Load()
	b.ResetTimer()
	start := time.Now()
	startWorkers()
	wait("throughput", int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	commits, reqs := rec.commits.Load()-commits0, rec.reqs.Load()-reqs0

	// Pickup latency: the workers idle, items created one at a time.
	ended.Store(0)
	target.Store(peerLatencyN)
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < peerLatencyN; i++ {
		at := time.Now()
		id := p.IDs.NewID()
		mu.Lock()
		created[id] = at
		mu.Unlock()
		if _, err := p.Create(ctx, work.Item{Kind: peerKind, ID: id}); err != nil {
			b.Fatal(err)
		}
		if err := qs.Send(ctx, queue.Message{Kind: string(peerKind), ID: id}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(peerInterval)
	}
	wait("latency", peerLatencyN)
	mu.Lock()
	d := slices.Clone(lat)
	mu.Unlock()
	slices.Sort(d)
	q := func(f float64) float64 {
		return float64(d[min(len(d)-1, int(f*float64(len(d))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(q(0.5), "pickup-p50-ms")
	b.ReportMetric(q(0.9), "pickup-p90-ms")
	b.ReportMetric(float64(commits)/float64(b.N), "commits/job")
	b.ReportMetric(float64(reqs)/float64(b.N), "requests/job")
}

// failCounter is the executor as the consumer's handler, counting the
// wake-ups whose handling failed (the consumer would retry them after a
// backoff; the benchmark fails instead).
type failCounter struct {
	*work.Executor[struct{}]
	n *atomic.Int64
}

func (f failCounter) Handle(ctx context.Context, m queue.Message) error {
	err := f.Executor.Handle(ctx, m)
	if err != nil {
		f.n.Add(1)
	}
	return err
}

func (f failCounter) HandleBatch(ctx context.Context, ms []queue.Message, r queue.Report) {
	done := r.Done
	r.Done = func(i int, err error) {
		if err != nil {
			f.n.Add(1)
		}
		done(i, err)
	}
	f.Executor.HandleBatch(ctx, ms, r)
}

// signal sends on c unless a signal is already waiting there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
