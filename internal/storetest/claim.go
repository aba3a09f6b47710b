package storetest

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

const kindT work.Kind = "job" // a kind only the suite uses

func testItems(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "")
	got := e.get(kindT, it.ID)
	if got.Status != work.StatusPending || got.Attempts != 0 || got.Active || got.Workspace != "acme" {
		t.Fatalf("created item = %+v, want pending, 0 attempts, idle, workspace acme", got)
	}
	if !got.CreatedAt.Equal(epoch) || got.OpID != it.OpID {
		t.Fatalf("created_at %v op %q, want %v %q", got.CreatedAt, got.OpID, epoch, it.OpID)
	}
	_, err := e.p.Create(e.ctx, work.Item{Kind: kindT, ID: it.ID})
	wantReason(t, err, work.ReasonExists)

	_, err = e.s.GetItem(e.ctx, kindT, "nope")
	wantCode(t, err, molt.ENOTFOUND)

	bad := []work.Item{
		{Kind: "", ID: "x"},
		{Kind: "Bad Kind", ID: "x"},
		{Kind: kindT, ID: "has space"},
		{Kind: kindT, ID: strings.Repeat("a", work.MaxIDLen+1)},
		{Kind: kindT, ID: "lock", LockKey: "../x"},
	}
	for _, b := range bad {
		_, err := e.p.Create(e.ctx, b)
		wantCode(t, err, molt.EINVALID)
		if b.ID != "" && b.Kind != "" {
			if _, err := e.s.GetItem(e.ctx, b.Kind, b.ID); molt.ErrorCode(err) != molt.ENOTFOUND && molt.ErrorCode(err) != molt.EINVALID {
				t.Fatalf("bad item %+v was stored (get: %v)", b, err)
			}
		}
	}
	_, err = e.p.Create(e.ctx, work.Item{Kind: kindT, ID: "big", Data: make([]byte, work.MaxData+1)})
	wantCode(t, err, molt.ETOOLARGE)
	if _, err := e.s.GetItem(e.ctx, kindT, "big"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("oversize item stored: %v", err)
	}
	// Empty ids to the backend directly are refused too, and write nothing.
	err = e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: "", Set: work.Set{Status: "x", OpID: "o"}})
	wantCode(t, err, molt.EINVALID)
	_, _, err = e.p.Claim(e.ctx, kindT, "", 0, 1)
	wantCode(t, err, molt.EINVALID)

	// Claim, heartbeat, finish: the claim carries attempts and a token.
	c := e.claim(it, 1)
	if c.Attempts != 1 || c.Token == "" {
		t.Fatalf("claim = %+v, want attempts 1 and a token", c)
	}
	e.clock.Advance(time.Second)
	if err := e.p.Heartbeat(e.ctx, c); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if hb := e.get(kindT, it.ID).HeartbeatAt; !hb.Equal(epoch.Add(time.Second)) {
		t.Fatalf("heartbeat at %v, want %v", hb, epoch.Add(time.Second))
	}
	data := []byte(`{"result":"ok"}`)
	fin, err := e.p.Transition(e.ctx, c, work.Transition{To: "done", Data: data, Reason: done("finished")})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	got = e.get(kindT, it.ID)
	if got.Status != "done" || got.Active || got.Token != "" || string(got.Data) != string(data) || got.Reason != "finished" || got.OpID != fin.OpID {
		t.Fatalf("finished item = %+v", got)
	}
	if n := e.active(kindT); n != 0 {
		t.Fatalf("active after finish = %d, want 0", n)
	}
	// A done item is not claimable; a second claim with the old attempts fails.
	_, _, err = e.p.Claim(e.ctx, kindT, it.ID, 0, 1)
	wantReason(t, err, work.ReasonNotClaimable)
}

