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

// counting is a work.Backend that counts the calls made through it, and the
// writes each record (item, slot counter, lock) receives.
type counting struct {
	work.Backend
	reqs, writes atomic.Int64
	commits      atomic.Int64 // Commit and CommitEach calls: write round trips
	mu           sync.Mutex
	perRecord    map[string]int64
}

func (c *counting) Commit(ctx context.Context, ops ...work.Op) error {
	c.reqs.Add(1)
	c.commits.Add(1)
	c.writes.Add(1)
	c.mu.Lock()
	if c.perRecord == nil {
		c.perRecord = map[string]int64{}
	}
	for _, op := range ops {
		for _, r := range records(op) {
			c.perRecord[r]++
		}
	}
	c.mu.Unlock()
	return c.Backend.Commit(ctx, ops...)
}

// CommitEach counts one request carrying len(cs) writes.
func (c *counting) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	c.reqs.Add(1)
	c.commits.Add(1)
	c.writes.Add(int64(len(cs)))
	c.mu.Lock()
	if c.perRecord == nil {
		c.perRecord = map[string]int64{}
	}
	for _, ops := range cs {
		for _, op := range ops {
			for _, r := range records(op) {
				c.perRecord[r]++
			}
		}
	}
	c.mu.Unlock()
	return c.Backend.CommitEach(ctx, cs...)
}

// hottest returns the most writes any one record has received, and resets the
// counts.
func (c *counting) hottest() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m int64
	for _, n := range c.perRecord {
		m = max(m, n)
	}
	c.perRecord = nil
	return m
}

// records names the records op writes (as work.CheckCommit does).
func records(op work.Op) []string {
	switch op := op.(type) {
	case work.CreateItem:
		return []string{"item " + string(op.Item.Kind) + "/" + op.Item.ID}
	case work.UpdateItem:
		return []string{"item " + string(op.Kind) + "/" + op.ID}
	case work.DeleteItem:
		return []string{"item " + string(op.Kind) + "/" + op.ID}
	case work.AdjustSlots:
		return []string{work.SlotsRecord(op.Kind, op.Shard)}
	case work.AcquireLock:
		return []string{"lock " + op.Key}
	case work.ReleaseLock:
		return []string{"lock " + op.Key}
	case work.CheckedOp:
		var keys []string
		for _, r := range op.Writes() {
			keys = append(keys, r.Key)
		}
		return keys
	}
	return nil
}

// GetItems counts one request when the store reads a batch in one
// (work.BatchReader), else one per item.
func (c *counting) GetItems(ctx context.Context, k work.Kind, ids []string) ([]work.Item, []error) {
	if br, ok := c.Backend.(work.BatchReader); ok {
		c.reqs.Add(1)
		return br.GetItems(ctx, k, ids)
	}
	items, errs := make([]work.Item, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		items[i], errs[i] = c.GetItem(ctx, k, id)
	}
	return items, errs
}

func (c *counting) GetItem(ctx context.Context, k work.Kind, id string) (work.Item, error) {
	c.reqs.Add(1)
	return c.Backend.GetItem(ctx, k, id)
}

func (c *counting) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	c.reqs.Add(1)
	return c.Backend.ListItems(ctx, q)
}

func benchProtocol(b *testing.B, open BenchOpener) (*work.Protocol, Counter, *counting) {
	b.Helper()
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	s, counter := open(b, Options{Clock: clock, IDs: ids})
	c := &counting{Backend: s}
	if counter == nil {
		counter = func() (int64, int64) { return c.reqs.Load(), c.writes.Load() }
	}
	return &work.Protocol{Backend: c, Clock: clock, IDs: ids}, counter, c
}

// benchBatch is the batch of BenchClaims' batched cycles (SQS's largest
// delivery to a Lambda).
const benchBatch = 10

// benchShardedBudget is the sharded budget of BenchClaims (the chat turns'
// default budget): 4 shards of 8.
const benchShardedBudget = 32

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
// does for one wake-up (read the item, claim, heartbeat, finish) under a budget
// and "CycleUnbudgeted" without one; each reports the store calls and
// conditional writes per cycle against the minimum of one write per transition
// (3), and hottest-writes/cycle: the most writes any single record (item, slot
// counter, lock) receives, divided by the cycles. Each cycle's own item and
// lock are written only in that cycle, so it tends to 0 unless a record is
// shared by every cycle (a budgeted kind's slot counter: 2, its claim and its
// release); that record is the one a DynamoDB table's per-item write rate
// bounds. "CycleSharded" runs the cycle under a budget of 32, whose counter
// work.SlotShards splits into 4 shards: each cycle writes the shard its item
// starts at, so the hottest shard takes about 2/4 writes a cycle. "Batched",
// "BatchedSharded" and "BatchedUnbudgeted" claim and finish batches of 10
// items (Protocol.ClaimEach, TransitionEach: the executor's path for a batch
// of wake-ups) and report the same per item. "Parallel16" has 16 claimers
// claim and finish b.N items and reports claims per second.
func BenchClaims(b *testing.B, open BenchOpener) {
	cycle := func(budget int) func(b *testing.B) {
		return func(b *testing.B) {
			p, count, rec := benchProtocol(b, open)
			items := benchItems(b, p, b.N)
			ctx := context.Background()
			reqs0, writes0 := count()
			rec.hottest() // not the creates
			b.ResetTimer()
			for _, it := range items {
				seen, err := p.Backend.GetItem(ctx, it.Kind, it.ID)
				if err != nil {
					b.Fatal(err)
				}
				cl, _, err := p.ClaimSeen(ctx, seen, budget)
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
			b.ReportMetric(float64(rec.hottest())/float64(b.N), "hottest-writes/cycle")
		}
	}
	b.Run("Cycle", cycle(1))
	b.Run("CycleSharded", cycle(benchShardedBudget))
	b.Run("CycleUnbudgeted", cycle(0))
	// Batched: the executor's path for a batch of wake-ups, claims of
	// benchBatch items in one ClaimEach and their final writes in one
	// TransitionEach (no heartbeat: a batch of no-op attempts ends before
	// one is due); per item, with a budget (that every batch fits in) and
	// without.
	batched := func(budget int) func(b *testing.B) {
		return func(b *testing.B) {
			p, count, rec := benchProtocol(b, open)
			items := benchItems(b, p, b.N)
			ctx := context.Background()
			reqs0, writes0 := count()
			rec.hottest()
			b.ResetTimer()
			for len(items) > 0 {
				n := min(len(items), benchBatch)
				batch := items[:n]
				items = items[n:]
				var ms []work.Move
				for _, r := range p.ClaimEach(ctx, batch, budget) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					ms = append(ms, work.Move{Claim: r.Claim, To: work.Transition{To: "done"}})
				}
				for _, r := range p.TransitionEach(ctx, ms) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.StopTimer()
			reqs1, writes1 := count()
			b.ReportMetric(float64(reqs1-reqs0)/float64(b.N), "requests/cycle")
			b.ReportMetric(float64(writes1-writes0)/float64(b.N), "writes/cycle")
			b.ReportMetric(float64(rec.hottest())/float64(b.N), "hottest-writes/cycle")
		}
	}
	b.Run("Batched", batched(benchBatch))
	b.Run("BatchedSharded", batched(benchShardedBudget))
	b.Run("BatchedUnbudgeted", batched(0))
	b.Run("Parallel16", func(b *testing.B) {
		p, _, _ := benchProtocol(b, open)
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
