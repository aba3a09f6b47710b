package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const kindT work.Kind = "job"

type env struct {
	t      *testing.T
	s      *sqlite.Store
	path   string
	clock  *molt.ManualClock
	ids    *molt.SortableIDs
	faults *faults.Injector
	ctx    context.Context
}

// setup opens a fresh store on a temp file with a manual clock and an injector.
func setup(t *testing.T) *env {
	t.Helper()
	clock := molt.NewManualClock(epoch)
	e := &env{t: t, path: filepath.Join(t.TempDir(), "state", "molt.db"), clock: clock,
		ids: &molt.SortableIDs{Clock: clock}, faults: &faults.Injector{}}
	e.s = e.open()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	return e
}

// open opens another Store on e's file: to the file, a second process.
func (e *env) open() *sqlite.Store {
	e.t.Helper()
	s, err := sqlite.Open(e.path, sqlite.Options{Clock: e.clock, IDs: e.ids, Faults: e.faults})
	if err != nil {
		e.t.Fatalf("open %s: %v", e.path, err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *env) item(id string) work.Item {
	now := e.clock.Now()
	return work.Item{Kind: kindT, ID: id, Workspace: "acme", Status: work.StatusPending,
		CreatedAt: now, UpdatedAt: now, OpID: "op-" + id}
}

func (e *env) mustCommit(ops ...work.Op) {
	e.t.Helper()
	if err := e.s.Commit(e.ctx, ops...); err != nil {
		e.t.Fatalf("commit %v: %v", ops, err)
	}
}

func (e *env) get(id string) work.Item {
	e.t.Helper()
	it, err := e.s.GetItem(e.ctx, kindT, id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return it
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := molt.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// wantFailed checks that err is a condition failure of op index.
func wantFailed(t *testing.T, err error, index int) {
	t.Helper()
	var cf *work.ConditionFailed
	if !errors.As(err, &cf) {
		t.Fatalf("error = %v, want condition of op %d failed", err, index)
	}
	if cf.Index != index {
		t.Fatalf("failed op = %d, want %d", cf.Index, index)
	}
}

func TestReopenKeepsSchemaAndData(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustCommit(work.CreateItem{Item: e.item("a")}, work.AdjustSlots{Kind: kindT, Delta: 1}, work.AcquireLock{Key: "apply/acme", Holder: "job/a"})
	if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Reopening runs the migrations again, which must be a no-op.
	for i := 0; i < 2; i++ {
		s, err := sqlite.Open(e.path, sqlite.Options{})
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		it, err := s.GetItem(e.ctx, kindT, "a")
		if err != nil || it.OpID != "op-a" || !it.CreatedAt.Equal(epoch) {
			t.Fatalf("reopened item = %+v, %v", it, err)
		}
		if n, _ := s.ActiveCount(e.ctx, kindT); n != 1 {
			t.Fatalf("reopened active count = %d, want 1", n)
		}
		if h, _ := s.LockHolder(e.ctx, "apply/acme"); h != "job/a" {
			t.Fatalf("reopened lock holder = %q", h)
		}
		if _, err := s.GetWorkspace(e.ctx, "acme"); err != nil {
			t.Fatalf("reopened workspace: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
}

func TestOpenPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A new folder is created; '?', '%', '#' and spaces are part of the file name,
	// not URI syntax.
	for _, name := range []string{"new/dir/molt.db", "odd name?x=1%20#frag.db"} {
		p := filepath.Join(dir, name)
		s, err := sqlite.Open(p, sqlite.Options{})
		if err != nil {
			t.Fatalf("open %q: %v", name, err)
		}
		if err := s.PutSettings(context.Background(), settings.Default()); err != nil {
			t.Fatalf("write to %q: %v", name, err)
		}
		_ = s.Close()
		s, err = sqlite.Open(p, sqlite.Options{})
		if err != nil {
			t.Fatalf("reopen %q: %v", name, err)
		}
		if got, err := s.GetSettings(context.Background()); err != nil || got != settings.Default() {
			t.Fatalf("settings after reopen of %q = %+v %v", name, got, err)
		}
		_ = s.Close()
	}
	if _, err := sqlite.Open("", sqlite.Options{}); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("open empty path: %v, want invalid", err)
	}
}

func TestCreateItem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	it := e.item("a")
	it.LockKey, it.Reason, it.Data = "apply/acme", "because", []byte(`{"x":1}`)
	it.Attempts, it.AttemptsBase, it.Token, it.Active = 3, 1, "tok", true
	it.HeartbeatAt = epoch.Add(-time.Second)
	e.mustCommit(work.CreateItem{Item: it})
	got := e.get("a")
	if got.Kind != it.Kind || got.ID != it.ID || got.Workspace != it.Workspace || got.LockKey != it.LockKey ||
		got.Status != it.Status || got.Active != it.Active || got.Attempts != 3 || got.AttemptsBase != 1 ||
		got.Token != "tok" || !got.HeartbeatAt.Equal(it.HeartbeatAt) || got.Reason != "because" ||
		string(got.Data) != `{"x":1}` || !got.CreatedAt.Equal(epoch) || !got.UpdatedAt.Equal(epoch) || got.OpID != "op-a" {
		t.Fatalf("stored item = %+v, want %+v", got, it)
	}

	// The key exists: the condition fails and nothing of the commit is written.
	dup := e.item("a")
	dup.Reason = "overwritten"
	err := e.s.Commit(e.ctx, work.AdjustSlots{Kind: kindT, Delta: 1}, work.CreateItem{Item: dup})
	wantFailed(t, err, 1)
	if got := e.get("a"); got.Reason != "because" {
		t.Fatalf("duplicate create overwrote the item: %+v", got)
	}
	if n, _ := e.s.ActiveCount(e.ctx, kindT); n != 0 {
		t.Fatalf("failed commit left the slot counter at %d", n)
	}

	// Same id, other kind: a different key.
	other := e.item("a")
	other.Kind = "other"
	e.mustCommit(work.CreateItem{Item: other})

	// Malformed items: EINVALID/ETOOLARGE before anything is written.
	bad := []struct {
		name string
		mut  func(*work.Item)
		code string
	}{
		{"no id", func(it *work.Item) { it.ID = "" }, molt.EINVALID},
		{"bad id", func(it *work.Item) { it.ID = "a/b" }, molt.EINVALID},
		{"bad kind", func(it *work.Item) { it.Kind = "Job" }, molt.EINVALID},
		{"no status", func(it *work.Item) { it.Status = "" }, molt.EINVALID},
		{"bad lock", func(it *work.Item) { it.LockKey = "nolock" }, molt.EINVALID},
		{"data too large", func(it *work.Item) { it.Data = make([]byte, work.MaxData+1) }, molt.ETOOLARGE},
	}
	for _, b := range bad {
		it := e.item("fresh")
		b.mut(&it)
		err := e.s.Commit(e.ctx, work.CreateItem{Item: e.item("first")}, work.CreateItem{Item: it})
		if molt.ErrorCode(err) != b.code {
			t.Errorf("%s: %v, want %s", b.name, err, b.code)
		}
	}
	if _, err := e.s.GetItem(e.ctx, kindT, "first"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("an invalid commit wrote its valid op: %v", err)
	}
	if w, _ := e.faults.Counts(); w != 3 {
		t.Fatalf("writes sent = %d, want 3 (invalid commits must not reach the database)", w)
	}
	wantCode(t, e.s.Commit(e.ctx), molt.EINVALID)
	ops := make([]work.Op, sqlite.MaxOps+1)
	for i := range ops {
		ops[i] = work.AdjustSlots{Kind: kindT, Delta: 1}
	}
	wantCode(t, e.s.Commit(e.ctx, ops...), molt.EINVALID)
}

func TestUpdateItemConditions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	it := e.item("a")
	it.Status, it.Attempts, it.Token, it.Active = work.StatusRunning, 2, "tok", true
	it.HeartbeatAt = epoch
	e.mustCommit(work.CreateItem{Item: it})
	idle := e.item("idle") // pending, never claimed: no token, zero heartbeat
	e.mustCommit(work.CreateItem{Item: idle})

	cases := []struct {
		name string
		id   string
		cond work.Cond
		ok   bool
	}{
		{"no condition", "a", work.Cond{}, true},
		{"missing item", "ghost", work.Cond{}, false},
		{"status in set", "a", work.Cond{Statuses: []work.Status{work.StatusPending, work.StatusRunning}}, true},
		{"status not in set", "a", work.Cond{Statuses: []work.Status{work.StatusPending}}, false},
		{"attempts equal", "a", work.Cond{Attempts: work.Ptr(2)}, true},
		{"attempts differ", "a", work.Cond{Attempts: work.Ptr(1)}, false},
		{"attempts zero equal", "idle", work.Cond{Attempts: work.Ptr(0)}, true},
		{"token equal", "a", work.Cond{Token: "tok"}, true},
		{"token differs", "a", work.Cond{Token: "other"}, false},
		{"active equal", "a", work.Cond{Active: work.Ptr(true)}, true},
		{"active differs", "a", work.Cond{Active: work.Ptr(false)}, false},
		{"inactive equal", "idle", work.Cond{Active: work.Ptr(false)}, true},
		{"heartbeat before", "a", work.Cond{StaleBefore: epoch.Add(time.Nanosecond)}, true},
		{"heartbeat equal is not before", "a", work.Cond{StaleBefore: epoch}, false},
		{"heartbeat after", "a", work.Cond{StaleBefore: epoch.Add(-time.Hour)}, false},
		{"heartbeat in another zone", "a", work.Cond{StaleBefore: epoch.Add(time.Millisecond).In(time.FixedZone("x", -5*3600))}, true},
		{"all hold", "a", work.Cond{Statuses: []work.Status{work.StatusRunning}, Attempts: work.Ptr(2), Token: "tok",
			Active: work.Ptr(true), StaleBefore: epoch.Add(time.Second)}, true},
		{"all but one hold", "a", work.Cond{Statuses: []work.Status{work.StatusRunning}, Attempts: work.Ptr(2), Token: "tok",
			Active: work.Ptr(true), StaleBefore: epoch}, false},
	}
	for i, c := range cases {
		opID := fmt.Sprintf("case-%d", i)
		err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: c.id, If: c.cond, Set: work.Set{OpID: opID, UpdatedAt: epoch}})
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v, want applied", c.name, err)
		case !c.ok:
			var cf *work.ConditionFailed
			if !errors.As(err, &cf) || cf.Index != 0 {
				t.Errorf("%s: %v, want condition of op 0 failed", c.name, err)
			}
		}
		if c.id == "ghost" {
			continue
		}
		if applied := e.get(c.id).OpID == opID; applied != c.ok {
			t.Errorf("%s: applied = %t, want %t", c.name, applied, c.ok)
		}
	}
}