// testClaimRace: 16 goroutines race to claim 500 pending items with a budget of 3.
// Exactly 500 claims succeed, none twice, and never more than 3 are held at once.
func testClaimRace(t *testing.T, open Opener) {
	e := setup(t, open)
	const n, workers, budget = 500, 16, 3
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		ids = append(ids, e.create(kindT, "").ID)
	}
	var (
		mu        sync.Mutex
		remaining = append([]string(nil), ids...)
		claims    = map[string]int{}
		held      atomic.Int64
		maxHeld   atomic.Int64
		succeeded atomic.Int64
		busy      atomic.Int64
		failures  = make(chan string, workers)
		stop      = make(chan struct{})
	)
	pick := func(r *rand.Rand) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(remaining) == 0 {
			return "", false
		}
		// Choose among the first few so claimers collide on the same items.
		k := min(len(remaining), 6)
		return remaining[r.IntN(k)], true
	}
	drop := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		for i, x := range remaining {
			if x == id {
				remaining = append(remaining[:i], remaining[i+1:]...)
				return
			}
		}
	}
	// The store's own counter is checked throughout, too.
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
			if c, err := e.s.ActiveCount(e.ctx, kindT); err == nil && c > budget {
				failures <- "store active count exceeded the budget"
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 7))
			for {
				id, ok := pick(r)
				if !ok {
					return
				}
				c, _, err := e.p.Claim(e.ctx, kindT, id, 0, budget)
				switch {
				case err == nil:
				case molt.ErrorReason(err) == work.ReasonBudgetFull:
					busy.Add(1)
					continue
				case molt.ErrorReason(err) == work.ReasonNotClaimable:
					continue // another claimer took it
				default:
					failures <- "claim: " + err.Error()
					return
				}
				drop(id)
				h := held.Add(1)
				for {
					m := maxHeld.Load()
					if h <= m || maxHeld.CompareAndSwap(m, h) {
						break
					}
				}
				mu.Lock()
				claims[id]++
				mu.Unlock()
				succeeded.Add(1)
				if err := e.p.Heartbeat(e.ctx, c); err != nil {
					failures <- "heartbeat: " + err.Error()
					return
				}
				// Count down before the release is written, so the local count never
				// lags the store's: local <= store <= budget.
				held.Add(-1)
				if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
					failures <- "finish: " + err.Error()
					return
				}
			}
		}(uint64(w))
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
	dups := 0
	for _, id := range ids {
		if claims[id] != 1 {
			dups++
		}
	}
	if dups != 0 {
		t.Fatalf("%d items claimed other than exactly once", dups)
	}
	if m := maxHeld.Load(); m > budget {
		t.Fatalf("max held at once = %d, want <= %d", m, budget)
	}
	if a := e.active(kindT); a != 0 {
		t.Fatalf("active after all finished = %d, want 0", a)
	}
	t.Logf("500 claims by 16 claimers, budget 3: max held %d, budget refusals %d", maxHeld.Load(), busy.Load())
}

