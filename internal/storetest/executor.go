package storetest

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// runner is an executor of kindT on the test's store whose attempts are fn,
// with a queue that records the wake-ups it sends.
type runner struct {
	*work.Executor[struct{}]
	rec      *recorder
	prepared atomic.Int32 // Prepare calls (claimable items seen)
	runs     atomic.Int32 // attempts started
}

// waitFor bounds a wait in the executor tests: far beyond what the step needs,
// so only a hang (the bug the wait would hide) reaches it.
const waitFor = 10 * time.Second

func (e *env) runner(pol work.Policy, fn work.AttemptFunc) *runner {
	pol.Kind = kindT
	if pol.Timeout == 0 {
		pol.Timeout = 10 * time.Minute
	}
	if pol.MaxAttempts == 0 {
		pol.MaxAttempts = 3
	}
	r := &runner{rec: &recorder{}}
	r.Executor = &work.Executor[struct{}]{Protocol: e.p, Queue: r.rec, Kind: kindT,
		Logger: slog.New(slog.DiscardHandler),
		Policy: func(context.Context) (work.Policy, struct{}, error) { return pol, struct{}{}, nil },
		Prepare: func(context.Context, work.Item, work.Policy, struct{}) (work.AttemptFunc, error) {
			r.prepared.Add(1)
			return func(ctx context.Context, a *work.Attempt) work.Outcome {
				r.runs.Add(1)
				return fn(ctx, a)
			}, nil
		}}
	return r
}

// writes counts the writes the store was sent (the fault injector sees each).
func (e *env) writes() int {
	n, _ := e.faults.Counts()
	return n
}

func wakeup(id string) queue.Message { return queue.Message{Kind: string(kindT), ID: id} }

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// recv waits for a value the attempt sends, failing the test on a hang.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// testExecutor runs the attempt executor on the store: the one lifecycle of
// every kind of background work.
func testExecutor(t *testing.T, open Opener) {
	t.Run("DuplicateWakeups", func(t *testing.T) { t.Parallel(); testExecutorDuplicates(t, open) })
	t.Run("ClaimLost", func(t *testing.T) { t.Parallel(); testExecutorClaimLost(t, open) })
	t.Run("Deadline", func(t *testing.T) { t.Parallel(); testExecutorDeadline(t, open) })
	t.Run("Outcomes", func(t *testing.T) { t.Parallel(); testExecutorOutcomes(t, open) })
	t.Run("WakeNext", func(t *testing.T) { t.Parallel(); testExecutorWakeNext(t, open) })
	t.Run("EndWith", func(t *testing.T) { t.Parallel(); testExecutorEndWith(t, open) })
	t.Run("ReleaseResume", func(t *testing.T) { t.Parallel(); testExecutorRelease(t, open) })
	t.Run("FinalWriteFault", func(t *testing.T) { t.Parallel(); testExecutorFinalFault(t, open) })
}

// testExecutorDuplicates: 8 deliveries of one wake-up at once run one attempt;
// the other 7 are dropped while it runs (its claim held, or lost to it).
func testExecutorDuplicates(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "apply/acme")
	release := make(chan struct{})
	x := e.runner(work.Policy{Budget: 2}, func(ctx context.Context, a *work.Attempt) work.Outcome {
		<-release
		return work.End("done", "", nil)
	})
	const n = 8
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { <-start; errs <- x.Handle(e.ctx, wakeup(it.ID)) }()
	}
	close(start)
	// Seven return while the attempt blocks: a second attempt would block too.
	for i := 0; i < n-1; i++ {
		if err := recv(t, errs, "the duplicate wake-ups to be dropped"); err != nil {
			t.Fatalf("duplicate wake-up: %v", err)
		}
	}
	close(release)
	if err := recv(t, errs, "the attempt"); err != nil {
		t.Fatalf("the attempt's wake-up: %v", err)
	}
	if r := x.runs.Load(); r != 1 {
		t.Fatalf("%d attempts ran for %d wake-ups, want 1", r, n)
	}
	if got := e.get(kindT, it.ID); got.Status != "done" || got.Attempts != 1 || got.Active {
		t.Fatalf("item %+v, want done at attempt 1", got)
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("slots %d lock %q after the end", e.active(kindT), e.holder("apply/acme"))
	}
	// A late duplicate finds it done.
	if err := x.Handle(e.ctx, wakeup(it.ID)); err != nil || x.runs.Load() != 1 {
		t.Fatalf("late wake-up: %v, runs %d", err, x.runs.Load())
	}
}