func TestUpdateItemSet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	it := e.item("a")
	it.Reason, it.Data, it.Token, it.Attempts, it.AttemptsBase = "r0", []byte("d0"), "t0", 4, 2
	it.HeartbeatAt, it.Active = epoch, true
	e.mustCommit(work.CreateItem{Item: it})

	// Empty Set: only op id and updated_at change.
	later := epoch.Add(time.Minute)
	e.mustCommit(work.UpdateItem{Kind: kindT, ID: "a", Set: work.Set{OpID: "op2", UpdatedAt: later}})
	got := e.get("a")
	want := it
	want.OpID, want.UpdatedAt = "op2", later
	if !sameItem(got, want) {
		t.Fatalf("after empty set = %+v, want %+v", got, want)
	}

	// Every field.
	hb := epoch.Add(2 * time.Minute)
	e.mustCommit(work.UpdateItem{Kind: kindT, ID: "a", Set: work.Set{Status: "syncing", Active: work.Ptr(false),
		Attempts: work.Ptr(5), AttemptsBase: work.Ptr(5), Token: work.Ptr(""), HeartbeatAt: &hb,
		Reason: work.Ptr(""), Data: []byte("d1"), OpID: "op3", UpdatedAt: hb}})
	got = e.get("a")
	want.Status, want.Active, want.Attempts, want.AttemptsBase, want.Token = "syncing", false, 5, 5, ""
	want.HeartbeatAt, want.Reason, want.Data, want.OpID, want.UpdatedAt = hb, "", []byte("d1"), "op3", hb
	if !sameItem(got, want) {
		t.Fatalf("after full set = %+v, want %+v", got, want)
	}

	// Oversized data or reason: refused before writing.
	err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: "a", Set: work.Set{Data: make([]byte, work.MaxData+1), OpID: "op4"}})
	wantCode(t, err, molt.ETOOLARGE)
	err = e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: "a", Set: work.Set{Reason: work.Ptr(strings.Repeat("x", 2001)), OpID: "op4"}})
	wantCode(t, err, molt.EINVALID)
	err = e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: "", Set: work.Set{OpID: "op4"}})
	wantCode(t, err, molt.EINVALID)
	if e.get("a").OpID != "op3" {
		t.Fatal("refused update was written")
	}
}

