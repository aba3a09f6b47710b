package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// BenchPeer measures molt's claim path on the workload of the peer benchmark
// against River: b.N no-op items of a kind without a budget, created before 16
// workers start, each worker taking wake-ups from an in-process queue
// (memqueue, as in `molt serve`) and doing what the executor does for one:
// read the item, claim it, run nothing, commit the end; it reports jobs/s,
// from the workers' start to the last end committed. Then, the workers idle,
// 200 items are created one at a time 5 ms apart, each with its wake-up, and
// it reports the pickup latency from the start of an item's create to the
// start of its work (after the claim), median and 90th percentile.
func BenchPeer(b *testing.B, open BenchOpener) {
	p, _, _ := benchProtocol(b, open)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	qs := memqueue.New()
	recv := qs.Receiver(string(peerKind))

	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		lat     []time.Duration
		ended   atomic.Int64
		failed  atomic.Value
		allDone = make(chan struct{}, 1)
		target  atomic.Int64
	)
	handle := func(m queue.Message) error {
		seen, err := p.Backend.GetItem(ctx, peerKind, m.ID)
		if err != nil {
			return err
		}
		cl, _, err := p.ClaimSeen(ctx, seen, 0)
		if err != nil {
			return err
		}
		started := time.Now()
		mu.Lock()
		if at, ok := created[m.ID]; ok {
			lat = append(lat, started.Sub(at))
		}
		mu.Unlock()
		if _, err := p.Transition(ctx, cl, work.Transition{To: "done"}); err != nil {
			return err
		}
		if ended.Add(1) == target.Load() {
			signal(allDone)
		}
		return nil
	}
	var wg sync.WaitGroup
	startWorkers := func() {
		for w := 0; w < peerWorkers; w++ {
			wg.Go(func() {
				for ctx.Err() == nil {
					ds, err := recv.Receive(ctx, 1, time.Second)
					if err != nil {
						continue // ctx ended
					}
					for _, d := range ds {
						if err := handle(d.Message); err != nil {
							failed.Store(fmt.Errorf("%s: %w", d.Message.ID, err))
							signal(allDone)
							return
						}
						_ = recv.Delete(ctx, d)
					}
				}
			})
		}
	}
	defer wg.Wait()
	defer cancel()

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
	b.ResetTimer()
	start := time.Now()
	startWorkers()
	<-allDone
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}

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
	select {
	case <-allDone:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d latency items ended", ended.Load(), peerLatencyN)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
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
}

// signal sends on c unless a signal is already waiting there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