// testExecutorClaimLost: when another takes the claim during an attempt, the
// keep-alive cancels the attempt with ErrClaimLost and the executor writes
// nothing after it.
func testExecutorClaimLost(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "apply/acme")
	started := make(chan work.Claim, 1)
	cause := make(chan error, 1)
	var lostAt atomic.Int64 // writes sent when the attempt saw its claim lost
	x := e.runner(work.Policy{Budget: roomy, Heartbeat: 5 * time.Millisecond}, func(ctx context.Context, a *work.Attempt) work.Outcome {
		started <- a.Claim
		<-ctx.Done()
		lostAt.Store(int64(e.writes()))
		cause <- context.Cause(ctx)
		return work.End("done", "must not be written", nil).Waking(wakeup("other"))
	})
	handled := make(chan error, 1)
	go func() { handled <- x.Handle(e.ctx, wakeup(it.ID)) }()
	c1 := recv(t, started, "the attempt to start")

	// The tick requeues it (its heartbeats are all before the cut-off passed)
	// and another worker claims it.
	requeued, err := e.p.Requeue(e.ctx, e.get(kindT, it.ID), e.clock.Now().Add(time.Minute), 5, work.StatusTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c2, claimed, err := e.p.ClaimSeen(e.ctx, requeued, roomy)
	if err != nil {
		t.Fatal(err)
	}
	// The loss may be seen right after the requeue, before this test's own
	// claim: count from whichever came last.
	afterOwn := int64(e.writes())
	if got := recv(t, cause, "the attempt to be cancelled"); !errors.Is(got, work.ErrClaimLost) {
		t.Fatalf("attempt cancelled with cause %v, want %v", got, work.ErrClaimLost)
	}
	if err := recv(t, handled, "Handle to return"); err != nil {
		t.Fatalf("handle after a lost claim: %v", err)
	}
	// Not even tried: the store would refuse it, but a lost claim writes nothing.
	if n := int64(e.writes()) - max(lostAt.Load(), afterOwn); n != 0 {
		t.Fatalf("%d writes sent after the claim was lost, want none", n)
	}
	got := e.get(kindT, it.ID)
	if got.OpID != claimed.OpID || got.Token != c2.Token || got.Token == c1.Token || got.Status != work.StatusRunning || got.Attempts != 2 {
		t.Fatalf("item %+v, want as the new owner left it (op %s)", got, claimed.OpID)
	}
	if e.active(kindT) != 1 || e.holder("apply/acme") != work.Holder(kindT, it.ID) {
		t.Fatalf("slots %d lock %q, want the new owner's", e.active(kindT), e.holder("apply/acme"))
	}
	if n := x.rec.total(); n != 0 {
		t.Fatalf("%d wake-ups sent after a lost claim, want none", n)
	}
}