func sameItem(a, b work.Item) bool {
	return a.Kind == b.Kind && a.ID == b.ID && a.Workspace == b.Workspace && a.LockKey == b.LockKey &&
		a.Status == b.Status && a.Active == b.Active && a.Attempts == b.Attempts && a.AttemptsBase == b.AttemptsBase &&
		a.Token == b.Token && a.HeartbeatAt.Equal(b.HeartbeatAt) && a.Reason == b.Reason && bytes.Equal(a.Data, b.Data) &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.OpID == b.OpID
}

func TestAdjustSlots(t *testing.T) {
	t.Parallel()
	e := setup(t)
	steps := []struct {
		delta, max int
		ok         bool
		after      int
	}{
		{-1, 0, false, 0}, // below zero
		{1, 2, true, 1},
		{1, 2, true, 2},
		{1, 2, false, 2}, // over max
		{1, 0, true, 3},  // no max: unlimited
		{2, 4, false, 3}, // 3+2 > 4
		{1, 4, true, 4},
		{-4, 0, true, 0},
		{-1, 0, false, 0},
		{0, 0, true, 0},
	}
	for i, s := range steps {
		err := e.s.Commit(e.ctx, work.AdjustSlots{Kind: kindT, Delta: s.delta, Max: s.max})
		if s.ok && err != nil {
			t.Fatalf("step %d (%+d max %d): %v", i, s.delta, s.max, err)
		}
		if !s.ok {
			wantFailed(t, err, 0)
		}
		if n, err := e.s.ActiveCount(e.ctx, kindT); err != nil || n != s.after {
			t.Fatalf("step %d: active = %d %v, want %d", i, n, err, s.after)
		}
	}
	// Counters are per kind.
	if n, _ := e.s.ActiveCount(e.ctx, "other"); n != 0 {
		t.Fatalf("other kind's counter = %d", n)
	}
	wantCode(t, e.s.Commit(e.ctx, work.AdjustSlots{Kind: "Bad Kind", Delta: 1}), molt.EINVALID)
}

