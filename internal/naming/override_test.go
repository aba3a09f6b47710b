package naming_test

import (
	"context"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/naming"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/storetest/adapters"
	"github.com/molt-dev/molt/internal/workspace"
)

// override applies patch to workspace ws's settings overrides.
func (f *fixture) override(ws, patch string) {
	f.t.Helper()
	svc := &settings.WorkspaceService{Store: f.st}
	if _, err := svc.Update(f.ctx, fullCaller, ws, []byte(patch)); err != nil {
		f.t.Fatalf("override %s with %s: %v", ws, patch, err)
	}
}

// conversationIn is conversation in workspace ws.
func (f *fixture) conversationIn(ws, id string, n int) session.Session {
	f.t.Helper()
	ss, err := f.st.CreateSession(f.ctx, session.Session{ID: id, Workspace: ws, Agent: "main", Access: session.AccessFull})
	if err != nil {
		f.t.Fatal(err)
	}
	f.add(ss.ID, n)
	return f.get(ss.ID)
}

// TestWorkspaceOverrides: the worker and a request by hand use a workspace's
// naming overrides over the global settings (mode and timeout), another
// workspace keeps the global ones, and an override dropped (null) inherits the
// global value again.
func TestWorkspaceOverrides(t *testing.T) {
	adapters.Each(t, func(t *testing.T, open adapters.Opener) {
		f := setup(t, open, settings.NamingOnce)
		g := settings.Default()
		g.Naming.Mode, g.Naming.TimeoutSeconds = settings.NamingOnce, 60
		if err := f.st.PutSettings(f.ctx, g); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.st.PutWorkspace(f.ctx, workspace.Workspace{Name: "beta"}); err != nil {
			t.Fatal(err)
		}

		// Disabled in acme while the global mode is once: a pending job ends
		// disabled, no job is asked for, by hand is refused, no title.
		pend := f.conversation("pend", 1)
		f.svc.Replied(f.ctx, pend, 2)
		f.override("acme", `{"naming":{"mode":"disabled"}}`)
		f.run(naming.JobID(pend.ID, pend.CreatedAt, 2))
		wantJob(t, f.job(pend, 2), naming.StatusFailed, naming.ReasonDisabled)
		off := f.conversation("off", 1)
		f.svc.Replied(f.ctx, off, 2)
		if got := f.get(off.ID); got.NamingSeq != 0 {
			t.Fatalf("disabled in the workspace, a job was asked for: %+v", got)
		}
		if _, err := f.svc.NameByHand(f.ctx, fullCaller, off.ID); molt.ErrorReason(err) != naming.ReasonNamingDisabled {
			t.Fatalf("name by hand in a disabled workspace: %v, want %s", err, naming.ReasonNamingDisabled)
		}
		for _, id := range []string{pend.ID, off.ID} {
			if got := f.get(id); got.Title != "" {
				t.Fatalf("%s: named although its workspace disables naming: %+v", id, got)
			}
		}
		// beta has no overrides: the global once mode names its session.
		b := f.conversationIn("beta", "in-beta", 1)
		f.svc.Replied(f.ctx, b, 2)
		f.run(naming.JobID(b.ID, b.CreatedAt, 2))
		if got := f.get(b.ID); got.TitleSource != session.TitleAuto {
			t.Fatalf("beta (global once): not named: %+v", got)
		}

		// The workspace's timeout (1 s) bounds the job, not the global 60 s.
		f.override("acme", `{"naming":{"mode":null,"timeout_seconds":1}}`)
		f.model.before = func(ctx context.Context) error {
			<-ctx.Done()
			return model.ContextFailure(ctx, ctx, "hanging")
		}
		hang := f.conversation("hang", 1)
		f.svc.Replied(f.ctx, hang, 2)
		start := time.Now()
		f.run(naming.JobID(hang.ID, hang.CreatedAt, 2))
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("the job took %s, over its workspace's 1 s timeout", el)
		}
		wantJob(t, f.job(hang, 2), naming.StatusFailed, naming.ReasonTimeout)
		f.model.before = nil

		// Mode null: the global once applies again, the session is named.
		on := f.conversation("on", 1)
		f.svc.Replied(f.ctx, on, 2)
		f.run(naming.JobID(on.ID, on.CreatedAt, 2))
		if got := f.get(on.ID); got.TitleSource != session.TitleAuto || got.TitleRev != 1 {
			t.Fatalf("mode inherited (once): not named: %+v", got)
		}

		// Always in acme only: a later reply renames there, not in beta.
		f.override("acme", `{"naming":{"mode":"always"}}`)
		for _, ss := range []session.Session{on, b} {
			f.add(ss.ID, 1)
			f.model.text = "Rome again"
			f.svc.Replied(f.ctx, f.get(ss.ID), 4)
			if got := f.get(ss.ID); got.NamingSeq == 4 {
				f.run(naming.JobID(ss.ID, ss.CreatedAt, 4))
			}
		}
		if got := f.get(on.ID); got.Title != "Rome again" || got.TitleRev != 2 {
			t.Fatalf("acme always: not renamed: %+v", got)
		}
		if got := f.get(b.ID); got.Title == "Rome again" || got.NamingSeq != 2 {
			t.Fatalf("beta (global once): renamed: %+v", got)
		}
	})
}