// testExecutorDeadline: an attempt that reaches its deadline (its own, or the
// handler's minus the commit margin), or whose handler is interrupted, still
// gets its outcome written: the final write does not use the attempt's context.
func testExecutorDeadline(t *testing.T, open Opener) {
	type seen struct {
		deadlineHit, interrupted bool
		cause                    error
		deadline                 time.Time
	}
	observe := func(ch chan<- seen, out work.Outcome) work.AttemptFunc {
		return func(ctx context.Context, a *work.Attempt) work.Outcome {
			<-ctx.Done()
			dl, _ := ctx.Deadline()
			ch <- seen{a.DeadlineHit(), a.Interrupted(), context.Cause(ctx), dl}
			return out
		}
	}
	t.Run("AttemptTimeout", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "apply/acme")
		ch := make(chan seen, 1)
		x := e.runner(work.Policy{AttemptTimeout: 20 * time.Millisecond}, observe(ch, work.End("done", "cut", nil)))
		if err := x.Handle(e.ctx, wakeup(it.ID)); err != nil {
			t.Fatalf("handle: %v", err)
		}
		s := <-ch
		if !s.deadlineHit || s.interrupted || !errors.Is(s.cause, work.ErrAttemptDeadline) {
			t.Fatalf("attempt saw %+v, want its deadline hit", s)
		}
		if got := e.get(kindT, it.ID); got.Status != "done" || got.Reason != "cut" || got.Active {
			t.Fatalf("item %+v, want the outcome written after the deadline", got)
		}
		if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
			t.Fatal("slot or lock kept after the deadline's outcome")
		}
	})
	t.Run("HandlerDeadline", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "")
		ch := make(chan seen, 1)
		const margin = 3 * time.Second
		x := e.runner(work.Policy{CommitMargin: margin, AttemptTimeout: time.Hour}, observe(ch, work.End("done", "", nil)))
		hctx, cancel := context.WithTimeout(e.ctx, margin+30*time.Millisecond)
		defer cancel()
		hdl, _ := hctx.Deadline()
		if err := x.Handle(hctx, wakeup(it.ID)); err != nil {
			t.Fatalf("handle: %v", err)
		}
		s := <-ch
		if !s.deadlineHit || !errors.Is(s.cause, work.ErrAttemptDeadline) || !s.deadline.Equal(hdl.Add(-margin)) {
			t.Fatalf("attempt saw %+v, want its deadline at the handler's (%v) minus %v", s, hdl, margin)
		}
		if got := e.get(kindT, it.ID); got.Status != "done" {
			t.Fatalf("item %+v, want done", got)
		}
	})
	t.Run("Interrupted", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "apply/acme")
		ch := make(chan seen, 1)
		started := make(chan struct{})
		hctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		inner := observe(ch, work.GiveBack("interrupted", false, nil))
		x := e.runner(work.Policy{}, func(ctx context.Context, a *work.Attempt) work.Outcome {
			close(started)
			return inner(ctx, a)
		})
		handled := make(chan error, 1)
		go func() { handled <- x.Handle(hctx, wakeup(it.ID)) }()
		recv(t, started, "the attempt to start")
		cancel()
		if err := recv(t, handled, "Handle to return"); err != nil {
			t.Fatalf("handle: %v", err)
		}
		s := <-ch
		if !s.interrupted || s.deadlineHit {
			t.Fatalf("attempt saw %+v, want interrupted", s)
		}
		got := e.get(kindT, it.ID)
		if got.Status != work.StatusPending || got.Active || got.Attempts != 1 || got.Reason != "interrupted" {
			t.Fatalf("item %+v, want given back after the interruption", got)
		}
		if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
			t.Fatal("slot or lock kept after the give-back")
		}
	})
}