func TestLocks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const key = "apply/acme"
	holder := func() string {
		h, err := e.s.LockHolder(e.ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := holder(); h != "" {
		t.Fatalf("fresh lock holder = %q", h)
	}
	e.mustCommit(work.AcquireLock{Key: key, Holder: "apply/1"})
	e.mustCommit(work.AcquireLock{Key: key, Holder: "apply/1"}) // re-entrant for its holder
	wantFailed(t, e.s.Commit(e.ctx, work.AcquireLock{Key: key, Holder: "apply/2"}), 0)
	wantFailed(t, e.s.Commit(e.ctx, work.ReleaseLock{Key: key, Holder: "apply/2"}), 0)
	if h := holder(); h != "apply/1" {
		t.Fatalf("holder = %q, want apply/1", h)
	}
	e.mustCommit(work.ReleaseLock{Key: key, Holder: "apply/1"})
	if h := holder(); h != "" {
		t.Fatalf("holder after release = %q", h)
	}
	wantFailed(t, e.s.Commit(e.ctx, work.ReleaseLock{Key: key, Holder: "apply/1"}), 0) // not held
	e.mustCommit(work.AcquireLock{Key: key, Holder: "apply/2"})
	if h := holder(); h != "apply/2" {
		t.Fatalf("holder = %q, want apply/2", h)
	}
	wantCode(t, e.s.Commit(e.ctx, work.AcquireLock{Key: "", Holder: "x"}), molt.EINVALID)
	wantCode(t, e.s.Commit(e.ctx, work.AcquireLock{Key: key, Holder: ""}), molt.EINVALID)
}

// TestCommitAtomic: one failed condition anywhere undoes every earlier op.
func TestCommitAtomic(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustCommit(work.CreateItem{Item: e.item("a")}, work.AcquireLock{Key: "apply/other", Holder: "x/1"})
	ops := []work.Op{
		work.CreateItem{Item: e.item("b")},
		work.UpdateItem{Kind: kindT, ID: "a", If: work.Cond{Statuses: []work.Status{work.StatusPending}},
			Set: work.Set{Status: work.StatusRunning, OpID: "op-x"}},
		work.AdjustSlots{Kind: kindT, Delta: 1, Max: 1},
		work.AcquireLock{Key: "apply/acme", Holder: "job/a"},
		work.ReleaseLock{Key: "apply/other", Holder: "x/1"},
		work.AdjustSlots{Kind: "unused", Delta: -1}, // fails: that counter is 0
	}
	wantFailed(t, e.s.Commit(e.ctx, ops...), 5)
	if _, err := e.s.GetItem(e.ctx, kindT, "b"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("created item survived the rollback: %v", err)
	}
	if got := e.get("a"); got.Status != work.StatusPending || got.OpID != "op-a" {
		t.Fatalf("updated item survived the rollback: %+v", got)
	}
	if n, _ := e.s.ActiveCount(e.ctx, kindT); n != 0 {
		t.Fatalf("slot counter = %d after rollback", n)
	}
	if h, _ := e.s.LockHolder(e.ctx, "apply/acme"); h != "" {
		t.Fatalf("lock apply/acme held by %q after rollback", h)
	}
	if h, _ := e.s.LockHolder(e.ctx, "apply/other"); h != "x/1" {
		t.Fatalf("lock apply/other held by %q after rollback, want x/1", h)
	}
	// A commit that writes one row twice (release, then acquire one lock) would
	// apply in order here but cannot be one DynamoDB transaction: refused on both.
	err := e.s.Commit(e.ctx, append(ops[:5:5], work.AcquireLock{Key: "apply/other", Holder: "job/a"})...)
	wantCode(t, err, molt.EINVALID)
	if h, _ := e.s.LockHolder(e.ctx, "apply/other"); h != "x/1" {
		t.Fatalf("lock apply/other held by %q after a refused commit, want x/1", h)
	}
	// Without the failing op, the commit applies.
	e.mustCommit(ops[:5]...)
	if h, _ := e.s.LockHolder(e.ctx, "apply/other"); h != "" {
		t.Fatalf("lock apply/other held by %q, want free", h)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	t.Run("Before", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.faults.Next(faults.Before)
		err := e.s.Commit(e.ctx, work.CreateItem{Item: e.item("a")})
		if !errors.Is(err, faults.ErrInjected) {
			t.Fatalf("commit with a before fault: %v, want injected", err)
		}
		var cf *work.ConditionFailed
		if errors.As(err, &cf) {
			t.Fatal("an injected fault looks like a condition failure")
		}
		if _, err := e.s.GetItem(e.ctx, kindT, "a"); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("before fault wrote the item: %v", err)
		}
	})
	t.Run("After", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.faults.Next(faults.After)
		err := e.s.Commit(e.ctx, work.CreateItem{Item: e.item("a")})
		if !errors.Is(err, faults.ErrInjected) {
			t.Fatalf("commit with an after fault: %v, want injected", err)
		}
		if got := e.get("a"); got.OpID != "op-a" {
			t.Fatalf("after fault did not write the item: %+v", got)
		}
		// A write whose condition fails, with its response lost: the caller must
		// not learn the outcome, so it is not a condition failure either.
		e.faults.Next(faults.After)
		err = e.s.Commit(e.ctx, work.CreateItem{Item: e.item("a")})
		var cf *work.ConditionFailed
		if !errors.Is(err, faults.ErrInjected) || errors.As(err, &cf) {
			t.Fatalf("failed condition with an after fault: %v, want injected only", err)
		}
	})
	t.Run("EveryWrite", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: []byte("u")}); err != nil {
			t.Fatal(err)
		}
		_, tok, _ := auth.New(auth.Full, "", "admin", epoch)
		writes := []struct {
			name  string
			write func() error
			check func() bool // reports whether the write landed
		}{
			{"PutWorkspace", func() error {
				_, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "beta"})
				return err
			}, func() bool { _, err := e.s.GetWorkspace(e.ctx, "beta"); return err == nil }},
			{"PutFile", func() error {
				_, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "INDEX.md", Content: []byte("i")})
				return err
			}, func() bool { _, err := e.s.GetFile(e.ctx, "acme", "INDEX.md"); return err == nil }},
			{"DeleteFile", func() error { return e.s.DeleteFile(e.ctx, "acme", "USER.md") },
				func() bool { _, err := e.s.GetFile(e.ctx, "acme", "USER.md"); return err != nil }},
			{"PutToken", func() error { return e.s.PutToken(e.ctx, tok) },
				func() bool { _, err := e.s.TokenByHash(e.ctx, tok.Hash); return err == nil }},
			{"PutSettings", func() error {
				s := settings.Default()
				s.Evolution.Level = settings.L3
				return e.s.PutSettings(e.ctx, s)
			}, func() bool { s, _ := e.s.GetSettings(e.ctx); return s.Evolution.Level == settings.L3 }},
			{"DeleteWorkspace", func() error { return e.s.DeleteWorkspace(e.ctx, "acme") },
				func() bool { _, err := e.s.GetWorkspace(e.ctx, "acme"); return err != nil }},
		}
		for _, w := range writes {
			e.faults.Next(faults.Before)
			if err := w.write(); !errors.Is(err, faults.ErrInjected) {
				t.Fatalf("%s with a before fault: %v, want injected", w.name, err)
			}
			if w.check() {
				t.Fatalf("%s with a before fault was written", w.name)
			}
			e.faults.Next(faults.After)
			if err := w.write(); !errors.Is(err, faults.ErrInjected) {
				t.Fatalf("%s with an after fault: %v, want injected", w.name, err)
			}
			if !w.check() {
				t.Fatalf("%s with an after fault was not written", w.name)
			}
		}
		if n := e.faults.Pending(); n != 0 {
			t.Fatalf("%d faults unused", n)
		}
	})
}

