package storetest

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// testNamingOps: RequestNaming and SaveTitle hold by their conditions on both
// adapters — the session's identity (id and creation time), its title
// revision and source, once mode's unset title and always mode's newest
// request — and a refused op writes nothing, not even the item it commits with.
func testNamingOps(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	job := func(id string) work.Op {
		return work.CreateItem{Item: work.Item{Kind: work.KindNaming, ID: id, Workspace: "acme", Status: work.StatusPending,
			OpID: id, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}}
	}
	req := func(seq int) session.RequestNaming {
		return session.RequestNaming{SessionID: s.ID, Created: s.CreatedAt, Seq: seq}
	}

	// A request moves NamingSeq forward only, in the write that creates its job.
	if err := e.s.Commit(e.ctx, job("n-2"), req(2)); err != nil {
		t.Fatalf("request naming: %v", err)
	}
	if got := e.session(s.ID); got.NamingSeq != 2 {
		t.Fatalf("naming seq = %d, want 2", got.NamingSeq)
	}
	for _, seq := range []int{2, 1} {
		wantCondFailed(t, e.s.Commit(e.ctx, job("n-old"), req(seq)), 1)
	}
	if _, err := e.s.GetItem(e.ctx, work.KindNaming, "n-old"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("a refused request created its job: %v", err)
	}
	if err := e.s.Commit(e.ctx, job("n-4"), req(4)); err != nil {
		t.Fatalf("newer request: %v", err)
	}

	save := func(op session.SaveTitle) error {
		op.SessionID, op.Created = s.ID, s.CreatedAt
		if op.Title == "" {
			op.Title = "Auto"
		}
		return e.s.Commit(e.ctx, op)
	}
	// Always mode: the job of seq 2 was superseded by seq 4.
	wantCondFailed(t, save(session.SaveTitle{IfTitleRev: 0, IfNamingSeq: 2}), 0)
	// A wrong revision, a wrong identity.
	wantCondFailed(t, save(session.SaveTitle{IfTitleRev: 1, IfNamingSeq: 4}), 0)
	other := session.SaveTitle{SessionID: s.ID, Created: s.CreatedAt.Add(time.Millisecond), Title: "Auto", IfNamingSeq: 4}
	wantCondFailed(t, e.s.Commit(e.ctx, other), 0)
	if got := e.session(s.ID); got.Title != "" || got.TitleRev != 0 {
		t.Fatalf("refused saves changed the title: %+v", got)
	}
	// The newest job saves once; once mode then refuses (the title is set).
	e.clock.Advance(time.Minute)
	if err := save(session.SaveTitle{Title: "Trip planning", IfTitleRev: 0, IfNamingSeq: 4}); err != nil {
		t.Fatalf("save: %v", err)
	}
	got := e.session(s.ID)
	if got.Title != "Trip planning" || got.TitleSource != session.TitleAuto || got.TitleRev != 1 || !got.UpdatedAt.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("after save: %+v", got)
	}
	wantCondFailed(t, save(session.SaveTitle{IfTitleRev: 1, OnlyUnset: true}), 0)
	if err := save(session.SaveTitle{Title: "Trip to Rome", IfTitleRev: 1}); err != nil {
		t.Fatalf("always mode may replace an automatic title: %v", err)
	}
	// A manual title is never replaced, whatever the revision the job read.
	if _, err := e.s.SetTitle(e.ctx, s.ID, "Mine", session.TitleManual, 2); err != nil {
		t.Fatal(err)
	}
	wantCondFailed(t, save(session.SaveTitle{IfTitleRev: 3}), 0)
	if got := e.session(s.ID); got.Title != "Mine" || got.TitleSource != session.TitleManual || got.TitleRev != 3 {
		t.Fatalf("a save replaced the manual title: %+v", got)
	}

	// Deleted, and re-created under the same id: the old job's save and
	// request are refused and bring nothing back.
	re, err := e.s.CreateSession(e.ctx, session.Session{ID: "again", Workspace: "acme", Agent: "main", Access: session.AccessFull})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteSession(e.ctx, re.ID); err != nil {
		t.Fatal(err)
	}
	old := session.SaveTitle{SessionID: re.ID, Created: re.CreatedAt, Title: "Ghost"}
	wantCondFailed(t, e.s.Commit(e.ctx, old), 0)
	if _, err := e.s.GetSession(e.ctx, re.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("a save brought a deleted session back: %v", err)
	}
	e.clock.Advance(time.Second)
	re2, err := e.s.CreateSession(e.ctx, session.Session{ID: "again", Workspace: "acme", Agent: "main", Access: session.AccessFull})
	if err != nil {
		t.Fatal(err)
	}
	wantCondFailed(t, e.s.Commit(e.ctx, old), 0)
	wantCondFailed(t, e.s.Commit(e.ctx, session.RequestNaming{SessionID: re.ID, Created: re.CreatedAt, Seq: 1}), 0)
	if got := e.session(re2.ID); got.Title != "" || got.NamingSeq != 0 {
		t.Fatalf("the old session's job wrote the new one: %+v", got)
	}
	// The new incarnation's own ops pass.
	if err := e.s.Commit(e.ctx, session.SaveTitle{SessionID: re2.ID, Created: re2.CreatedAt, Title: "New", OnlyUnset: true}); err != nil {
		t.Fatalf("save on the new session: %v", err)
	}

	// Malformed ops are refused before anything is written, and neither may
	// share a commit with an append to the same session.
	for _, op := range []work.Op{
		session.SaveTitle{SessionID: s.ID, Created: s.CreatedAt},
		session.SaveTitle{SessionID: s.ID, Title: "x"},
		session.RequestNaming{SessionID: s.ID, Created: s.CreatedAt},
	} {
		wantCode(t, e.s.Commit(e.ctx, op), molt.EINVALID)
	}
	wantCode(t, e.s.Commit(e.ctx, msg(s.ID, 1, session.RoleUser, "hi"),
		session.RequestNaming{SessionID: s.ID, Created: s.CreatedAt, Seq: 9}), molt.EINVALID)
}
