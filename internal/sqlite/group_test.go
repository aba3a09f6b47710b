package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/work"
)

// waitQueued waits until n writes wait for the writer.
func waitQueued(t *testing.T, s *sqlite.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); sqlite.Queued(s) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", sqlite.Queued(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit: two commits queued together share one transaction; the one
// whose condition fails gets its own *work.ConditionFailed and leaves nothing
// behind, the other lands.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustCommit(work.CreateItem{Item: e.item("a")})
	running := []work.Status{work.StatusRunning}
	pending := []work.Status{work.StatusPending}

	release := sqlite.HoldWriter(e.s)
	failed, landed := make(chan error, 1), make(chan error, 1)
	go func() {
		failed <- e.s.Commit(e.ctx, work.CreateItem{Item: e.item("x")},
			work.UpdateItem{Kind: kindT, ID: "a", If: work.Cond{Statuses: running}, Set: work.Set{Status: work.Status("done"), OpID: "op-x"}})
	}()
	waitQueued(t, e.s, 1)
	go func() {
		landed <- e.s.Commit(e.ctx, work.CreateItem{Item: e.item("b")},
			work.UpdateItem{Kind: kindT, ID: "a", If: work.Cond{Statuses: pending}, Set: work.Set{Status: work.StatusRunning, OpID: "op-b"}})
	}()
	waitQueued(t, e.s, 2)
	g0, m0 := sqlite.GroupStats(e.s)
	if err := release(); err != nil {
		t.Fatalf("held write: %v", err)
	}
	wantFailed(t, <-failed, 1)
	if err := <-landed; err != nil {
		t.Fatalf("commit queued with a failing one: %v", err)
	}
	g1, m1 := sqlite.GroupStats(e.s)
	// The held write was alone in its group (nothing else was queued when it
	// started); the two commits queued behind it made one more group.
	if g1-g0 != 2 || m1-m0 != 3 {
		t.Fatalf("groups +%d with +%d writes, want +2 with +3 (the two commits in one group)", g1-g0, m1-m0)
	}
	if _, err := e.s.GetItem(e.ctx, kindT, "x"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("item x of the failed commit survived its rollback: %v", err)
	}
	if got := e.get("a"); got.Status != work.StatusRunning || got.OpID != "op-b" {
		t.Fatalf("item a = %s %s, want running by op-b", got.Status, got.OpID)
	}
	e.get("b")
}

// TestGroupCommitOrder: a commit sees the writes of those queued before it in
// its group, as if they had run one after the other.
func TestGroupCommitOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	release := sqlite.HoldWriter(e.s)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- e.s.Commit(e.ctx, work.CreateItem{Item: e.item("a")}) }()
	waitQueued(t, e.s, 1)
	go func() {
		second <- e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: "a",
			If: work.Cond{Statuses: []work.Status{work.StatusPending}}, Set: work.Set{Status: work.StatusRunning, OpID: "op-2"}})
	}()
	waitQueued(t, e.s, 2)
	if err := release(); err != nil {
		t.Fatalf("held write: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("update of the item created earlier in the group: %v", err)
	}
	if got := e.get("a"); got.Status != work.StatusRunning {
		t.Fatalf("item a = %s, want running", got.Status)
	}
}

// TestGroupCommitCancelledWhileQueued: a write whose context ends while it
// waits for the writer is not written and reports EUNAVAILABLE.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	e := setup(t)
	release := sqlite.HoldWriter(e.s)
	ctx, cancel := context.WithCancel(e.ctx)
	res := make(chan error, 1)
	go func() { res <- e.s.Commit(ctx, work.CreateItem{Item: e.item("a")}) }()
	waitQueued(t, e.s, 1)
	cancel()
	wantCode(t, <-res, molt.EUNAVAILABLE)
	if err := release(); err != nil {
		t.Fatalf("held write: %v", err)
	}
	if _, err := e.s.GetItem(e.ctx, kindT, "a"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("cancelled commit was written: %v", err)
	}
}

// TestGroupCommitClose: Close waits for the writes queued, and a write after it
// fails with EUNAVAILABLE.
func TestGroupCommitClose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	release := sqlite.HoldWriter(e.s)
	queued := make(chan error, 1)
	go func() { queued <- e.s.Commit(e.ctx, work.CreateItem{Item: e.item("a")}) }()
	waitQueued(t, e.s, 1)
	closed := make(chan error, 1)
	go func() { closed <- e.s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a write was running", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := release(); err != nil {
		t.Fatalf("held write: %v", err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("write queued before Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	wantCode(t, e.s.Commit(e.ctx, work.CreateItem{Item: e.item("b")}), molt.EUNAVAILABLE)
	s := e.open()
	if _, err := s.GetItem(e.ctx, kindT, "a"); err != nil {
		t.Fatalf("write queued before Close is lost: %v", err)
	}
}