// testExecutorOutcomes: GiveBack returns the item to pending (and wakes it when
// asked), End frees its slot and lock, Leave writes nothing, and Run drives a
// claim made by CreateClaimed the same way.
func testExecutorOutcomes(t *testing.T, open Opener) {
	e := setup(t, open)
	a := e.create(kindT, "apply/acme")
	b := e.create(kindT, "apply/other")
	outcomes := map[string][]work.Outcome{
		a.ID: {work.GiveBack("retry later", true, []byte(`{"try":1}`)), work.End("done", "ok", []byte(`{"try":2}`))},
		b.ID: {work.GiveBack("quietly", false, nil)},
	}
	var mu sync.Mutex
	x := e.runner(work.Policy{Budget: 5}, func(ctx context.Context, at *work.Attempt) work.Outcome {
		mu.Lock()
		defer mu.Unlock()
		out := outcomes[at.Claim.ID][0]
		outcomes[at.Claim.ID] = outcomes[at.Claim.ID][1:]
		return out
	})
	if err := x.Handle(e.ctx, wakeup(a.ID)); err != nil {
		t.Fatal(err)
	}
	got := e.get(kindT, a.ID)
	if got.Status != work.StatusPending || got.Active || got.Token != "" || got.Attempts != 1 || got.Reason != "retry later" || string(got.Data) != `{"try":1}` {
		t.Fatalf("given back %+v", got)
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("give-back kept slot (%d) or lock (%q)", e.active(kindT), e.holder("apply/acme"))
	}
	if n := x.rec.count(a.ID); n != 1 {
		t.Fatalf("give-back with wake sent %d wake-ups of it, want 1", n)
	}
	// Its wake-up runs the second attempt, which ends it.
	if err := x.Handle(e.ctx, x.rec.sent[0]); err != nil {
		t.Fatal(err)
	}
	got = e.get(kindT, a.ID)
	if got.Status != "done" || got.Active || got.Token != "" || got.Attempts != 2 || got.Reason != "ok" || string(got.Data) != `{"try":2}` {
		t.Fatalf("ended %+v", got)
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("end kept slot (%d) or lock (%q)", e.active(kindT), e.holder("apply/acme"))
	}
	if x.rec.count(a.ID) != 1 {
		t.Fatal("end woke the item it ended")
	}
	if err := x.Handle(e.ctx, wakeup(b.ID)); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, b.ID); got.Status != work.StatusPending || got.Reason != "quietly" || x.rec.count(b.ID) != 0 {
		t.Fatalf("give-back without wake: %+v, %d wake-ups", got, x.rec.count(b.ID))
	}

	// Leave: nothing written, the error back to the queue.
	boom := errors.New("store down")
	var left work.Item
	var leftAt int
	leave := e.runner(work.Policy{Budget: roomy}, func(ctx context.Context, at *work.Attempt) work.Outcome {
		left, leftAt = at.Item, e.writes()
		return work.Leave(boom)
	})
	if err := leave.Handle(e.ctx, wakeup(b.ID)); !errors.Is(err, boom) {
		t.Fatalf("leave: handle returned %v, want %v", err, boom)
	}
	if n := e.writes() - leftAt; n != 0 {
		t.Fatalf("leave sent %d writes, want none", n)
	}
	got = e.get(kindT, b.ID)
	if got.OpID != left.OpID || got.Status != work.StatusRunning || !got.Active || got.Token != left.Token || got.Attempts != 2 {
		t.Fatalf("after leave %+v, want as claimed (%+v)", got, left)
	}
	if e.active(kindT) != 1 || e.holder("apply/other") != work.Holder(kindT, b.ID) || leave.rec.total() != 0 {
		t.Fatalf("leave released slot (%d) or lock (%q), or woke (%d)", e.active(kindT), e.holder("apply/other"), leave.rec.total())
	}

	// Run: a claim the caller created.
	c, it, err := e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, LockKey: "apply/run"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ran work.Claim
	if err := x.Run(e.ctx, c, it, func(ctx context.Context, at *work.Attempt) work.Outcome {
		ran = at.Claim
		return work.End("done", "", nil)
	}); err != nil {
		t.Fatalf("run: %v", err)
	}
	if ran != c || e.get(kindT, c.ID).Status != "done" || e.holder("apply/run") != "" || e.active(kindT) != 1 {
		t.Fatalf("run of a created claim: ran %+v, item %+v, lock %q, slots %d", ran, e.get(kindT, c.ID), e.holder("apply/run"), e.active(kindT))
	}
}