// testWorkspaceLock: 8 claimers of applies in one workspace; exactly one holds the
// lock at a time and the others succeed only after it is released.
func testWorkspaceLock(t *testing.T, open Opener) {
	e := setup(t, open)
	const n = 8
	lock := "apply/acme"
	items := make([]work.Item, n)
	for i := range items {
		items[i] = e.create(kindT, lock)
	}
	other := e.create(kindT, "apply/other") // another workspace is not blocked
	oc := e.claim(other, 0)

	var (
		mu       sync.Mutex
		holders  int
		maxHold  int
		order    []string
		released = make(chan struct{}, n)
		wg       sync.WaitGroup
		errs     = make(chan error, n)
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(it work.Item) {
			defer wg.Done()
			<-start
			for {
				c, _, err := e.p.Claim(e.ctx, it.Kind, it.ID, 0, 0)
				if molt.ErrorReason(err) == work.ReasonLocked {
					select {
					case <-released:
					case <-time.After(20 * time.Millisecond):
					case <-e.ctx.Done():
						errs <- e.ctx.Err()
						return
					}
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				holders++
				maxHold = max(maxHold, holders)
				order = append(order, it.ID)
				mu.Unlock()
				if h, err := e.s.LockHolder(e.ctx, lock); err != nil || h != work.Holder(it.Kind, it.ID) {
					errs <- molt.Errorf(molt.EINTERNAL, "lock holder %q (%v), want %s", h, err, it.ID)
					return
				}
				mu.Lock()
				holders--
				mu.Unlock()
				if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "applied"}); err != nil {
					errs <- err
					return
				}
				for i := 0; i < n; i++ {
					select {
					case released <- struct{}{}:
					default:
					}
				}
				return
			}
		}(items[i])
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("claimer: %v", err)
	}
	if maxHold != 1 || len(order) != n {
		t.Fatalf("max concurrent holders %d over %d claims, want 1 over %d", maxHold, len(order), n)
	}
	if h := e.holder(lock); h != "" {
		t.Fatalf("lock still held by %q", h)
	}
	if h := e.holder("apply/other"); h != work.Holder(kindT, other.ID) {
		t.Fatalf("other workspace lock holder %q", h)
	}
	// While held, a second item of that workspace is refused with ReasonLocked.
	blocked := e.create(kindT, "apply/other")
	_, _, err := e.p.Claim(e.ctx, kindT, blocked.ID, 0, 0)
	wantReason(t, err, work.ReasonLocked)
	if got := e.get(kindT, blocked.ID); got.Status != work.StatusPending || got.Attempts != 0 {
		t.Fatalf("refused claim changed the item: %+v", got)
	}
	if _, err := e.p.Transition(e.ctx, oc, work.Transition{To: "applied"}); err != nil {
		t.Fatal(err)
	}
	e.claim(blocked, 0)
}

// testLostClaim: a writer whose claim was taken over (timeout, requeue, re-claim)
// cannot heartbeat, transition, checkpoint or write with extra ops.
func testLostClaim(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "apply/acme")
	stale := e.claim(it, 2)
	e.clock.Advance(10 * time.Minute)
	seen := e.get(kindT, it.ID)
	if _, err := e.p.Requeue(e.ctx, seen, e.clock.Now().Add(-5*time.Minute), 3, work.StatusTimeout); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	if got := e.get(kindT, it.ID); got.Status != work.StatusPending || got.Active || e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("after requeue item %+v active %d holder %q", got, e.active(kindT), e.holder("apply/acme"))
	}
	fresh := e.claim(e.get(kindT, it.ID), 2)
	if fresh.Attempts != 2 {
		t.Fatalf("re-claim attempts = %d, want 2", fresh.Attempts)
	}
	before := e.get(kindT, it.ID)
	other := e.create(kindT, "")
	writes := []func() error{
		func() error { return e.p.Heartbeat(e.ctx, stale) },
		func() error {
			_, err := e.p.Transition(e.ctx, stale, work.Transition{To: "done", Data: []byte(`{"stale":true}`)})
			return err
		},
		func() error {
			_, err := e.p.Transition(e.ctx, stale, work.Transition{To: "syncing", Keep: true})
			return err
		},
		func() error {
			_, err := e.p.Transition(e.ctx, stale, work.Transition{To: "failed"},
				work.UpdateItem{Kind: kindT, ID: other.ID, If: work.Cond{Statuses: []work.Status{work.StatusPending}}, Set: work.Set{Status: "x", OpID: "stale-op"}})
			return err
		},
	}
	refused := 0
	for i, w := range writes {
		if err := w(); molt.IsLostClaim(err) {
			refused++
		} else {
			t.Errorf("stale write %d: err = %v, want lost claim", i, err)
		}
	}
	// The same writes, bypassing the protocol's read, straight to the backend with
	// the stale claim's conditions: the store itself refuses them.
	cond := work.Cond{Attempts: work.Ptr(stale.Attempts), Token: stale.Token, Active: work.Ptr(true)}
	err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: it.ID, If: cond,
		Set: work.Set{HeartbeatAt: work.Ptr(e.clock.Now()), UpdatedAt: e.clock.Now(), OpID: "raw-stale"}})
	if isCondFailed(err) {
		refused++
	} else {
		t.Errorf("raw stale write: %v, want a condition failure", err)
	}
	if refused != len(writes)+1 {
		t.Fatalf("refused %d of %d stale writes, want all", refused, len(writes)+1)
	}
	after := e.get(kindT, it.ID)
	if after.OpID != before.OpID || after.Token != fresh.Token || after.Status != work.StatusRunning || string(after.Data) != string(before.Data) {
		t.Fatalf("stale writer changed the item: before %+v after %+v", before, after)
	}
	if e.get(kindT, other.ID).Status != work.StatusPending {
		t.Fatal("stale writer's extra op was applied")
	}
	// The new owner still works.
	if err := e.p.Heartbeat(e.ctx, fresh); err != nil {
		t.Fatalf("fresh heartbeat: %v", err)
	}
}