// TestClaimRace: 16 goroutines on each of two Stores (two processes, to the file)
// claim the same few items through the protocol. No claimer ever sees an error
// other than a lost race (in particular never SQLITE_BUSY), the budget holds, and
// every item is claimed exactly once.
func TestClaimRace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.faults = nil
	stores := []*sqlite.Store{e.s, e.open()}
	const n, workers, budget = 40, 16, 2
	p0 := &work.Protocol{Backend: stores[0], Clock: e.clock, IDs: e.ids}
	ids := make([]string, n)
	for i := range ids {
		it, err := p0.Create(e.ctx, work.Item{Kind: kindT, LockKey: "apply/acme"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = it.ID
	}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
		errs    = make(chan error, 2*workers)
	)
	for _, s := range stores {
		p := &work.Protocol{Backend: s, Clock: e.clock, IDs: e.ids}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for round := 0; ; round++ {
					mu.Lock()
					left := len(ids) - len(claimed)
					mu.Unlock()
					if left == 0 {
						return
					}
					id := ids[(w+round)%len(ids)]
					c, _, err := p.Claim(e.ctx, kindT, id, 0, budget)
					switch molt.ErrorReason(err) {
					case "":
						if err != nil {
							errs <- fmt.Errorf("claim %s: %w", id, err)
							return
						}
					case work.ReasonBudgetFull, work.ReasonNotClaimable, work.ReasonLocked:
						continue
					default:
						errs <- fmt.Errorf("claim %s: %w", id, err)
						return
					}
					mu.Lock()
					claimed[id]++
					mu.Unlock()
					if _, err := p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
						errs <- fmt.Errorf("finish %s: %w", id, err)
						return
					}
				}
			}(w)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		if claimed[id] != 1 {
			t.Errorf("item %s claimed %d times", id, claimed[id])
		}
		if it := e.get(id); it.Status != "done" || it.Attempts != 1 {
			t.Errorf("item %s = %s at attempt %d", id, it.Status, it.Attempts)
		}
	}
	if n, _ := e.s.ActiveCount(e.ctx, kindT); n != 0 {
		t.Errorf("active count = %d after every item finished", n)
	}
	if h, _ := e.s.LockHolder(e.ctx, "apply/acme"); h != "" {
		t.Errorf("lock still held by %q", h)
	}
}

// TestTwoStoresShareFile: writes of one Store are seen by the other at once, and
// both can write while the other writes.
func TestTwoStoresShareFile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.faults = nil
	a, b := e.s, e.open()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, s := range []*sqlite.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 40; j++ {
				id := fmt.Sprintf("s%d-%02d", i, j)
				if err := s.Commit(e.ctx, work.CreateItem{Item: e.item(id)}, work.AdjustSlots{Kind: kindT, Delta: 1}); err != nil {
					errs <- err
					return
				}
				if _, err := s.PutFile(e.ctx, workspace.File{Workspace: workspace.Global, Path: "prompts/all/" + id + ".md", Content: []byte(id)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range []*sqlite.Store{a, b} {
		if n, _ := s.ActiveCount(e.ctx, kindT); n != 80 {
			t.Fatalf("counter = %d, want 80 (lost update between stores?)", n)
		}
		if fs, err := s.ListFiles(e.ctx, workspace.Global); err != nil || len(fs) != 80 {
			t.Fatalf("files = %d %v, want 80", len(fs), err)
		}
	}
	// A token created by one (`molt token create`) authenticates at the other (`molt serve`).
	secret, tok, _ := auth.New(auth.Full, "", "admin", epoch)
	if err := b.PutToken(e.ctx, tok); err != nil {
		t.Fatal(err)
	}
	if got, err := a.TokenByHash(e.ctx, auth.Hash(secret)); err != nil || got.ID != tok.ID {
		t.Fatalf("token across stores = %+v %v", got, err)
	}
}

// TestWriteWaitsForOtherProcess: a write lock held by another connection to the
// file delays a write; it does not fail it.
func TestWriteWaitsForOtherProcess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	db, err := sql.Open("sqlite", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(e.ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.s.Commit(e.ctx, work.CreateItem{Item: e.item("a")}) }()
	select {
	case err := <-done:
		t.Fatalf("commit finished while another process held the write lock: %v", err)
	case <-time.After(sqlite.BusyTimeout + 300*time.Millisecond):
		// Held past SQLite's own busy timeout: the adapter's retries take over.
	}
	// Reads are not blocked by the other writer.
	if _, err := e.s.GetItem(e.ctx, kindT, "a"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("read during the other's write: %v", err)
	}
	if _, err := conn.ExecContext(e.ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("commit after the lock was released: %v", err)
	}
	e.get("a")

	// A caller that gives up while the lock is held gets EUNAVAILABLE, and nothing
	// is written.
	if _, err := conn.ExecContext(e.ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	err = e.s.Commit(ctx, work.CreateItem{Item: e.item("b")})
	wantCode(t, err, molt.EUNAVAILABLE)
	if _, err := conn.ExecContext(e.ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetItem(e.ctx, kindT, "b"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("abandoned commit was written: %v", err)
	}
}

func TestListItems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var all []string
	for i := 0; i < 12; i++ {
		it := e.item(e.ids.NewID())
		if i%3 == 0 {
			it.Status = "done"
		}
		e.mustCommit(work.CreateItem{Item: it})
		all = append(all, it.ID)
	}
	other := e.item(e.ids.NewID())
	other.Kind = "other"
	e.mustCommit(work.CreateItem{Item: other})

	list := func(q work.ListQuery) []string {
		t.Helper()
		var ids []string
		for {
			pg, err := e.s.ListItems(e.ctx, q)
			if err != nil {
				t.Fatalf("list %+v: %v", q, err)
			}
			if len(pg.Items) > max(q.Page.Limit, 1) {
				t.Fatalf("page of %d items, limit %d", len(pg.Items), q.Page.Limit)
			}
			for _, it := range pg.Items {
				ids = append(ids, it.ID)
			}
			if pg.Next == "" {
				return ids
			}
			q.Page.Cursor = pg.Next
		}
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	if got := list(work.ListQuery{Kind: kindT, Page: page.Query{Limit: 5}}); !slices.Equal(got, newest) {
		t.Fatalf("newest first = %v, want %v", got, newest)
	}
	if got := list(work.ListQuery{Kind: kindT, Oldest: true, Page: page.Query{Limit: 4}}); !slices.Equal(got, all) {
		t.Fatalf("oldest first = %v, want %v", got, all)
	}
	var done []string
	for i := len(all) - 1; i >= 0; i -= 1 {
		if i%3 == 0 {
			done = append(done, all[i])
		}
	}
	if got := list(work.ListQuery{Kind: kindT, Status: "done", Page: page.Query{Limit: 1}}); !slices.Equal(got, done) {
		t.Fatalf("done = %v, want %v", got, done)
	}
	// An exact multiple of the limit ends without an empty extra page.
	pg, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Page: page.Query{Limit: 12}})
	if err != nil || len(pg.Items) != 12 || pg.Next != "" {
		t.Fatalf("full page = %d items, next %q, %v", len(pg.Items), pg.Next, err)
	}
	if pg, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: "none"}); err != nil || len(pg.Items) != 0 || pg.Next != "" {
		t.Fatalf("empty kind = %+v %v", pg, err)
	}
	_, err = e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Page: page.Query{Cursor: "!!"}})
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Page: page.Query{Limit: page.MaxLimit + 1}})
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.ListItems(e.ctx, work.ListQuery{Kind: ""})
	wantCode(t, err, molt.EINVALID)
}