// testExecutorWakeNext: an item's wake-up refused for a full budget is sent
// again when the item holding the slot ends, without waiting for the tick;
// with WakeNext the oldest pending items are woken at every end; Next chooses
// them when set.
func testExecutorWakeNext(t *testing.T, open Opener) {
	t.Run("AfterRefusal", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		first := e.create(kindT, "")
		second := e.create(kindT, "")
		third := e.create(kindT, "")
		started, release := make(chan struct{}), make(chan struct{})
		x := e.runner(work.Policy{Budget: 1}, func(ctx context.Context, a *work.Attempt) work.Outcome {
			if a.Claim.ID == first.ID {
				close(started)
				<-release
			}
			return work.End("done", "", nil)
		})
		handled := make(chan error, 1)
		go func() { handled <- x.Handle(e.ctx, wakeup(first.ID)) }()
		recv(t, started, "the first attempt")
		// The budget is full: the second's wake-up is dropped, no attempt.
		if err := x.Handle(e.ctx, wakeup(second.ID)); err != nil {
			t.Fatal(err)
		}
		if got := e.get(kindT, second.ID); got.Status != work.StatusPending || got.Attempts != 0 || x.runs.Load() != 1 {
			t.Fatalf("second %+v after a refused claim, %d attempts run", got, x.runs.Load())
		}
		if x.rec.total() != 0 {
			t.Fatal("wake-up sent before anything ended")
		}
		close(release)
		if err := recv(t, handled, "the first attempt to end"); err != nil {
			t.Fatal(err)
		}
		// The end freed the slot: the oldest pending (the second) is woken, one
		// wake-up for a budget of one.
		if x.rec.count(second.ID) != 1 || x.rec.total() != 1 {
			t.Fatalf("after the first ended, sent %v, want the second's wake-up", x.rec.sent)
		}
		if err := x.Handle(e.ctx, x.rec.sent[0]); err != nil {
			t.Fatal(err)
		}
		if got := e.get(kindT, second.ID); got.Status != "done" || got.Attempts != 1 {
			t.Fatalf("second %+v, want done", got)
		}
		// No refusal since: the second's end wakes nobody (WakeNext 0).
		if x.rec.total() != 1 || x.rec.count(third.ID) != 0 {
			t.Fatalf("sent %v, want no wake-up without a refusal", x.rec.sent)
		}
	})
	t.Run("RefusedAsFreed", func(t *testing.T) {
		// The second's claim is refused for the full budget, and the first's
		// end lands and looks for refused claims before the refusal is
		// noted (a group commit returns both at once): the refused claim
		// itself sees the slot free and wakes the second again, rather
		// than leave it to the tick.
		t.Parallel()
		e := setup(t, open)
		first := e.create(kindT, "")
		second := e.create(kindT, "")
		started, release := make(chan struct{}), make(chan struct{})
		x := e.runner(work.Policy{Budget: 1}, func(ctx context.Context, a *work.Attempt) work.Outcome {
			if a.Claim.ID == first.ID {
				close(started)
				<-release
			}
			return work.End("done", "", nil)
		})
		handled := make(chan error, 1)
		p := *e.p
		p.Backend = &afterClaim{Backend: e.p.Backend, id: second.ID, then: func() {
			close(release)
			if err := recv(t, handled, "the first attempt to end"); err != nil {
				t.Error(err)
			}
		}}
		x.Protocol = &p
		go func() { handled <- x.Handle(e.ctx, wakeup(first.ID)) }()
		recv(t, started, "the first attempt")
		if err := x.Handle(e.ctx, wakeup(second.ID)); err != nil {
			t.Fatal(err)
		}
		if got := e.get(kindT, second.ID); got.Status != work.StatusPending || got.Attempts != 0 {
			t.Fatalf("second %+v, want pending: its claim was refused", got)
		}
		if x.rec.count(second.ID) != 1 {
			t.Fatalf("sent %v, want the second woken again (its claim was refused as the slot freed)", x.rec.sent)
		}
	})
	t.Run("Policy", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		first := e.create(kindT, "")
		second := e.create(kindT, "")
		third := e.create(kindT, "")
		fourth := e.create(kindT, "")
		x := e.runner(work.Policy{WakeNext: 2}, func(context.Context, *work.Attempt) work.Outcome {
			return work.End("done", "", nil).Waking(queue.Message{Kind: "note", ID: "n1"})
		})
		if err := x.Handle(e.ctx, wakeup(first.ID)); err != nil {
			t.Fatal(err)
		}
		if x.rec.count(second.ID) != 1 || x.rec.count(third.ID) != 1 || x.rec.count(fourth.ID) != 0 ||
			x.rec.count(first.ID) != 0 || x.rec.count("n1") != 1 {
			t.Fatalf("sent %v, want the outcome's wake-up and the two oldest pending", x.rec.sent)
		}
		// Next, when set, chooses instead.
		x.Next = func(_ context.Context, ended work.Item, _ work.Policy) ([]string, error) {
			if ended.ID != second.ID || ended.Status != "done" {
				t.Errorf("next called with %+v", ended)
			}
			return []string{fourth.ID, second.ID}, nil
		}
		before := x.rec.total()
		if err := x.Handle(e.ctx, wakeup(second.ID)); err != nil {
			t.Fatal(err)
		}
		if x.rec.count(fourth.ID) != 1 || x.rec.count(third.ID) != 1 || x.rec.count(second.ID) != 1 || x.rec.total() != before+2 {
			t.Fatalf("sent %v, want the outcome's and Next's (not the ended item)", x.rec.sent)
		}
	})
}

