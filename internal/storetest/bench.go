package storetest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/work"
)

// BenchOpener opens a fresh, empty store for one benchmark. It may return a
// Counter of the requests the store sends (DynamoDB API calls, say); when nil,
// the benchmark counts calls of the store's Backend methods.
type BenchOpener func(b *testing.B, o Options) (store.Store, Counter)

// Counter reports the requests and writes sent so far.
type Counter func() (requests, writes int64)

// counting is a work.Backend that counts the calls made through it.
type counting struct {
	work.Backend
	reqs, writes atomic.Int64
}

func (c *counting) Commit(ctx context.Context, ops ...work.Op) error {
	c.reqs.Add(1)
	c.writes.Add(1)
	return c.Backend.Commit(ctx, ops...)
}

func (c *counting) GetItem(ctx context.Context, k work.Kind, id string) (work.Item, error) {
	c.reqs.Add(1)
	return c.Backend.GetItem(ctx, k, id)
}

func (c *counting) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	c.reqs.Add(1)
	return c.Backend.ListItems(ctx, q)
}

func benchProtocol(b *testing.B, open BenchOpener) (*work.Protocol, Counter) {
	b.Helper()
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	s, counter := open(b, Options{Clock: clock, IDs: ids})
	c := &counting{Backend: s}
	if counter == nil {
		counter = func() (int64, int64) { return c.reqs.Load(), c.writes.Load() }
	}
	return &work.Protocol{Backend: c, Clock: clock, IDs: ids}, counter
}

func benchItems(b *testing.B, p *work.Protocol, n int) []work.Item {
	b.Helper()
	items := make([]work.Item, n)
	for i := range items {
		it, err := p.Create(context.Background(), work.Item{Kind: "bench", LockKey: "apply/bench-" + strconv.Itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		items[i] = it
	}
	return items
}

// BenchClaims measures the claim protocol on a store: "Cycle" runs what a worker
// does for one wake-up (read the item, claim, heartbeat, finish) and reports the
// store calls and conditional writes per cycle against the minimum of one write
// per transition (3); "Parallel16" has 16 claimers claim and finish b.N items
// and reports claims per second.
func BenchClaims(b *testing.B, open BenchOpener) {
	b.Run("Cycle", func(b *testing.B) {
		p, count := benchProtocol(b, open)
		items := benchItems(b, p, b.N)
		ctx := context.Background()
		reqs0, writes0 := count()
		b.ResetTimer()
		for _, it := range items {
			seen, err := p.Backend.GetItem(ctx, it.Kind, it.ID)
			if err != nil {
				b.Fatal(err)
			}
			cl, _, err := p.ClaimSeen(ctx, seen, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Heartbeat(ctx, cl); err != nil {
				b.Fatal(err)
			}
			if _, err := p.Transition(ctx, cl, work.Transition{To: "done"}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reqs1, writes1 := count()
		writes := float64(writes1-writes0) / float64(b.N)
		b.ReportMetric(float64(reqs1-reqs0)/float64(b.N), "requests/cycle")
		b.ReportMetric(writes, "writes/cycle")
		b.ReportMetric(writes/3, "writes-x-minimum")
	})
	b.Run("Parallel16", func(b *testing.B) {
		p, _ := benchProtocol(b, open)
		items := benchItems(b, p, b.N)
		ctx := context.Background()
		next := make(chan work.Item, len(items))
		for _, it := range items {
			next <- it
		}
		close(next)
		var failed atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < 16; w++ {
			wg.Go(func() {
				for it := range next {
					cl, _, err := p.ClaimSeen(ctx, it, 0)
					if err != nil {
						failed.Add(1)
						continue
					}
					if _, err := p.Transition(ctx, cl, work.Transition{To: "done"}); err != nil {
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		if n := failed.Load(); n > 0 {
			b.Fatalf("%d of %d claims failed", n, b.N)
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "claims/s")
	})
}