// TestListItemsUnderInserts pages through items while another goroutine inserts:
// every item that existed at the start is listed exactly once, in order.
func TestListItemsUnderInserts(t *testing.T) {
	t.Parallel()
	for _, oldest := range []bool{false, true} {
		t.Run(fmt.Sprintf("oldest=%t", oldest), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.faults = nil
			before := map[string]bool{}
			for i := 0; i < 30; i++ {
				id := e.ids.NewID()
				e.mustCommit(work.CreateItem{Item: e.item(id)})
				before[id] = true
			}
			stop := make(chan struct{})
			inserted := make(chan error, 1)
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						inserted <- nil
						return
					default:
					}
					if err := e.s.Commit(e.ctx, work.CreateItem{Item: e.item(e.ids.NewID())}); err != nil {
						inserted <- err
						return
					}
				}
			}()
			var got []string
			q := work.ListQuery{Kind: kindT, Oldest: oldest, Page: page.Query{Limit: 4}}
			for pages := 0; ; pages++ {
				pg, err := e.s.ListItems(e.ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range pg.Items {
					got = append(got, it.ID)
				}
				// Newest first, the listing ends after the oldest item; oldest
				// first it would chase the inserter, so stop once past the start.
				if pg.Next == "" || (oldest && pages > 10) {
					break
				}
				q.Page.Cursor = pg.Next
			}
			close(stop)
			if err := <-inserted; err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for i, id := range got {
				if seen[id] {
					t.Fatalf("item %s listed twice", id)
				}
				seen[id] = true
				if i > 0 && (got[i-1] < id) == !oldest {
					t.Fatalf("listing out of order at %d: %s then %s", i, got[i-1], id)
				}
			}
			for id := range before {
				if !seen[id] {
					t.Fatalf("item %s, present from the start, was skipped", id)
				}
			}
		})
	}
}