// testExpire: a stale claim with its attempts spent becomes terminal, releasing slot
// and lock; a fresh heartbeat protects a claim from the tick.
func testExpire(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "apply/acme")
	for attempt := 1; attempt <= 2; attempt++ {
		e.claim(e.get(kindT, it.ID), 1)
		e.clock.Advance(time.Hour)
		got, err := e.p.Requeue(e.ctx, e.get(kindT, it.ID), e.clock.Now().Add(-time.Minute), 2, work.StatusTimeout)
		if err != nil {
			t.Fatalf("requeue %d: %v", attempt, err)
		}
		want := work.StatusPending
		if attempt == 2 {
			want = work.StatusTimeout
		}
		if got.Status != want || e.get(kindT, it.ID).Status != want {
			t.Fatalf("after attempt %d status %s, want %s", attempt, e.get(kindT, it.ID).Status, want)
		}
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("expired item kept slot (%d) or lock (%q)", e.active(kindT), e.holder("apply/acme"))
	}
	// A retry rebases attempts; the budget counts from there.
	cur := e.get(kindT, it.ID)
	re, err := e.p.Update(e.ctx, kindT, it.ID, work.Change{From: []work.Status{work.StatusTimeout}, Attempts: cur.Attempts,
		To: work.StatusPending, AttemptsBase: work.Ptr(cur.Attempts)})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := e.get(kindT, it.ID); got.Used() != 0 || got.Attempts != 2 || got.Status != work.StatusPending || re.OpID != got.OpID {
		t.Fatalf("after retry %+v, want attempts 2, used 0, pending", got)
	}
	// Fresh heartbeat: not stale, the tick's requeue is refused and writes nothing.
	c := e.claim(e.get(kindT, it.ID), 1)
	seen := e.get(kindT, it.ID)
	e.clock.Advance(time.Hour)
	if err := e.p.Heartbeat(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	// The tick read the item before the heartbeat; its condition must fail.
	_, err = e.p.Requeue(e.ctx, seen, e.clock.Now().Add(-time.Minute), 5, work.StatusTimeout)
	wantReason(t, err, work.ReasonChanged)
	if got := e.get(kindT, it.ID); got.Token != c.Token || got.Status != work.StatusRunning {
		t.Fatalf("refused requeue changed the item: %+v", got)
	}
	// Update refuses a claimed item.
	_, err = e.p.Update(e.ctx, kindT, it.ID, work.Change{From: []work.Status{work.StatusRunning}, Attempts: c.Attempts, To: "x"})
	wantReason(t, err, work.ReasonChanged)
}

