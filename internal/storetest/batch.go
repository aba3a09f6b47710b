package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// testCommitEach: the commits of one CommitEach are independent. A member whose
// condition fails, or that is malformed, gets its own error and fails no other;
// two members writing one record (a slot counter) each keep their own result;
// the rest land.
func testCommitEach(t *testing.T, open Opener) {
	e := setup(t, open)
	held := e.create(kindT, "")
	now := e.clock.Now()
	update := func(id string, attempts int) []work.Op {
		return []work.Op{work.UpdateItem{Kind: kindT, ID: id, If: work.Cond{Attempts: work.Ptr(attempts)},
			Set: work.Set{Reason: work.Ptr("batched"), UpdatedAt: now, OpID: e.p.IDs.NewID()}}}
	}
	newItem := func(id string) work.Item {
		return work.Item{Kind: kindT, ID: id, Status: work.StatusPending, CreatedAt: now, UpdatedAt: now, OpID: e.p.IDs.NewID()}
	}
	errs := e.s.CommitEach(e.ctx,
		[]work.Op{work.CreateItem{Item: newItem("b-1")}},
		update(held.ID, 5), // attempts are 0: fails
		[]work.Op{work.CreateItem{Item: newItem("b-2")}, work.AdjustSlots{Kind: kindT, Delta: 1, Max: 1}},
		[]work.Op{work.CreateItem{Item: newItem("b-3")}, work.AdjustSlots{Kind: kindT, Delta: 1, Max: 1}}, // budget full
		[]work.Op{},        // malformed
		update(held.ID, 0), // lands
		[]work.Op{work.CreateItem{Item: newItem("b-1")}}, // exists (the first member made it)
	)
	if len(errs) != 7 {
		t.Fatalf("%d results for 7 commits", len(errs))
	}
	var cf *work.ConditionFailed
	for i, want := range []string{"", "cond 0", "", "cond 1", molt.EINVALID, "", "cond 0"} {
		err := errs[i]
		switch {
		case want == "":
			if err != nil {
				t.Fatalf("commit %d: %v, want it applied", i, err)
			}
		case want == molt.EINVALID:
			wantCode(t, err, molt.EINVALID)
		default:
			if !errors.As(err, &cf) {
				t.Fatalf("commit %d: %v, want %s", i, err, want)
			}
			if idx := int(want[len(want)-1] - '0'); cf.Index != idx {
				t.Fatalf("commit %d: condition of op %d failed, want op %d", i, cf.Index, idx)
			}
		}
	}
	for _, id := range []string{"b-1", "b-2"} {
		e.get(kindT, id)
	}
	if _, err := e.s.GetItem(e.ctx, kindT, "b-3"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("b-3, whose slot condition failed, was written: %v", err)
	}
	if got := e.get(kindT, held.ID); got.Reason != "batched" {
		t.Fatalf("the update after a failed one did not land: %+v", got)
	}
	if n := e.active(kindT); n != 1 {
		t.Fatalf("slot counter %d after one of two slot members landed, want 1", n)
	}
}