// testExecutorEndWith: an EndWith builder whose extra op fails its condition
// is called again with that very op, and the item ends once; one that keeps
// failing gives the item back.
func testExecutorEndWith(t *testing.T, open Opener) {
	e := setup(t, open)
	note := e.create(kindT, "")
	it := e.create(kindT, "apply/acme")
	bad := failing(e, note.ID)
	good := work.UpdateItem{Kind: kindT, ID: note.ID, If: work.Cond{Statuses: []work.Status{work.StatusPending}},
		Set: work.Set{Reason: work.Ptr("touched"), UpdatedAt: e.clock.Now(), OpID: "touch"}}
	var calls []work.Op
	var afters atomic.Int32
	var ended work.Item
	x := e.runner(work.Policy{}, func(context.Context, *work.Attempt) work.Outcome {
		return work.EndWith(func(_ context.Context, failed work.Op) (work.Transition, []work.Op, error) {
			calls = append(calls, failed)
			if failed == nil {
				return work.Transition{To: "done", Reason: work.Ptr("first")}, []work.Op{bump(), bad}, nil
			}
			return work.Transition{To: "done", Reason: work.Ptr("second")}, []work.Op{bump(), good}, nil
		}, 3).Then(func(_ context.Context, got work.Item) { afters.Add(1); ended = got })
	})
	if err := x.Handle(e.ctx, wakeup(it.ID)); err != nil {
		t.Fatalf("handle: %v", err)
	}
	if len(calls) != 2 || calls[0] != nil || !reflect.DeepEqual(calls[1], work.Op(bad)) {
		t.Fatalf("builder called with %#v, want nil then the failed op %#v", calls, bad)
	}
	got := e.get(kindT, it.ID)
	if got.Status != "done" || got.Reason != "second" || got.Active || afters.Load() != 1 || ended.OpID != got.OpID {
		t.Fatalf("item %+v, After called %d times with %+v", got, afters.Load(), ended)
	}
	if e.active(kindCounter) != 1 || e.get(kindT, note.ID).Reason != "touched" || e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("counter %d (want 1), note %+v, slots %d, lock %q", e.active(kindCounter), e.get(kindT, note.ID), e.active(kindT), e.holder("apply/acme"))
	}

	// Always failing: called 1+retries times, then given back.
	raced := e.create(kindT, "apply/acme")
	calls = nil
	y := e.runner(work.Policy{}, func(context.Context, *work.Attempt) work.Outcome {
		out := work.EndWith(func(_ context.Context, failed work.Op) (work.Transition, []work.Op, error) {
			calls = append(calls, failed)
			return work.Transition{To: "done"}, []work.Op{bad}, nil
		}, 2)
		out.RacedReason = "raced"
		return out
	})
	err := y.Handle(e.ctx, wakeup(raced.ID))
	wantCode(t, err, molt.EUNAVAILABLE)
	if len(calls) != 3 || !reflect.DeepEqual(calls[2], work.Op(bad)) {
		t.Fatalf("builder called %d times (%#v), want 3", len(calls), calls)
	}
	if got := e.get(kindT, raced.ID); got.Status != work.StatusPending || got.Reason != "raced" || got.Active || got.Attempts != 1 {
		t.Fatalf("raced item %+v, want given back", got)
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" || e.active(kindCounter) != 1 {
		t.Fatal("raced give-back left a slot or lock, or wrote an extra op")
	}
}

