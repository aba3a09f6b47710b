package applies_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

func (e *env) session(ws string) session.Session {
	e.t.Helper()
	s, err := e.store.CreateSession(e.ctx, session.Session{Workspace: ws, Agent: "main", Access: session.AccessFull})
	if err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	return s
}

func systemLines(ms []session.Message) []string {
	var out []string
	for _, m := range ms {
		if m.Role == session.RoleSystem {
			out = append(out, m.Text)
		}
	}
	return out
}

// TestNotices: an applied auto apply sends exactly one system line to its
// source session, even with two ticks at once, and stamps notified_at in the
// same write; later ticks send nothing. A session that is gone gets no line
// but the apply is stamped; an apply rolled back before its notice says nothing.
func TestNotices(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(s *settingsT) { s.Evolution.Level = "L2" })
		sess := e.session("acme")
		gone := e.session("acme")
		_, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "rules"}, auto: true, session: sess.ID})
		_, goneID := e.approve(runSpec{files: map[string]string{"INDEX.md": "index"}, auto: true, session: gone.ID})
		_, rolledID := e.approve(runSpec{files: map[string]string{"prompts/all/x.md": "x"}, auto: true, session: sess.ID})
		_, reviewerID := e.approve(runSpec{files: map[string]string{"prompts/all/y.md": "y"}, session: sess.ID})
		e.drainOK()
		for _, a := range []string{id, goneID, rolledID, reviewerID} {
			e.wantStatus(work.KindApply, a, applies.StatusApplied)
		}
		if err := e.store.DeleteSession(e.ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Rollback(e.ctx, rolledID, false); err != nil {
			t.Fatal(err)
		}

		// Two ticks at once.
		var wg sync.WaitGroup
		results := make([]applies.NoticeResult, 2)
		start := make(chan struct{})
		for i := range results {
			wg.Go(func() {
				<-start
				r, err := e.svc.Notify(e.ctx)
				if err != nil {
					t.Errorf("notify: %v", err)
				}
				results[i] = r
			})
		}
		close(start)
		wg.Wait()
		sent := results[0].Sent + results[1].Sent
		stamped := results[0].Stamped + results[1].Stamped
		if sent != 1 || stamped != 1 {
			t.Fatalf("notify results %+v: want one line sent and one stamp without a line in all", results)
		}
		lines := systemLines(e.messages(sess.ID))
		if len(lines) != 1 {
			t.Fatalf("session has %d system lines, want 1: %q", len(lines), lines)
		}
		if l := lines[0]; !strings.Contains(l, "INSTRUCTIONS.md") || !strings.Contains(l, "score 88") ||
			!strings.Contains(l, "users keep asking for French") || !strings.Contains(l, id) {
			t.Fatalf("notice %q", l)
		}
		if d := e.data(id); d.NotifiedAt == nil {
			t.Fatal("notified_at not stamped")
		}
		if d := e.data(goneID); d.NotifiedAt == nil {
			t.Fatal("notified_at not stamped for a session that is gone")
		}
		for _, a := range []string{rolledID, reviewerID} {
			if d := e.data(a); d.NotifiedAt != nil {
				t.Fatalf("apply %s stamped: no notice was due", a)
			}
		}
		// Later ticks (a restart, a late tick) send nothing more.
		for range 2 {
			if res := e.tick(); res.Notified != 0 {
				t.Fatalf("tick notified %d more", res.Notified)
			}
		}
		if lines := systemLines(e.messages(sess.ID)); len(lines) != 1 {
			t.Fatalf("%d system lines after more ticks", len(lines))
		}
	})
}

func TestNoticeText(t *testing.T) {
	t.Parallel()
	d := applies.Data{Level: "L2", Published: []string{"a.md", "b.md", "c.md", "d.md", "e.md"},
		Score:       &evolution.Score{Avg: 91, Behavior: 90, Lint: 100, Confidence: "high"},
		Observation: strings.Repeat("long observation ", 40)}
	got := applies.NoticeText("ap1", d)
	for _, want := range []string{"(L2)", "changed a.md, b.md, c.md and 2 more files", "score 91", "observation: long observation", "…", "ap1"} {
		if !strings.Contains(got, want) {
			t.Fatalf("notice %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "d.md") || len(got) > 600 {
		t.Fatalf("notice not summarised: %q", got)
	}
	if got := applies.NoticeText("ap2", applies.Data{Published: []string{"INSTRUCTIONS.md"}}); !strings.Contains(got, "changed INSTRUCTIONS.md;") && !strings.Contains(got, "changed INSTRUCTIONS.md.") {
		t.Fatalf("notice %q", got)
	}
}

// TestNoticeStoreError: a store error reading the apply's source run is not a
// session that is gone: the notice is left for the next tick, which sends the
// line, instead of stamping notified_at without one (a missed notice).
func TestNoticeStoreError(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(s *settingsT) { s.Evolution.Level = "L2" })
		sess := e.session("acme")
		run, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "rules"}, auto: true, session: sess.ID})
		e.drainOK()
		e.wantStatus(work.KindApply, id, applies.StatusApplied)

		e.store.setFailGet(func(kind work.Kind, rid string) error {
			if kind == work.KindRun && rid == run {
				return molt.Unavailable(errors.New("connection reset"), "get run %s", rid)
			}
			return nil
		})
		res, _ := e.svc.Notify(e.ctx)
		e.store.setFailGet(nil)
		if res.Stamped != 0 || res.Sent != 0 {
			t.Fatalf("notify with the run unreadable = %+v: nothing may be stamped or sent", res)
		}
		if d := e.data(id); d.NotifiedAt != nil {
			t.Fatal("notified_at stamped without a line while the session exists")
		}
		if res, err := e.svc.Notify(e.ctx); err != nil || res.Sent != 1 {
			t.Fatalf("next notify = %+v %v, want the line sent", res, err)
		}
		if lines := systemLines(e.messages(sess.ID)); len(lines) != 1 {
			t.Fatalf("session has %d system lines, want 1: %q", len(lines), lines)
		}
	})
}