func TestWorkspaces(t *testing.T) {
	t.Parallel()
	e := setup(t)
	created := epoch.Add(-24 * time.Hour)
	w, isNew, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme", Description: "d1", CreatedAt: created})
	if err != nil || !isNew || !w.CreatedAt.Equal(created) || !w.UpdatedAt.Equal(epoch) {
		t.Fatalf("create = %+v %t %v", w, isNew, err)
	}
	e.clock.Advance(time.Minute)
	// An update keeps CreatedAt whatever the caller sends.
	w, isNew, err = e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme", Description: "d2", CreatedAt: epoch.Add(time.Hour)})
	if err != nil || isNew || !w.CreatedAt.Equal(created) || !w.UpdatedAt.Equal(epoch.Add(time.Minute)) || w.Description != "d2" {
		t.Fatalf("update = %+v %t %v", w, isNew, err)
	}
	got, err := e.s.GetWorkspace(e.ctx, "acme")
	if err != nil || got != w {
		t.Fatalf("get = %+v %v, want %+v", got, err, w)
	}

	_, _, err = e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: workspace.Global})
	var me *molt.Error
	if !errors.As(err, &me) || me.Code != molt.EINVALID || me.Field != "workspace" || me.Reason != "reserved" {
		t.Fatalf("put global: %v, want invalid workspace/reserved", err)
	}
	_, _, err = e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "big", Description: strings.Repeat("x", workspace.MaxDescLength+1)})
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.GetWorkspace(e.ctx, "Bad Name")
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.GetWorkspace(e.ctx, workspace.Global)
	wantCode(t, err, molt.ENOTFOUND)
	wantCode(t, e.s.DeleteWorkspace(e.ctx, workspace.Global), molt.EINVALID)
	wantCode(t, e.s.DeleteWorkspace(e.ctx, "ghost"), molt.ENOTFOUND)

	// Newest first by creation, whatever the names; updates do not reorder.
	for _, n := range []string{"zeta", "alpha", "mid"} {
		if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme", Description: "d3"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	q := page.Query{Limit: 3}
	for {
		pg, err := e.s.ListWorkspaces(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range pg.Items {
			names = append(names, w.Name)
		}
		if pg.Next == "" {
			break
		}
		q.Cursor = pg.Next
	}
	if strings.Join(names, ",") != "mid,alpha,zeta,acme" {
		t.Fatalf("workspaces = %v", names)
	}

	// Delete removes the files with the workspace; a new workspace of that name starts empty.
	if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: []byte("u")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: workspace.Global, Path: "USER.md", Content: []byte("g")}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteWorkspace(e.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if fs, err := e.s.ListFiles(e.ctx, "acme"); err != nil || len(fs) != 0 {
		t.Fatalf("files of the recreated workspace = %d %v", len(fs), err)
	}
	if _, err := e.s.GetFile(e.ctx, workspace.Global, "USER.md"); err != nil {
		t.Fatalf("global file after deleting a workspace: %v", err)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	f, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "skills/x/SKILL.md", Content: []byte("skill"), SHA256: "forged", Size: 99})
	want := workspace.NewFile("acme", "skills/x/SKILL.md", []byte("skill"), epoch)
	if err != nil || f.SHA256 != want.SHA256 || f.Size != 5 || !f.UpdatedAt.Equal(epoch) {
		t.Fatalf("put = %+v %v, want hash and size computed", f, err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "INDEX.md"}); err != nil {
		t.Fatalf("empty file: %v", err)
	}
	fs, err := e.s.ListFiles(e.ctx, "acme")
	if err != nil || len(fs) != 2 || fs[0].Path != "INDEX.md" || fs[1].Path != "skills/x/SKILL.md" ||
		len(fs[0].Content) != 0 || fs[0].Content == nil || string(fs[1].Content) != "skill" || fs[1].SHA256 != want.SHA256 ||
		!fs[0].UpdatedAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("list = %+v %v", fs, err)
	}
	if fs, err := e.s.ListFiles(e.ctx, "ghost"); err != nil || len(fs) != 0 {
		t.Fatalf("files of a missing workspace = %+v %v, want none", fs, err)
	}
	_, err = e.s.ListFiles(e.ctx, "../x")
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.GetFile(e.ctx, "acme", "USER.md")
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.PutFile(e.ctx, workspace.File{Workspace: "Bad", Path: "USER.md"})
	wantCode(t, err, molt.EINVALID)
	// Exactly the size limit is fine.
	if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: make([]byte, workspace.MaxFileSize)}); err != nil {
		t.Fatalf("file at the size limit: %v", err)
	}
}

func TestFilesLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.faults = nil
	if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < workspace.MaxFiles; i++ {
		if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: fmt.Sprintf("prompts/all/p%03d.md", i), Content: []byte("x")}); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	_, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: []byte("x")})
	wantCode(t, err, molt.ECONFLICT)
	if r := molt.ErrorReason(err); r != sqlite.ReasonTooManyFiles {
		t.Fatalf("reason = %q, want %q", r, sqlite.ReasonTooManyFiles)
	}
	// Overwriting an existing file is still allowed; other surfaces are not affected.
	if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "prompts/all/p000.md", Content: []byte("y")}); err != nil {
		t.Fatalf("overwrite at the limit: %v", err)
	}
	if _, err := e.s.PutFile(e.ctx, workspace.File{Workspace: workspace.Global, Path: "USER.md", Content: []byte("x")}); err != nil {
		t.Fatalf("global put: %v", err)
	}
	if fs, _ := e.s.ListFiles(e.ctx, "acme"); len(fs) != workspace.MaxFiles {
		t.Fatalf("files = %d, want %d", len(fs), workspace.MaxFiles)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	e := setup(t)
	secret, tok, err := auth.New(auth.Readonly, "acme", "viewer", epoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.PutToken(e.ctx, tok); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.TokenByHash(e.ctx, auth.Hash(secret))
	if err != nil || got != tok {
		t.Fatalf("token = %+v %v, want %+v", got, err, tok)
	}
	dup := tok
	dup.Name = "other"
	wantCode(t, e.s.PutToken(e.ctx, dup), molt.ECONFLICT)
	if got, _ := e.s.TokenByHash(e.ctx, tok.Hash); got.Name != "viewer" {
		t.Fatalf("duplicate overwrote the token: %+v", got)
	}
	_, err = e.s.TokenByHash(e.ctx, "")
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.TokenByHash(e.ctx, auth.Hash("molt_nope"))
	wantCode(t, err, molt.ENOTFOUND)
	wantCode(t, e.s.PutToken(e.ctx, auth.Token{Level: auth.Full}), molt.EINVALID)
}

func TestSettings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s, err := e.s.GetSettings(e.ctx)
	if err != nil || s != settings.Default() {
		t.Fatalf("initial = %+v %v", s, err)
	}
	s.General.Language = "fr-FR"
	s.Evolution.AutoApplyThreshold = 90
	s.Evolution.Triggers.PreCompact = false
	if err := e.s.PutSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	s2 := s
	s2.Evolution.HeartbeatSeconds = 1
	err = e.s.PutSettings(e.ctx, s2)
	var me *molt.Error
	if !errors.As(err, &me) || me.Code != molt.EINVALID || me.Field != "evolution.heartbeat_seconds" {
		t.Fatalf("invalid put: %v", err)
	}
	// Saved settings are seen by another Store on the file.
	if got, err := e.open().GetSettings(e.ctx); err != nil || got != s {
		t.Fatalf("settings = %+v %v, want %+v", got, err, s)
	}
}

