package work_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/work"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	work.SetReadBackTimeout(200 * time.Millisecond)
	os.Exit(m.Run())
}

const kindT work.Kind = "job"

// blindReads is a Backend (a real SQLite store underneath) whose reads can be made
// to fail: the store is reachable for writes but the read-back after a lost
// response cannot tell what happened.
type blindReads struct {
	*sqlite.Store
	blind atomic.Bool
	// blindAtCommit makes every read fail from the next Commit on (a caller's own
	// read before its write still works).
	blindAtCommit atomic.Bool
}

func (b *blindReads) Commit(ctx context.Context, ops ...work.Op) error {
	if b.blindAtCommit.Swap(false) {
		b.blind.Store(true)
	}
	return b.Store.Commit(ctx, ops...)
}

func (b *blindReads) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	if b.blindAtCommit.Swap(false) {
		b.blind.Store(true)
	}
	return b.Store.CommitEach(ctx, cs...)
}

var errBlind = errors.New("read timed out")

func (b *blindReads) GetItem(ctx context.Context, kind work.Kind, id string) (work.Item, error) {
	if b.blind.Load() {
		return work.Item{}, errBlind
	}
	return b.Store.GetItem(ctx, kind, id)
}

type env struct {
	t      *testing.T
	s      *blindReads
	p      *work.Protocol
	clock  *molt.ManualClock
	faults *faults.Injector
	ctx    context.Context
}

func setup(t *testing.T) *env {
	t.Helper()
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	inj := &faults.Injector{}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{Clock: clock, IDs: ids, Faults: inj})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b := &blindReads{Store: st}
	return &env{t: t, s: b, p: &work.Protocol{Backend: b, Clock: clock, IDs: ids}, clock: clock, faults: inj, ctx: ctx}
}

func (e *env) create(lock string) work.Item {
	e.t.Helper()
	it, err := e.p.Create(e.ctx, work.Item{Kind: kindT, LockKey: lock})
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

func (e *env) get(id string) work.Item {
	e.t.Helper()
	it, err := e.s.Store.GetItem(e.ctx, kindT, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

func (e *env) active() int {
	e.t.Helper()
	n, err := e.s.ActiveCount(e.ctx, kindT)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestUnknownWhenReadBackFails: a write lands but its response is lost, and the
// read-back cannot reach the store. The outcome is unknown, so the protocol must
// neither report a refusal (a lost claim, a claim taken by another, an existing
// item) for a write that landed, nor send the write again blind, which applies an
// op whose condition its own first landing does not break a second time.
func TestUnknownWhenReadBackFails(t *testing.T) {
	t.Parallel()
	t.Run("Claim", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		it := e.create("apply/acme")
		e.faults.Next(faults.After)
		e.s.blindAtCommit.Store(true)
		_, _, err := e.p.ClaimSeen(e.ctx, it, 1)
		e.s.blind.Store(false)
		if molt.ErrorCode(err) == molt.ECONFLICT {
			t.Fatalf("claim that landed reported refused: %v", err)
		}
		wantCode(t, err, molt.EUNAVAILABLE)
		if got := e.get(it.ID); got.Status != work.StatusRunning || e.active() != 1 {
			t.Fatalf("claim did not land once: %+v active %d", got, e.active())
		}
	})
	t.Run("Finish", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		c, _, err := e.p.ClaimSeen(e.ctx, e.create("apply/acme"), 1)
		if err != nil {
			t.Fatal(err)
		}
		e.faults.Next(faults.After)
		e.s.blindAtCommit.Store(true)
		_, err = e.p.Transition(e.ctx, c, work.Transition{To: "done"})
		e.s.blind.Store(false)
		if molt.IsLostClaim(err) {
			t.Fatalf("finish that landed reported a lost claim: %v", err)
		}
		wantCode(t, err, molt.EUNAVAILABLE)
		if got := e.get(c.ID); got.Status != "done" || e.active() != 0 {
			t.Fatalf("finish did not land once: %+v active %d", got, e.active())
		}
	})
	t.Run("Create", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.faults.Next(faults.After)
		e.s.blindAtCommit.Store(true)
		_, err := e.p.Create(e.ctx, work.Item{Kind: kindT, ID: "mine"})
		e.s.blind.Store(false)
		if molt.ErrorReason(err) == work.ReasonExists {
			t.Fatalf("create that landed reported the item as someone else's: %v", err)
		}
		wantCode(t, err, molt.EUNAVAILABLE)
		e.get("mine")
	})
	t.Run("NoBlindResend", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		it := e.create("")
		// An unclaimed change whose condition still holds after it lands (to a status
		// among From), with an extra op that counts: sent twice, it counts twice.
		e.faults.Next(faults.After)
		e.s.blindAtCommit.Store(true)
		_, err := e.p.Update(e.ctx, kindT, it.ID, work.Change{From: []work.Status{work.StatusPending}, To: work.StatusPending,
			Reason: work.Ptr("stamped")}, work.AdjustSlots{Kind: "tally", Delta: 1})
		e.s.blind.Store(false)
		wantCode(t, err, molt.EUNAVAILABLE)
		if n, _ := e.s.ActiveCount(e.ctx, "tally"); n != 1 {
			t.Fatalf("extra op applied %d times, want once (a write re-sent without knowing the first had not landed)", n)
		}
	})
}

// TestDeleteUnknownWhenReadBackFails: a delete lands, its response is lost and
// the store cannot be read back: the outcome is unknown, not a refusal.
func TestDeleteUnknownWhenReadBackFails(t *testing.T) {
	t.Parallel()
	e := setup(t)
	it := e.create("")
	e.faults.Next(faults.After)
	e.s.blindAtCommit.Store(true)
	err := e.p.Delete(e.ctx, kindT, it.ID, []work.Status{work.StatusPending}, 0)
	e.s.blind.Store(false)
	if molt.ErrorCode(err) == molt.ECONFLICT {
		t.Fatalf("delete that landed reported refused: %v", err)
	}
	wantCode(t, err, molt.EUNAVAILABLE)
	if _, err := e.s.GetItem(e.ctx, kindT, it.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("item after delete: %v", err)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := molt.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// hangingReads is a Backend whose reads hang until their context ends (a store
// that stopped answering) and whose writes fail with the caller's context error.
type hangingReads struct{ *sqlite.Store }

func (h hangingReads) GetItem(ctx context.Context, kind work.Kind, id string) (work.Item, error) {
	<-ctx.Done()
	return work.Item{}, ctx.Err()
}

func (h hangingReads) Commit(ctx context.Context, ops ...work.Op) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestAbandonedWriteReturns: a caller that gives up mid-write (its context ends)
// gets an answer in bounded time even when the store stopped answering: the
// protocol reads back once without the caller's context, but not for ever (a
// worker's KeepAlive stop waits on it, a Lambda would run into its timeout).
func TestAbandonedWriteReturns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	it := e.create("")
	p := &work.Protocol{Backend: hangingReads{e.s.Store}, Clock: e.clock, IDs: &molt.SortableIDs{Clock: e.clock}}
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := p.ClaimSeen(ctx, it, 1)
		done <- err
	}()
	select {
	case err := <-done:
		wantCode(t, err, molt.EUNAVAILABLE)
	case <-time.After(work.ReadBackTimeout() + 5*time.Second):
		t.Fatalf("an abandoned claim did not return %v after the caller gave up", work.ReadBackTimeout()+5*time.Second)
	}
}