// testTransactions: a transaction whose second condition fails leaves the first
// item untouched.
func testTransactions(t *testing.T, open Opener) {
	e := setup(t, open)
	a := e.create(kindT, "")
	b := e.create(kindT, "")
	now := e.clock.Now()
	err := e.s.Commit(e.ctx,
		work.UpdateItem{Kind: kindT, ID: a.ID, If: work.Cond{Statuses: []work.Status{work.StatusPending}},
			Set: work.Set{Status: "approved", UpdatedAt: now, OpID: "tx-1"}},
		work.CreateItem{Item: work.Item{Kind: kindT, ID: b.ID, Status: work.StatusPending, CreatedAt: now, UpdatedAt: now, OpID: "tx-1"}},
	)
	var cf *work.ConditionFailed
	if !asCondFailed(err, &cf) || cf.Index != 1 {
		t.Fatalf("commit err = %v, want condition failed at index 1", err)
	}
	if got := e.get(kindT, a.ID); got.Status != work.StatusPending || got.OpID != a.OpID {
		t.Fatalf("first item changed by a failed transaction: %+v", got)
	}
	// Through the protocol: flip one item and create another, all or nothing.
	apply := work.Item{Kind: "apply2", ID: "ap-1", Status: work.StatusPending, CreatedAt: now, UpdatedAt: now, OpID: "create-ap"}
	if _, err := e.p.Update(e.ctx, kindT, a.ID, work.Change{From: []work.Status{work.StatusPending}, To: "approved"},
		work.CreateItem{Item: apply}); err != nil {
		t.Fatalf("approve+create: %v", err)
	}
	if e.get(kindT, a.ID).Status != "approved" || e.get("apply2", "ap-1").Status != work.StatusPending {
		t.Fatal("approve+create did not write both")
	}
	// A second approve fails on its first condition; a create of an existing item
	// as the extra op fails the whole change.
	_, err = e.p.Update(e.ctx, kindT, b.ID, work.Change{From: []work.Status{work.StatusPending}, To: "approved"},
		work.CreateItem{Item: apply})
	wantReason(t, err, work.ReasonAlsoFailed)
	if got := e.get(kindT, b.ID); got.Status != work.StatusPending {
		t.Fatalf("b changed by a failed transaction: %+v", got)
	}
	// A claimed item's transition with a failing extra op writes nothing and keeps
	// the claim (it is not a lost claim).
	c := e.claim(b, roomy)
	_, err = e.p.Transition(e.ctx, c, work.Transition{To: "done"}, work.CreateItem{Item: apply})
	wantReason(t, err, work.ReasonAlsoFailed)
	if got := e.get(kindT, b.ID); got.Status != work.StatusRunning || got.Token != c.Token || e.active(kindT) != 1 {
		t.Fatalf("failed transition changed the item: %+v active %d", got, e.active(kindT))
	}
	// Slot counters never go negative.
	err = e.s.Commit(e.ctx, work.AdjustSlots{Kind: "unused", Delta: -1})
	if !isCondFailed(err) {
		t.Fatalf("negative slot count: err = %v, want condition failure", err)
	}
	// Releasing a lock one does not hold fails.
	err = e.s.Commit(e.ctx, work.ReleaseLock{Key: "apply/nobody", Holder: "job/x"})
	if !isCondFailed(err) {
		t.Fatalf("release of a free lock: err = %v, want condition failure", err)
	}
}

// testHeartbeatKeepsUpdatedAt: a heartbeat moves the heartbeat and nothing the
// change feed or the age listings read (updated_at); KeepUpdatedAt with an
// UpdatedAt or ArchivedAt is refused before anything is written.
func testHeartbeatKeepsUpdatedAt(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "")
	c := e.claim(it, 0)
	claimed := e.get(kindT, it.ID)
	e.clock.Advance(time.Minute)
	if err := e.p.Heartbeat(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	got := e.get(kindT, it.ID)
	if !got.HeartbeatAt.Equal(e.clock.Now()) || !got.UpdatedAt.Equal(claimed.UpdatedAt) || got.OpID == claimed.OpID {
		t.Fatalf("after a heartbeat: heartbeat %v updated %v (was %v), op %s", got.HeartbeatAt, got.UpdatedAt, claimed.UpdatedAt, got.OpID)
	}
	for _, set := range []work.Set{
		{KeepUpdatedAt: true, UpdatedAt: e.clock.Now(), OpID: "bad-1"},
		{KeepUpdatedAt: true, ArchivedAt: work.Ptr(e.clock.Now()), OpID: "bad-2"},
	} {
		err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: it.ID, Set: set})
		if molt.ErrorCode(err) != molt.EINVALID {
			t.Fatalf("commit %+v = %v, want EINVALID", set, err)
		}
	}
	if e.get(kindT, it.ID).OpID != got.OpID {
		t.Fatal("a refused commit wrote the item")
	}
}