// TestMigrationBackfillsArchivedAt: a file of schema 4 whose items were
// archived by retention (archived_at in their data only) gets, on opening,
// their archive time to the second, so retention's listing by archive time
// finds them; items not archived, or with data that is not JSON, keep none.
func TestMigrationBackfillsArchivedAt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "molt.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sqlite.Migrations[:4] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	archived := time.Date(2026, 10, 1, 8, 30, 15, 987654321, time.UTC)
	for _, r := range []struct{ id, data string }{
		{"arch", `{"workspace":"acme","archived_at":"` + archived.Format(time.RFC3339Nano) + `"}`},
		{"plain", `{"workspace":"acme"}`},
		{"nulled", `{"archived_at":null}`},
		{"junk", `not json "archived_at"`},
	} {
		if _, err := db.Exec(`INSERT INTO items (kind, id, status, data, created_at, updated_at)
			VALUES ('job', ?, 'done', ?, '2026-09-01T00:00:00.000000000Z', '2026-09-01T00:00:00.000000000Z')`,
			r.id, []byte(r.data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 4`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open a schema 4 file: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	want := map[string]time.Time{"arch": archived.Truncate(time.Second), "plain": {}, "nulled": {}, "junk": {}}
	for id, at := range want {
		it, err := s.GetItem(ctx, kindT, id)
		if err != nil {
			t.Fatal(err)
		}
		if !it.ArchivedAt.Equal(at) {
			t.Fatalf("%s archived at %v, want %v", id, it.ArchivedAt, at)
		}
	}
	pg, err := s.ListItems(ctx, work.ListQuery{Kind: kindT, Status: "done", ArchivedBy: archived})
	if err != nil || len(pg.Items) != 1 || pg.Items[0].ID != "arch" {
		t.Fatalf("archived by %v: %+v %v, want arch", archived, pg.Items, err)
	}
	pg, err = s.ListItems(ctx, work.ListQuery{Kind: kindT, Status: "done", UpdatedBy: archived})
	if err != nil || len(pg.Items) != 3 {
		t.Fatalf("not archived, updated by %v: %+v %v, want the other three", archived, pg.Items, err)
	}
}

// TestMigrationSlotOfClaimedItems: items claimed in a file of schema 9, when
// every claim took a slot, hold one after the migration (their release frees
// it); items not claimed hold none.
func TestMigrationSlotOfClaimedItems(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "molt.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sqlite.Migrations[:9] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		id     string
		active int
	}{{"claimed", 1}, {"pending", 0}} {
		if _, err := db.Exec(`INSERT INTO items (kind, id, status, active, token, created_at, updated_at)
			VALUES ('job', ?, 'running', ?, 'tok', '2026-09-01T00:00:00.000000000Z', '2026-09-01T00:00:00.000000000Z')`,
			r.id, r.active); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 9`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open a schema 9 file: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for id, want := range map[string]bool{"claimed": true, "pending": false} {
		it, err := s.GetItem(context.Background(), kindT, id)
		if err != nil {
			t.Fatal(err)
		}
		if it.Slot != want {
			t.Fatalf("%s slot = %v, want %v", id, it.Slot, want)
		}
	}
}

// TestMigrationShardedSlots: a file of schema 10 (one slot counter row per
// kind) keeps its counter as shard 0, and an item claimed then holds its slot
// in shard 0: its release under a budget that is now sharded frees that row.
func TestMigrationShardedSlots(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "molt.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sqlite.Migrations[:10] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO items (kind, id, status, active, slot, attempts, token, heartbeat_at, created_at, updated_at)
		VALUES ('job', 'claimed', 'running', 1, 1, 1, 'tok', '2026-09-01T00:00:00.000000000Z',
		'2026-09-01T00:00:00.000000000Z', '2026-09-01T00:00:00.000000000Z')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO slots (kind, active) VALUES ('job', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 10`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open a schema 10 file: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if n, err := s.ActiveCount(ctx, kindT); err != nil || n != 1 {
		t.Fatalf("active count %d %v after the migration, want 1", n, err)
	}
	it, err := s.GetItem(ctx, kindT, "claimed")
	if err != nil {
		t.Fatal(err)
	}
	if !it.Slot || it.SlotShard != 0 {
		t.Fatalf("claimed item slot %v shard %d, want a slot in shard 0", it.Slot, it.SlotShard)
	}
	clock := molt.NewManualClock(time.Date(2026, 9, 1, 1, 0, 0, 0, time.UTC))
	p := &work.Protocol{Backend: s, Clock: clock, IDs: &molt.SortableIDs{Clock: clock}}
	if _, err := p.Requeue(ctx, it, clock.Now().Add(-time.Minute), 5, work.StatusTimeout); err != nil {
		t.Fatalf("release the old claim: %v", err)
	}
	if n, err := s.ActiveCount(ctx, kindT); err != nil || n != 0 {
		t.Fatalf("active count %d %v after the release, want 0", n, err)
	}
	// Every shard of a sharded budget has its whole share.
	const budget = 16
	for i := range budget {
		created, err := p.Create(ctx, work.Item{Kind: kindT})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.ClaimSeen(ctx, created, budget); err != nil {
			t.Fatalf("claim %d of %d: %v", i+1, budget, err)
		}
	}
}