// testExecutorRelease: Release keeps the claim but clears its heartbeat; while
// the heartbeat is fresh another executor leaves it alone, once released a
// second executor with Resume takes it over at once.
func testExecutorRelease(t *testing.T, open Opener) {
	e := setup(t, open)
	pol := work.Policy{Budget: roomy, Claimed: []work.Status{work.StatusRunning, "syncing"}, Resume: []work.Status{"syncing"}}
	it := e.create(kindT, "apply/acme")
	var second *runner
	var first work.Claim
	var nested error
	resumed := make(chan *work.Attempt, 1)
	second = e.runner(pol, func(ctx context.Context, a *work.Attempt) work.Outcome {
		resumed <- a
		return work.End("applied", "", nil)
	})
	x := e.runner(pol, func(ctx context.Context, a *work.Attempt) work.Outcome {
		first = a.Claim
		if err := a.Checkpoint(ctx, "syncing", []byte(`{"sha":"abc"}`)); err != nil {
			return work.Leave(err)
		}
		nested = second.Handle(ctx, wakeup(it.ID)) // the owner is alive: dropped
		return work.Release("publish failed", nil)
	})
	if err := x.Handle(e.ctx, wakeup(it.ID)); err != nil {
		t.Fatal(err)
	}
	if nested != nil || second.prepared.Load() != 0 || second.runs.Load() != 0 {
		t.Fatalf("a wake-up during a live claim: %v, prepared %d, %d attempts run", nested, second.prepared.Load(), second.runs.Load())
	}
	got := e.get(kindT, it.ID)
	if got.Status != "syncing" || !got.Active || got.Token != first.Token || got.Attempts != 1 || got.Reason != "publish failed" ||
		string(got.Data) != `{"sha":"abc"}` || !got.HeartbeatAt.Before(e.clock.Now().Add(-10*time.Minute)) {
		t.Fatalf("released %+v, want the claim kept with its heartbeat cleared", got)
	}
	if e.active(kindT) != 1 || e.holder("apply/acme") != work.Holder(kindT, it.ID) {
		t.Fatalf("release let go of the slot (%d) or lock (%q)", e.active(kindT), e.holder("apply/acme"))
	}
	// No time passes: the released claim is taken over at once.
	if err := second.Handle(e.ctx, wakeup(it.ID)); err != nil {
		t.Fatal(err)
	}
	if second.prepared.Load() != 1 {
		t.Fatalf("prepared %d times, want once for the takeover", second.prepared.Load())
	}
	a := recv(t, resumed, "the takeover")
	if !a.Resumed || a.Claim.Attempts != 2 || a.Claim.Token == first.Token || a.Item.Status != "syncing" || string(a.Item.Data) != `{"sha":"abc"}` {
		t.Fatalf("resumed attempt %+v claim %+v, want a takeover at attempt 2", a.Item, a.Claim)
	}
	if got := e.get(kindT, it.ID); got.Status != "applied" || got.Attempts != 2 || got.Active {
		t.Fatalf("after the takeover %+v", got)
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatal("resumed end left a slot or the lock")
	}
}

// testExecutorFinalFault: the final write's response lost (or the write
// failing before it lands) still ends the item exactly once.
func testExecutorFinalFault(t *testing.T, open Opener) {
	for _, m := range []struct {
		name string
		mode faults.Mode
	}{{"Before", faults.Before}, {"After", faults.After}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			it := e.create(kindT, "apply/acme")
			var afters atomic.Int32
			x := e.runner(work.Policy{}, func(context.Context, *work.Attempt) work.Outcome {
				e.faults.Next(m.mode)
				return work.End("done", "", nil).With(bump()).Then(func(context.Context, work.Item) { afters.Add(1) })
			})
			if err := x.Handle(e.ctx, wakeup(it.ID)); err != nil {
				t.Fatalf("handle with a %s fault on the final write: %v", m.name, err)
			}
			e.checkFaultsUsed()
			if got := e.get(kindT, it.ID); got.Status != "done" || got.Active || got.Attempts != 1 {
				t.Fatalf("item %+v, want done", got)
			}
			if n, k, h := e.active(kindT), e.active(kindCounter), e.holder("apply/acme"); n != 0 || k != 1 || h != "" || afters.Load() != 1 {
				t.Fatalf("slots %d counter %d lock %q after %d, want the end written once", n, k, h, afters.Load())
			}
		})
	}
}

// afterClaim is a backend that runs then once a commit claiming id has
// returned, before its result reaches the protocol.
type afterClaim struct {
	work.Backend
	id   string
	then func()
	once sync.Once
}

func (b *afterClaim) claims(ops []work.Op) bool {
	for _, op := range ops {
		if u, ok := op.(work.UpdateItem); ok && u.ID == b.id && u.Set.Status == work.StatusRunning {
			return true
		}
	}
	return false
}

func (b *afterClaim) Commit(ctx context.Context, ops ...work.Op) error {
	err := b.Backend.Commit(ctx, ops...)
	if b.claims(ops) {
		b.once.Do(b.then)
	}
	return err
}

func (b *afterClaim) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	errs := b.Backend.CommitEach(ctx, cs...)
	for _, ops := range cs {
		if b.claims(ops) {
			b.once.Do(b.then)
		}
	}
	return errs
}
