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

// BenchOpener opens a fresh, empty store for one benchmark.
type BenchOpener func(b *testing.B, o Options) store.Store

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

func benchProtocol(b *testing.B, open BenchOpener) (*work.Protocol, *counting) {
	b.Helper()
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	c := &counting{Backend: open(b, Options{Clock: clock, IDs: ids})}
	return &work.Protocol{Backend: c, Clock: clock, IDs: ids}, c
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
		p, c := benchProtocol(b, open)
		items := benchItems(b, p, b.N)
		ctx := context.Background()
		c.reqs.Store(0)
		c.writes.Store(0)
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
		writes := float64(c.writes.Load()) / float64(b.N)
		b.ReportMetric(float64(c.reqs.Load())/float64(b.N), "requests/cycle")
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
