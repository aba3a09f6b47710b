package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// slotSpy is a work.Backend that fails the test on any slot-counter write.
type slotSpy struct {
	work.Backend
	slotOps atomic.Int64
}

func (s *slotSpy) Commit(ctx context.Context, ops ...work.Op) error {
	for _, op := range ops {
		if _, ok := op.(work.AdjustSlots); ok {
			s.slotOps.Add(1)
		}
	}
	return s.Backend.Commit(ctx, ops...)
}

func (s *slotSpy) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	for _, ops := range cs {
		for _, op := range ops {
			if _, ok := op.(work.AdjustSlots); ok {
				s.slotOps.Add(1)
			}
		}
	}
	return s.Backend.CommitEach(ctx, cs...)
}

// testUnbudgetedNoSlot: a claim of a kind without a budget, and every way its
// claim ends, writes no slot counter (no hot key); the item says it holds no
// slot. A budgeted claim holds one (Item.Slot, stored) until its release.
func testUnbudgetedNoSlot(t *testing.T, open Opener) {
	e := setup(t, open)
	spy := &slotSpy{Backend: e.s}
	p := &work.Protocol{Backend: spy, Clock: e.clock, IDs: e.p.IDs}
	const kind = "free"
	mk := func() work.Item {
		t.Helper()
		it, err := p.Create(e.ctx, work.Item{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	claim := func(it work.Item) work.Claim {
		t.Helper()
		c, got, err := p.ClaimSeen(e.ctx, it, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.Slot || got.Slot || e.get(kind, it.ID).Slot {
			t.Fatalf("unbudgeted claim holds a slot: claim %+v, item %+v", c, e.get(kind, it.ID))
		}
		return c
	}
	// Claim, heartbeat, keep, finish.
	c := claim(mk())
	if err := p.Heartbeat(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Transition(e.ctx, c, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	// Requeue, take over, expire, cancel.
	e.clock.Advance(time.Minute)
	stale := e.clock.Now()
	it := mk()
	claim(it)
	e.clock.Advance(time.Minute)
	rq, err := p.Requeue(e.ctx, e.get(kind, it.ID), stale.Add(time.Second), 5, work.StatusTimeout)
	if err != nil {
		t.Fatal(err)
	}
	claim(rq)
	e.clock.Advance(time.Minute)
	tc, _, err := p.Takeover(e.ctx, e.get(kind, it.ID), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if tc.Slot {
		t.Fatal("takeover of an unbudgeted claim holds a slot")
	}
	e.clock.Advance(time.Minute)
	if _, err := p.Expire(e.ctx, e.get(kind, it.ID), e.clock.Now(), work.StatusTimeout, "spent"); err != nil {
		t.Fatal(err)
	}
	cn := mk()
	claim(cn)
	if _, err := p.Cancel(e.ctx, e.get(kind, cn.ID), "cancelled", "by test"); err != nil {
		t.Fatal(err)
	}
	cc, _, err := p.CreateClaimed(e.ctx, work.Item{Kind: kind}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Slot || e.get(kind, cc.ID).Slot {
		t.Fatal("unbudgeted CreateClaimed holds a slot")
	}
	if _, err := p.Transition(e.ctx, cc, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	if n := spy.slotOps.Load(); n != 0 {
		t.Fatalf("unbudgeted claims wrote the slot counter %d times, want 0", n)
	}
	if n := e.active(kind); n != 0 {
		t.Fatalf("slot counter of an unbudgeted kind = %d, want 0", n)
	}

	// A budgeted claim holds a slot, stored on the item, until released.
	b := mk()
	bc, _, err := p.ClaimSeen(e.ctx, b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bc.Slot || !e.get(kind, b.ID).Slot || e.active(kind) != 1 {
		t.Fatalf("budgeted claim: claim slot %v, item %+v, counter %d", bc.Slot, e.get(kind, b.ID), e.active(kind))
	}
	if _, err := p.Transition(e.ctx, bc, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	if !e.get(kind, b.ID).Slot || e.active(kind) != 1 {
		t.Fatal("a transition that keeps the claim let go of its slot")
	}
	if _, err := p.Transition(e.ctx, bc, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kind, b.ID); got.Slot || e.active(kind) != 0 {
		t.Fatalf("after release: item %+v, counter %d", got, e.active(kind))
	}
}

// testBudgetChange: the budget of a kind raised and lowered while its items are
// claimed keeps the counter exact: a claim's release frees a slot only when the
// claim took one. First step by step, then with 16 claimers while the budget
// moves between none and several.
func testBudgetChange(t *testing.T, open Opener) {
	e := setup(t, open)
	const kind = "moving"
	claim := func(budget int) work.Claim {
		t.Helper()
		c, _, err := e.p.ClaimSeen(e.ctx, e.create(kind, ""), budget)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	finish := func(c work.Claim) {
		t.Helper()
		if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
			t.Fatalf("finish %s: %v", c.ID, err)
		}
	}
	free := claim(0)   // no budget: no slot
	a := claim(2)      // budget 2: one slot
	b := claim(2)      // two
	raised := claim(5) // raised: three
	if n := e.active(kind); n != 3 {
		t.Fatalf("counter %d, want 3", n)
	}
	// Lowered to 1: no claim fits until two are released.
	_, _, err := e.p.ClaimSeen(e.ctx, e.create(kind, ""), 1)
	wantReason(t, err, work.ReasonBudgetFull)
	finish(free) // frees nothing
	if n := e.active(kind); n != 3 {
		t.Fatalf("counter %d after an unbudgeted release, want 3", n)
	}
	finish(a)
	finish(raised)
	if n := e.active(kind); n != 1 {
		t.Fatalf("counter %d, want 1", n)
	}
	none := claim(0) // budget removed while b holds its slot
	finish(b)
	finish(none)
	if n := e.active(kind); n != 0 {
		t.Fatalf("counter %d after every release, want 0", n)
	}

	// Concurrently, the budget moving under the claimers.
	const n, workers, maxBudget = 240, 16, 6
	budgets := []int{0, 1, maxBudget, 0, 3}
	var budget atomic.Int64
	items := make(chan work.Item, n)
	for i := 0; i < n; i++ {
		items <- e.create(kind, "")
	}
	close(items)
	var (
		wg, mon  sync.WaitGroup
		done     atomic.Int64
		errs     = make(chan string, workers+1)
		stop     = make(chan struct{})
		switches atomic.Int64
	)
	mon.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			budget.Store(int64(budgets[i%len(budgets)]))
			switches.Add(1)
			if c, err := e.s.ActiveCount(e.ctx, kind); err == nil && (c < 0 || c > maxBudget) {
				errs <- fmt.Sprintf("counter %d outside [0, %d]", c, maxBudget)
				return
			}
		}
	})
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for it := range items {
				for {
					c, _, err := e.p.ClaimSeen(e.ctx, it, int(budget.Load()))
					if molt.ErrorReason(err) == work.ReasonBudgetFull {
						time.Sleep(100 * time.Microsecond) // the budget moves on its own clock
						continue
					}
					if err != nil {
						errs <- "claim: " + err.Error()
						return
					}
					if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
						errs <- "finish: " + err.Error()
						return
					}
					done.Add(1)
					break
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	mon.Wait()
	close(errs)
	for f := range errs {
		t.Fatal(f)
	}
	if got := done.Load(); got != n {
		t.Fatalf("finished %d, want %d", got, n)
	}
	if c := e.active(kind); c != 0 {
		t.Fatalf("counter after every claim ended = %d, want 0 (budget switched %d times)", c, switches.Load())
	}
}