// testClaimEach: batched claims and final writes through the protocol. Each
// claim lands or fails on its own (one item already taken fails only itself),
// a batch larger than the free slots claims exactly as many as fit, a lock held
// by one member of a batch refuses the other, and a batch of final writes with
// one lost claim lands the others and releases exactly their slots.
func testClaimEach(t *testing.T, open Opener) {
	e := setup(t, open)
	const budget = 3
	var items []work.Item
	for i := 0; i < 5; i++ {
		items = append(items, e.create(kindT, ""))
	}
	taken := e.claim(items[1], budget) // items[1] is no longer pending at attempts 0, and holds a slot
	got := e.p.ClaimEach(e.ctx, items, budget)
	var claimed []work.Claim
	for i, r := range got {
		switch {
		case i == 1:
			wantReason(t, r.Err, work.ReasonNotClaimable)
		case i <= 2: // with taken, items 0 and 2 fill the budget
			if r.Err != nil {
				t.Fatalf("claim %d of the batch: %v", i, r.Err)
			}
			if r.Item.Token != r.Claim.Token || e.get(kindT, items[i].ID).Token != r.Claim.Token {
				t.Fatalf("claim %d: item %+v, claim %+v", i, r.Item, r.Claim)
			}
			claimed = append(claimed, r.Claim)
		default:
			wantReason(t, r.Err, work.ReasonBudgetFull)
		}
	}
	if n := e.active(kindT); n != budget {
		t.Fatalf("slot counter %d, want %d", n, budget)
	}

	// Two items of one lock in one batch: one claim, one refusal.
	a, b := e.create("locked", "apply/acme"), e.create("locked", "apply/acme")
	res := e.p.ClaimEach(e.ctx, []work.Item{a, b}, 0)
	if res[0].Err != nil {
		t.Fatalf("first claim of the lock: %v", res[0].Err)
	}
	wantReason(t, res[1].Err, work.ReasonLocked)

	// Final writes together: one of them has lost its claim.
	lost := claimed[1]
	lost.Token = "not-the-token"
	moved := e.p.TransitionEach(e.ctx, []work.Move{
		{Claim: claimed[0], To: work.Transition{To: "done"}},
		{Claim: lost, To: work.Transition{To: "done"}},
		{Claim: taken, To: work.Transition{To: "done"}},
		{Claim: res[0].Claim, To: work.Transition{To: "done"}},
	})
	for i, m := range moved {
		if i == 1 {
			if !molt.IsLostClaim(m.Err) {
				t.Fatalf("final write of a lost claim: %v, want ELOSTCLAIM", m.Err)
			}
			continue
		}
		if m.Err != nil {
			t.Fatalf("final write %d: %v", i, m.Err)
		}
		if m.Item.Status != "done" || m.Item.Active {
			t.Fatalf("final write %d returned %+v", i, m.Item)
		}
	}
	if n := e.active(kindT); n != 1 {
		t.Fatalf("slot counter %d after two of three claims ended, want 1", n)
	}
	if h := e.holder("apply/acme"); h != "" {
		t.Fatalf("lock still held by %q after its claim ended", h)
	}
	if it := e.get(kindT, claimed[1].ID); it.Status != work.StatusRunning || it.Token != claimed[1].Token {
		t.Fatalf("the lost claim's item was written: %+v", it)
	}
}

// testBatchFaults: a batch of claims, and of final writes, whose one round
// trip fails before it reaches the store or lands with its response lost: the
// protocol reads each member back, so every claim is taken once (attempts and
// the slot counter count it once) and every final write lands once.
func testBatchFaults(t *testing.T, open Opener) {
	for _, m := range []struct {
		name string
		mode faults.Mode
	}{{"before", faults.Before}, {"after", faults.After}} {
		t.Run(m.name, func(t *testing.T) {
			e := setup(t, open)
			var items []work.Item
			for i := 0; i < 4; i++ {
				items = append(items, e.create(kindT, ""))
			}
			e.faults.Next(m.mode)
			var cs []work.Claim
			for i, r := range e.p.ClaimEach(e.ctx, items, roomy) {
				if r.Err != nil {
					t.Fatalf("claim %d with one %s fault: %v", i, m.name, r.Err)
				}
				if got := e.get(kindT, items[i].ID); got.Attempts != 1 || got.Token != r.Claim.Token {
					t.Fatalf("claimed item %+v, want attempts 1 with token %s", got, r.Claim.Token)
				}
				cs = append(cs, r.Claim)
			}
			e.checkFaultsUsed()
			if n := e.active(kindT); n != len(items) {
				t.Fatalf("slot counter %d after %d claims, want %d (double-counted?)", n, len(items), len(items))
			}
			e.faults.Next(m.mode)
			var ms []work.Move
			for _, c := range cs {
				ms = append(ms, work.Move{Claim: c, To: work.Transition{To: "done"}})
			}
			for i, r := range e.p.TransitionEach(e.ctx, ms) {
				if r.Err != nil {
					t.Fatalf("final write %d with one %s fault: %v", i, m.name, r.Err)
				}
				if got := e.get(kindT, cs[i].ID); got.Status != "done" || got.Active {
					t.Fatalf("finished item %+v", got)
				}
			}
			e.checkFaultsUsed()
			if n := e.active(kindT); n != 0 {
				t.Fatalf("slot counter %d after every claim ended, want 0", n)
			}
		})
	}
}

