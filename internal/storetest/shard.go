package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// shardedBudget is large enough for work.SlotShards to split its counter:
// 3 shards of 8.
const shardedBudget = 24

// testShardedClaimRace: 60 claimers race for a sharded budget of 24. With no
// release exactly 24 claims land, though every claimer starts at the same
// shard (so 16 of them land only by trying the others); then,
// claiming and releasing, never more than 24 are held, by the claimers' count
// or the store's counter, and every release frees the shard its claim took.
func testShardedClaimRace(t *testing.T, open Opener) {
	const claimers = 60
	if work.SlotShards(shardedBudget) < 2 {
		t.Fatalf("budget %d is not sharded", shardedBudget)
	}
	e := setup(t, open)
	var items []work.Item
	for len(items) < claimers {
		if it := e.create(kindT, ""); work.FirstSlotShard(it.ID, shardedBudget) == 0 {
			items = append(items, it)
		}
	}
	var (
		ok, full atomic.Int64
		perShard [work.MaxSlotShards]atomic.Int64
		start    = make(chan struct{})
		wg       sync.WaitGroup
		errs     = make(chan error, claimers)
		claims   = make([]work.Claim, claimers)
	)
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, _, err := e.p.ClaimSeen(e.ctx, it, shardedBudget)
			switch {
			case err == nil:
				ok.Add(1)
				perShard[c.SlotShard].Add(1)
				claims[i] = c
			case molt.ErrorReason(err) == work.ReasonBudgetFull:
				full.Add(1)
			default:
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("claim: %v", err)
	}
	if ok.Load() != shardedBudget || full.Load() != claimers-shardedBudget {
		t.Fatalf("%d claims landed and %d were refused, want exactly %d and %d", ok.Load(), full.Load(),
			shardedBudget, claimers-shardedBudget)
	}
	for k := range work.MaxSlotShards {
		if n := perShard[k].Load(); int(n) != work.ShardCap(shardedBudget, k) {
			t.Fatalf("shard %d holds %d claims, want its share %d", k, n, work.ShardCap(shardedBudget, k))
		}
	}
	if n := e.active(kindT); n != shardedBudget {
		t.Fatalf("active count %d, want %d", n, shardedBudget)
	}
	for i, c := range claims {
		if c.Token == "" {
			continue
		}
		if got := e.get(kindT, c.ID); !got.Slot || got.SlotShard != c.SlotShard {
			t.Fatalf("stored item %s slot %v shard %d, want its claim's shard %d", c.ID, got.Slot, got.SlotShard, c.SlotShard)
		}
		if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
			t.Fatalf("finish %d: %v", i, err)
		}
	}
	if n := e.active(kindT); n != 0 {
		t.Fatalf("active count %d after every release, want 0", n)
	}

	// Claim and release concurrently.
	const total = 150
	queue := make(chan work.Item, total)
	var left atomic.Int64
	for range total {
		queue <- e.create(kindT, "")
	}
	left.Store(total)
	var held, maxHeld atomic.Int64
	failures := make(chan string, claimers+1)
	stop := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Add(1)
	go func() {
		defer monitor.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if c, err := e.s.ActiveCount(e.ctx, kindT); err == nil && c > shardedBudget {
				failures <- fmt.Sprintf("store active count %d exceeded the budget", c)
				return
			}
		}
	}()
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Load() > 0 {
				var it work.Item
				select {
				case it = <-queue:
				default:
					time.Sleep(time.Millisecond)
					continue
				}
				c, _, err := e.p.ClaimSeen(e.ctx, it, shardedBudget)
				if molt.ErrorReason(err) == work.ReasonBudgetFull {
					queue <- it
					continue
				}
				if err != nil {
					failures <- "claim: " + err.Error()
					return
				}
				h := held.Add(1)
				for m := maxHeld.Load(); h > m && !maxHeld.CompareAndSwap(m, h); m = maxHeld.Load() {
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
					failures <- "finish: " + err.Error()
					return
				}
				left.Add(-1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	monitor.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
	if m := maxHeld.Load(); m > shardedBudget {
		t.Fatalf("%d claims held at once, budget %d", m, shardedBudget)
	}
	if n := e.active(kindT); n != 0 {
		t.Fatalf("active count %d after the race, want 0", n)
	}
	e.fillShards(shardedBudget)
}

// fillShards checks that every shard of budget's counter is empty: budget
// fresh claims all land, each shard taking exactly its share, and one more is
// refused. A release that freed the wrong shard (or none) leaves one shard
// short of its share.
func (e *env) fillShards(budget int) []work.Claim {
	e.t.Helper()
	var per [work.MaxSlotShards]int
	var cs []work.Claim
	for range budget {
		c := e.claim(e.create(kindT, ""), budget)
		per[c.SlotShard]++
		cs = append(cs, c)
	}
	for k := range work.MaxSlotShards {
		if per[k] != work.ShardCap(budget, k) {
			e.t.Fatalf("shard %d took %d fresh claims, want its share %d (a slot was not freed?)", k, per[k], work.ShardCap(budget, k))
		}
	}
	it := e.create(kindT, "")
	if _, _, err := e.p.Claim(e.ctx, kindT, it.ID, 0, budget); molt.ErrorReason(err) != work.ReasonBudgetFull {
		e.t.Fatalf("claim beyond a full budget: %v, want budget_full", err)
	}
	return cs
}

// testShardedRelease: each way a claim ends frees the shard it took, and an
// item stored before counters were sharded (a slot and no shard) frees shard
// 0, the unsharded counter it took its slot from.
func testShardedRelease(t *testing.T, open Opener) {
	const budget = 16 // 2 shards of 8
	e := setup(t, open)
	cs := e.fillShards(budget)
	// Release them all, by every way a claim ends.
	for i, c := range cs {
		var err error
		switch i % 4 {
		case 0:
			_, err = e.p.Transition(e.ctx, c, work.Transition{To: "done"})
		case 1:
			e.clock.Advance(time.Hour)
			_, err = e.p.Requeue(e.ctx, e.get(kindT, c.ID), e.clock.Now().Add(-time.Minute), 5, work.StatusTimeout)
		case 2:
			e.clock.Advance(time.Hour)
			_, err = e.p.Expire(e.ctx, e.get(kindT, c.ID), e.clock.Now().Add(-time.Minute), work.StatusTimeout, "timeout")
		case 3:
			_, err = e.p.Cancel(e.ctx, e.get(kindT, c.ID), "canceled", "canceled")
		}
		if err != nil {
			t.Fatalf("release %d (shard %d): %v", i, c.SlotShard, err)
		}
	}
	if n := e.active(kindT); n != 0 {
		t.Fatalf("active count %d after every release, want 0", n)
	}
	for _, c := range e.fillShards(budget) {
		if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
			t.Fatal(err)
		}
	}

	// An item as a claim stored it before sharding: a slot, no shard.
	now := e.clock.Now()
	old := work.Item{Kind: kindT, ID: "old-claim", Status: work.StatusRunning, Active: true, Slot: true,
		Attempts: 1, Token: "old-token", HeartbeatAt: now, CreatedAt: now, UpdatedAt: now, OpID: "old-op"}
	if err := e.s.Commit(e.ctx, work.CreateItem{Item: old}, work.AdjustSlots{Kind: kindT, Delta: 1}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, old.ID); !got.Slot || got.SlotShard != 0 {
		t.Fatalf("old item reads slot %v shard %d, want a slot in shard 0", got.Slot, got.SlotShard)
	}
	e.clock.Advance(time.Hour)
	if _, err := e.p.Requeue(e.ctx, e.get(kindT, old.ID), e.clock.Now().Add(-time.Minute), 5, work.StatusTimeout); err != nil {
		t.Fatalf("requeue the old item: %v", err)
	}
	if n := e.active(kindT); n != 0 {
		t.Fatalf("active count %d after the old item's release, want 0", n)
	}
	e.fillShards(budget)
}

// testShardedFaults: a claim under a sharded budget whose first shard is full,
// so that it is refused there and lands on the other, with a fault on either
// write (failed before it happened, or its response lost and read back by op
// id), and its release with a fault: counted once, on the shard it holds.
func testShardedFaults(t *testing.T, open Opener) {
	const budget = 16 // 2 shards of 8
	modes := []struct {
		name string
		mode faults.Mode
	}{{"before", faults.Before}, {"after", faults.After}}
	for _, m := range modes {
		for _, on := range []string{"refused", "landing"} {
			t.Run(m.name+"/"+on, func(t *testing.T) {
				e := setup(t, open)
				cs := e.fillShards(budget)
				// Free one slot, so one shard is full and the other has one free.
				free := cs[0]
				if _, err := e.p.Transition(e.ctx, free, work.Transition{To: "done"}); err != nil {
					t.Fatal(err)
				}
				fullShard := 1 - free.SlotShard
				var it work.Item
				for range 100 {
					if it = e.create(kindT, "apply/acme"); work.FirstSlotShard(it.ID, budget) == fullShard {
						break
					}
				}
				if work.FirstSlotShard(it.ID, budget) != fullShard {
					t.Fatal("no item id starts at the full shard")
				}
				if on == "refused" {
					e.faults.Next(m.mode)
				} else {
					e.faults.Next(faults.None, m.mode)
				}
				c, _, err := e.p.Claim(e.ctx, kindT, it.ID, 0, budget)
				if err != nil {
					t.Fatalf("claim with a %s fault on the %s write: %v", m.name, on, err)
				}
				e.checkFaultsUsed()
				if c.SlotShard != free.SlotShard {
					t.Fatalf("claim took shard %d, want the free shard %d", c.SlotShard, free.SlotShard)
				}
				if got := e.get(kindT, it.ID); got.Token != c.Token || got.SlotShard != c.SlotShard {
					t.Fatalf("claimed item %+v, want token %s shard %d", got, c.Token, c.SlotShard)
				}
				if n := e.active(kindT); n != budget {
					t.Fatalf("active count %d, want %d (double-counted?)", n, budget)
				}
				e.faults.Next(m.mode)
				if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
					t.Fatalf("finish with a %s fault: %v", m.name, err)
				}
				e.checkFaultsUsed()
				if n, h := e.active(kindT), e.holder("apply/acme"); n != budget-1 || h != "" {
					t.Fatalf("after finish active %d lock %q, want %d and free", n, h, budget-1)
				}
				// The freed slot is on the free shard again: the next claim lands there.
				c2 := e.claim(e.create(kindT, ""), budget)
				if c2.SlotShard != free.SlotShard {
					t.Fatalf("next claim took shard %d, want %d", c2.SlotShard, free.SlotShard)
				}
			})
		}
	}
}

// testShardedClaimEach: one batch of claims under a sharded budget larger
// than the free slots claims exactly as many as fit, each on a shard with room.
func testShardedClaimEach(t *testing.T, open Opener) {
	const budget = 16
	e := setup(t, open)
	seen := make([]work.Item, 24)
	for i := range seen {
		seen[i] = e.create(kindT, "")
	}
	var ok, full int
	var per [work.MaxSlotShards]int
	for _, r := range e.p.ClaimEach(e.ctx, seen, budget) {
		switch {
		case r.Err == nil:
			ok++
			per[r.Claim.SlotShard]++
		case molt.ErrorReason(r.Err) == work.ReasonBudgetFull:
			full++
		default:
			t.Fatalf("claim: %v", r.Err)
		}
	}
	if ok != budget || full != len(seen)-budget {
		t.Fatalf("%d claimed and %d refused, want %d and %d", ok, full, budget, len(seen)-budget)
	}
	for k := range work.MaxSlotShards {
		if per[k] != work.ShardCap(budget, k) {
			t.Fatalf("shard %d took %d, want %d", k, per[k], work.ShardCap(budget, k))
		}
	}
	if n := e.active(kindT); n != budget {
		t.Fatalf("active count %d, want %d", n, budget)
	}
}