// testClaimEachRace: 8 claimers claim overlapping batches of the same pending
// items under a budget of 3 and finish what they got in batches too: every
// item is claimed exactly once, the slot counter never exceeds the budget and
// ends at 0.
func testClaimEachRace(t *testing.T, open Opener) {
	e := setup(t, open)
	const n, workers, budget, batch = 120, 8, 3, 5
	var mu sync.Mutex
	var remaining []work.Item
	for i := 0; i < n; i++ {
		remaining = append(remaining, e.create(kindT, ""))
	}
	claims := map[string]int{}
	var succeeded atomic.Int64
	failures := make(chan string, workers+1)
	stop := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if c, err := e.s.ActiveCount(e.ctx, kindT); err == nil && c > budget {
				failures <- "store active count exceeded the budget"
				return
			}
		}
	})
	pick := func(r *rand.Rand) []work.Item {
		mu.Lock()
		defer mu.Unlock()
		// Among the first few, so that the batches overlap.
		k := min(len(remaining), 2*batch)
		var out []work.Item
		for _, i := range r.Perm(k) {
			if len(out) == batch {
				break
			}
			out = append(out, remaining[i])
		}
		return out
	}
	drop := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		for i, it := range remaining {
			if it.ID == id {
				remaining = append(remaining[:i], remaining[i+1:]...)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				seen := pick(r)
				if len(seen) == 0 {
					return
				}
				var ms []work.Move
				for _, res := range e.p.ClaimEach(e.ctx, seen, budget) {
					switch reason := molt.ErrorReason(res.Err); {
					case res.Err == nil:
					case reason == work.ReasonBudgetFull || reason == work.ReasonNotClaimable:
						continue
					default:
						failures <- "claim: " + res.Err.Error()
						return
					}
					drop(res.Claim.ID)
					mu.Lock()
					claims[res.Claim.ID]++
					mu.Unlock()
					succeeded.Add(1)
					ms = append(ms, work.Move{Claim: res.Claim, To: work.Transition{To: "done"}})
				}
				if len(ms) > budget {
					failures <- "one batch claimed more than the budget"
					return
				}
				for _, m := range e.p.TransitionEach(e.ctx, ms) {
					if m.Err != nil {
						failures <- "finish: " + m.Err.Error()
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	monitor.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
	if got := succeeded.Load(); got != n {
		t.Fatalf("successful claims = %d, want %d", got, n)
	}
	for id, k := range claims {
		if k != 1 {
			t.Fatalf("%s claimed %d times", id, k)
		}
	}
	if a := e.active(kindT); a != 0 {
		t.Fatalf("active after all finished = %d, want 0", a)
	}
}

// testExecutorBatch: the executor's HandleBatch claims the claimable items of
// a batch of wake-ups in one round trip and runs their attempts at once; a
// wake-up for a missing item, a duplicate, or an item held by a live claim is
// dropped; under a budget only the free slots are claimed; final writes that
// are ready together land together, and one whose claim was lost meanwhile
// writes nothing and fails no other.
func testExecutorBatch(t *testing.T, open Opener) {
	t.Run("claims", func(t *testing.T) {
		e := setup(t, open)
		var ids []string
		for i := 0; i < 4; i++ {
			ids = append(ids, e.create(kindT, "").ID)
		}
		held := e.claim(e.create(kindT, ""), 0)
		var started sync.WaitGroup
		started.Add(len(ids))
		all := make(chan struct{})
		go func() { started.Wait(); close(all) }()
		var claimWrites atomic.Int64
		before := e.writes()
		r := e.runner(work.Policy{}, func(ctx context.Context, a *work.Attempt) work.Outcome {
			started.Done()
			recv(t, all, "every attempt of the batch to start") // they run at once
			claimWrites.CompareAndSwap(0, int64(e.writes()-before))
			return work.End("done", "", nil)
		})
		ms := []queue.Message{wakeup(ids[0]), wakeup(ids[1]), wakeup("nope"), wakeup(ids[0]),
			wakeup(ids[2]), wakeup(held.ID), wakeup(ids[3])}
		errs := make([]error, len(ms))
		calls := make([]int, len(ms))
		var mu sync.Mutex
		ends := make([]int, len(ms))
		r.HandleBatch(e.ctx, ms, queue.Report{Done: func(i int, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs[i] = err
			calls[i]++
		}, Ended: func(i int) {
			mu.Lock()
			defer mu.Unlock()
			if calls[i] != 0 {
				t.Errorf("wake-up %d ended after its result", i)
			}
			ends[i]++
		}})
		for i := range ms {
			if calls[i] != 1 || errs[i] != nil {
				t.Fatalf("wake-up %d (%s): %d results, error %v; want one, nil", i, ms[i].ID, calls[i], errs[i])
			}
			// Only the wake-ups whose attempt ran (the first of each of ids) end.
			if ran := i == 0 || i == 1 || i == 4 || i == 6; ends[i] != map[bool]int{true: 1}[ran] {
				t.Fatalf("wake-up %d (%s): %d ends, ran %v", i, ms[i].ID, ends[i], ran)
			}
		}
		if n := r.runs.Load(); n != int32(len(ids)) {
			t.Fatalf("%d attempts ran, want %d", n, len(ids))
		}
		if n := claimWrites.Load(); n != 1 {
			t.Fatalf("%d writes before the attempts ran, want 1 (the batch's claims in one round trip)", n)
		}
		for _, id := range ids {
			if it := e.get(kindT, id); it.Status != "done" || it.Active || it.Attempts != 1 {
				t.Fatalf("item after its batch %+v", it)
			}
		}
		if it := e.get(kindT, held.ID); it.Token != held.Token || it.Status != work.StatusRunning {
			t.Fatalf("an item held by a live claim was touched: %+v", it)
		}
		// Claims, then at most one write per final write.
		if w := e.writes() - before; w > 1+len(ids) {
			t.Fatalf("%d writes for a batch of %d, want at most %d", w, len(ids), 1+len(ids))
		}
	})
	t.Run("budget", func(t *testing.T) {
		e := setup(t, open)
		var ms []queue.Message
		for i := 0; i < 5; i++ {
			ms = append(ms, wakeup(e.create(kindT, "").ID))
		}
		var running, most atomic.Int32
		r := e.runner(work.Policy{Budget: 2}, func(ctx context.Context, a *work.Attempt) work.Outcome {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			defer running.Add(-1)
			return work.End("done", "", nil)
		})
		r.HandleBatch(e.ctx, ms, queue.Report{Done: func(i int, err error) {
			if err != nil {
				t.Errorf("wake-up %d: %v", i, err)
			}
		}})
		if n := r.runs.Load(); n != 2 {
			t.Fatalf("%d attempts ran under a budget of 2, want 2", n)
		}
		if m := most.Load(); m > 2 {
			t.Fatalf("%d attempts at once under a budget of 2", m)
		}
		if n := e.active(kindT); n != 0 {
			t.Fatalf("slot counter %d after the batch, want 0", n)
		}
	})
	t.Run("lost claim", func(t *testing.T) {
		e := setup(t, open)
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, e.create(kindT, "").ID)
		}
		var started sync.WaitGroup
		started.Add(len(ids))
		all := make(chan struct{})
		go func() { started.Wait(); close(all) }()
		r := e.runner(work.Policy{}, func(ctx context.Context, a *work.Attempt) work.Outcome {
			if a.Claim.ID == ids[1] {
				// Another claimer takes the item over (its token changes).
				if err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: a.Claim.ID, If: work.Cond{Token: a.Claim.Token},
					Set: work.Set{Token: work.Ptr("stolen"), UpdatedAt: e.clock.Now(), OpID: e.p.IDs.NewID()}}); err != nil {
					t.Error(err)
				}
			}
			started.Done()
			recv(t, all, "every attempt of the batch to start")
			return work.End("done", "", nil)
		})
		var ms []queue.Message
		for _, id := range ids {
			ms = append(ms, wakeup(id))
		}
		r.HandleBatch(e.ctx, ms, queue.Report{Done: func(i int, err error) {
			if err != nil {
				t.Errorf("wake-up %d: %v", i, err)
			}
		}})
		for i, id := range ids {
			it := e.get(kindT, id)
			if i == 1 {
				if it.Status != work.StatusRunning || it.Token != "stolen" {
					t.Fatalf("the final write of a lost claim was written: %+v", it)
				}
				continue
			}
			if it.Status != "done" || it.Active {
				t.Fatalf("a final write beside a lost claim's did not land: %+v", it)
			}
		}
	})
}

// testGetItems: a store that reads a batch of items in one round trip
// (work.BatchReader) returns each id's item in order, a duplicate id twice,
// ENOTFOUND for a missing one and EINVALID for a malformed one.
func testGetItems(t *testing.T, open Opener) {
	e := setup(t, open)
	br, ok := e.s.(work.BatchReader)
	if !ok {
		t.Skip("the store reads items one at a time (the executor reads a batch in parallel)")
	}
	a, b := e.create(kindT, ""), e.create(kindT, "")
	items, errs := br.GetItems(e.ctx, kindT, []string{b.ID, "nope", a.ID, "bad id", b.ID})
	if len(items) != 5 || len(errs) != 5 {
		t.Fatalf("%d items and %d errors for 5 ids", len(items), len(errs))
	}
	for i, want := range []work.Item{b, {}, a, {}, b} {
		switch i {
		case 1:
			wantCode(t, errs[i], molt.ENOTFOUND)
		case 3:
			wantCode(t, errs[i], molt.EINVALID)
		default:
			if errs[i] != nil {
				t.Fatalf("item %d: %v", i, errs[i])
			}
			if got := items[i]; got.ID != want.ID || got.OpID != want.OpID || got.Status != want.Status {
				t.Fatalf("item %d = %+v, want %+v", i, got, want)
			}
		}
	}
}
