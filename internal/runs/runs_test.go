package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// TestEvoToReview: /evo at L0 stores the snapshot, creates the run pending with
// exactly one system line in the session, and the worker takes it to
// awaiting_review with a patch to INSTRUCTIONS.md, a score and a verdict
// (reason level); the artifacts are the attempt's own.
func TestEvoToReview(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		before := len(e.messages(ss.ID))
		run := e.evo(ss.ID, "always answer in French")

		msgs := e.messages(ss.ID)
		if len(msgs) != before+1 || msgs[len(msgs)-1].Role != session.RoleSystem ||
			msgs[len(msgs)-1].Text != fmt.Sprintf(runs.QueuedNotice, run.ID) {
			t.Fatalf("session messages after /evo: %+v; want exactly one system line", msgs)
		}
		for _, name := range []string{runs.ArtifactMessages, runs.ArtifactToolFlow, runs.ArtifactMeta, runs.ArtifactSurface} {
			if _, err := e.blobs.Store.Get(e.ctx, runs.SnapshotKey(run.ID, name)); err != nil {
				t.Fatalf("snapshot %s: %v", name, err)
			}
		}
		var sc runs.SurfaceContext
		b, _ := e.blobs.Store.Get(e.ctx, runs.SnapshotKey(run.ID, runs.ArtifactSurface))
		if err := json.Unmarshal(b, &sc); err != nil || sc.SystemPrompt == "" || len(sc.Agents) == 0 || sc.Agents[0].Scope != workspace.ScopeBuiltin {
			t.Fatalf("surface context %+v (%v); want the assembled prompt and the builtin main agent", sc, err)
		}

		if errs := e.drain(); len(errs) > 0 {
			t.Fatalf("handler errors: %v", errs)
		}
		it := e.wantStatus(run.ID, runs.StatusAwaitingReview)
		if it.Reason != evolution.ReasonLevel || it.Used() != 1 {
			t.Fatalf("reason %q, used %d; want level, 1", it.Reason, it.Used())
		}
		d := e.detail(run.ID)
		if d.Patch == nil || !slices.Equal(d.Patch.Files, []string{"INSTRUCTIONS.md"}) {
			t.Fatalf("patch %+v; want INSTRUCTIONS.md", d.Patch)
		}
		if d.Score == nil || d.Score.Avg != offlineevo.Score.Avg || !d.Score.Checks.PatchInSandbox {
			t.Fatalf("score %+v; want the offline score with patchInSandbox", d.Score)
		}
		if d.Verdict == nil || d.Verdict.Passed || d.Verdict.Reason != evolution.ReasonLevel ||
			d.Verdict.Category != evolution.CategoryPrompt {
			t.Fatalf("verdict %+v; want not passed at L0 (level), category prompt", d.Verdict)
		}
		if d.Attempts != 1 || d.Attempt != 1 || !strings.Contains(d.PatchMD, "always answer in French") ||
			d.SourceAccess != evolution.SourceFull || d.Trigger != runs.TriggerEvo || d.Snapshot.MessageCount != before {
			t.Fatalf("detail %+v", d)
		}
		for _, name := range []string{runs.ArtifactPatch, runs.ArtifactPatchMD, runs.ArtifactDryRun, runs.ArtifactScore, runs.ArtifactVerdict} {
			if _, err := e.blobs.Store.Get(e.ctx, runs.AttemptKey(run.ID, 1, name)); err != nil {
				t.Fatalf("attempt artifact %s: %v", name, err)
			}
		}
		// Nothing else about the run entered the conversation.
		if got := len(e.messages(ss.ID)); got != before+1 {
			t.Fatalf("session has %d messages after the run, want %d", got, before+1)
		}
		if len(e.applies()) != 0 {
			t.Fatal("an apply was created at L0")
		}
	})
}

// TestGates: L2 approves the same run automatically (approved_by auto, a pending
// apply in the same write, a wake-up on the applies queue); threshold 100 stops
// it at below_threshold; L3 approves too; a workspace session's run is refused
// by the source gate; an external session's with source_external.
func TestGates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		level     string
		threshold int
		external  bool
		access    string // the session's recorded access
		want      work.Status
		reason    string
	}{
		{"L0", settings.L0, 80, false, "full", runs.StatusAwaitingReview, evolution.ReasonLevel},
		{"L1", settings.L1, 80, false, "full", runs.StatusAwaitingReview, evolution.ReasonLevel},
		{"L2", settings.L2, 80, false, "full", runs.StatusApproved, ""},
		{"L3", settings.L3, 80, false, "full", runs.StatusApproved, ""},
		{"L2 threshold 100", settings.L2, 100, false, "full", runs.StatusAwaitingReview, evolution.ReasonBelowThreshold},
		{"L2 external", settings.L2, 80, true, "full", runs.StatusAwaitingReview, evolution.ReasonSourceExternal},
	}
	eachStore(t, func(t *testing.T, open opener) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := setup(t, open)
				e.settings(func(ev *settings.Evolution) { ev.Level, ev.AutoApplyThreshold = c.level, c.threshold })
				ss, err := e.app.Chat.CreateSession(e.ctx, fullCaller, chat.NewSession{Workspace: e.ws, External: c.external})
				if err != nil {
					t.Fatal(err)
				}
				run := e.evo(ss.ID, "always answer in French")
				if errs := e.drain(); len(errs) > 0 {
					t.Fatalf("handler errors: %v", errs)
				}
				it := e.wantStatus(run.ID, c.want)
				d := e.detail(run.ID)
				if d.Verdict == nil || d.Verdict.Reason != c.reason || it.Reason != c.reason {
					t.Fatalf("verdict %+v, reason %q; want %q", d.Verdict, it.Reason, c.reason)
				}
				aps := e.applies()
				wakes := e.receive(work.KindApply)
				if c.want != runs.StatusApproved {
					if len(aps) != 0 || len(wakes) != 0 {
						t.Fatalf("%d applies, %d wake-ups; want none", len(aps), len(wakes))
					}
					return
				}
				if d.ApprovedBy != runs.ApprovedByAuto || len(aps) != 1 || d.LatestApply != aps[0].ID {
					t.Fatalf("approved_by %q, applies %+v, latest %q", d.ApprovedBy, aps, d.LatestApply)
				}
				ap := aps[0]
				var ad runs.ApplyData
				if err := json.Unmarshal(ap.Data, &ad); err != nil || ap.Status != runs.ApplyPending ||
					ap.LockKey != runs.ApplyLockKey(e.ws) || ad.ApprovedBy != runs.ApprovedByAuto ||
					!slices.Equal(ad.Runs, []string{run.ID}) || ad.Workspace != e.ws {
					t.Fatalf("apply %+v data %+v (%v)", ap, ad, err)
				}
				if len(wakes) != 1 || wakes[0].ID != ap.ID {
					t.Fatalf("apply wake-ups %+v; want one for %s", wakes, ap.ID)
				}
				if len(d.Applies) != 1 || d.Applies[0].ApprovedBy != runs.ApprovedByAuto {
					t.Fatalf("detail applies %+v", d.Applies)
				}
			})
		}
	})
}

// TestSourceAccessGate: a session opened by a workspace token records
// workspace access; its pre-compact run (the only way such a session queues
// one) fails the source gate even at L2.
func TestSourceAccessGate(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	e.settings(func(ev *settings.Evolution) { ev.Level = settings.L2 })
	ss := e.session(wsCaller)
	// /evo in a workspace session is refused, even with a full token.
	_, err := e.app.Chat.Post(e.ctx, fullCaller, ss.ID, "/evo be brief")
	wantReason(t, err, runs.ReasonEvoForbidden)
	run, err := e.runs.Enqueue(e.ctx, ss, runs.TriggerPreCompact, "be brief")
	if err != nil {
		t.Fatal(err)
	}
	e.drain()
	it := e.wantStatus(run.ID, runs.StatusAwaitingReview)
	if it.Reason != evolution.ReasonSourceAccess {
		t.Fatalf("reason %q, want source_access", it.Reason)
	}
}

// TestSkip: /evo without a hint makes the offline draft skip: skipped with the
// reason, no dry-run or score.
func TestSkip(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		run := e.evo(ss.ID, "")
		e.drain()
		e.wantStatus(run.ID, runs.StatusSkipped)
		d := e.detail(run.ID)
		if d.SkipReason != offlineevo.SkipNoHint || d.Patch != nil || d.Score != nil || !strings.Contains(d.PatchMD, "Skipped") {
			t.Fatalf("detail %+v; want the skip reason only", d)
		}
		if e.model.count("dryrun") != 0 || e.model.count("score") != 0 {
			t.Fatal("a skipped draft was dry-run or scored")
		}
	})
}

// TestEvoRefusals: /evo needs a full caller in a root session opened with full
// access; a refused /evo writes nothing.
func TestEvoRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	full := e.session(fullCaller)
	ws := e.session(wsCaller)
	sub, err := e.app.Chat.CreateSession(e.ctx, fullCaller, chat.NewSession{Workspace: e.ws, Parent: full.ID})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		callerW bool
		sess    string
		reason  string
	}{
		{"workspace token", true, ws.ID, runs.ReasonEvoForbidden},
		{"workspace session", false, ws.ID, runs.ReasonEvoForbidden},
		{"sub-session", false, sub.ID, runs.ReasonEvoSubSession},
	}
	for _, c := range cases {
		caller := fullCaller
		if c.callerW {
			caller = wsCaller
		}
		n := len(e.messages(c.sess))
		_, err := e.app.Chat.Post(e.ctx, caller, c.sess, "/evo be brief")
		wantCode(t, err, molt.EFORBIDDEN)
		wantReason(t, err, c.reason)
		if len(e.messages(c.sess)) != n {
			t.Fatalf("%s: a refused /evo wrote to the session", c.name)
		}
	}
	if len(e.receive(work.KindRun)) != 0 {
		t.Fatal("a refused /evo sent a wake-up")
	}
}

// TestPreCompact: at L1 with triggers.pre_compact on, a /compact turn of a root
// session creates exactly one run in its final write, with one system line;
// the same turn can never create a second one; at L0, or with the trigger off,
// or in a sub-session, none.
func TestPreCompact(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(ev *settings.Evolution) { ev.Level = settings.L1 })
		ss := e.session(fullCaller)
		talk(t, e, ss.ID, 8)
		turn := compact(t, e, ss.ID)
		id := runs.PreCompactID(turn.ID)
		it := e.wantStatus(id, runs.StatusPending)
		var rd runs.Data
		_ = json.Unmarshal(it.Data, &rd)
		if rd.Trigger != runs.TriggerPreCompact || rd.SourceTurn != turn.ID || rd.SourceSession != ss.ID {
			t.Fatalf("pre-compact run data %+v", rd)
		}
		notices := 0
		for _, m := range e.messages(ss.ID) {
			if m.Role == session.RoleSystem && strings.HasPrefix(m.Text, "Queued for evaluation") {
				notices++
			}
		}
		if notices != 1 {
			t.Fatalf("%d queued notices, want 1", notices)
		}
		pg, err := e.runs.List(e.ctx, runs.ListQuery{})
		if err != nil || len(pg.Items) != 1 {
			t.Fatalf("runs %+v (%v); want exactly one", pg.Items, err)
		}
		if ws := e.receive(work.KindRun); len(ws) != 1 || ws[0].ID != id {
			t.Fatalf("run wake-ups %+v; want one for %s", ws, id)
		}
		// The hook's effect for the same turn can never land twice.
		eff, err := e.runs.PreCompact(e.ctx, chat.CompactedTurn{Turn: turn, Session: ss})
		if err != nil || len(eff.Ops) != 1 {
			t.Fatalf("hook again: %+v, %v", eff, err)
		}
		var cf *work.ConditionFailed
		if err := e.store.Commit(e.ctx, eff.Ops...); !errors.As(err, &cf) {
			t.Fatalf("second create of the pre-compact run: %v; want a failed condition", err)
		}

		// Trigger off, L0, sub-session: no run.
		e.settings(func(ev *settings.Evolution) { ev.Triggers.PreCompact = false })
		talk(t, e, ss.ID, 8)
		compact(t, e, ss.ID)
		e.settings(func(ev *settings.Evolution) { ev.Triggers.PreCompact, ev.Level = true, settings.L0 })
		talk(t, e, ss.ID, 8)
		compact(t, e, ss.ID)
		e.settings(func(ev *settings.Evolution) { ev.Level = settings.L3 })
		sub, err := e.app.Chat.CreateSession(e.ctx, fullCaller, chat.NewSession{Workspace: e.ws, Parent: ss.ID})
		if err != nil {
			t.Fatal(err)
		}
		talk(t, e, sub.ID, 8)
		compact(t, e, sub.ID)
		if pg, _ := e.runs.List(e.ctx, runs.ListQuery{}); len(pg.Items) != 1 {
			t.Fatalf("%d runs; want still one", len(pg.Items))
		}
	})
}

// compact posts /compact to a session, runs the turn and checks it compacted.
func compact(t *testing.T, e *env, sessionID string) work.Item {
	t.Helper()
	turn, err := e.app.Chat.Post(e.ctx, fullCaller, sessionID, "/compact")
	if err != nil {
		t.Fatal(err)
	}
	e.drainTurns()
	var d chat.TurnData
	if err := json.Unmarshal(e.item(work.KindTurn, turn.ID).Data, &d); err != nil || !d.Compacted {
		t.Fatalf("the /compact turn did not compact: %+v", d)
	}
	return turn
}

// talk posts n messages to a session, answering each before the next.
func talk(t *testing.T, e *env, sessionID string, n int) {
	t.Helper()
	for i := range n {
		if _, err := e.app.Chat.Post(e.ctx, fullCaller, sessionID, fmt.Sprintf("message %d: %s", i, strings.Repeat("words ", 20))); err != nil {
			t.Fatal(err)
		}
		e.drainTurns()
	}
}

// drainTurns answers every queued turn.
func (e *env) drainTurns() {
	e.t.Helper()
	for {
		ms := e.receive(work.KindTurn)
		if len(ms) == 0 {
			return
		}
		for _, m := range ms {
			if err := e.app.Chat.Handle(e.ctx, m); err != nil {
				e.t.Fatalf("turn: %v", err)
			}
		}
	}
}

// TestModelFailures: a malformed draft fails the run (patch_invalid); a model
// refusal fails it (model:bad_request); an unavailable model gives the attempt
// back while attempts are left, then fails it.
func TestModelFailures(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(ev *settings.Evolution) { ev.MaxAttempts = 2 })
		ss := e.session(fullCaller)

		bad := model.Fail(model.ReasonBadRequest, "refused", nil)
		e.model.setBefore(func(_ context.Context, ph string, _ model.Request) error {
			if ph == "score" {
				return bad
			}
			return nil
		})
		r1 := e.evo(ss.ID, "be brief")
		e.drain()
		if it := e.wantStatus(r1.ID, runs.StatusFailed); it.Reason != "model:bad_request" {
			t.Fatalf("reason %q", it.Reason)
		}
		if d := e.detail(r1.ID); d.Patch == nil {
			t.Fatal("a failed run lost the patch it had drafted")
		}

		e.model.setBefore(nil)
		e.model.inner = garbleDraft{e.model.inner}
		r2 := e.evo(ss.ID, "be brief")
		e.drain()
		if it := e.wantStatus(r2.ID, runs.StatusFailed); !strings.HasPrefix(it.Reason, runs.ReasonPatchInvalid) {
			t.Fatalf("reason %q, want patch_invalid", it.Reason)
		}
		e.model.inner = offlineevo.New()

		down := model.Fail(model.ReasonServerError, "down", nil)
		e.model.setBefore(func(_ context.Context, ph string, _ model.Request) error {
			if ph == "draft" {
				return down
			}
			return nil
		})
		r3 := e.evo(ss.ID, "be brief")
		e.drain()
		if it := e.wantStatus(r3.ID, runs.StatusPending); it.Reason != "model:server_error" || it.Used() != 1 {
			t.Fatalf("after an unavailable model: %+v", it)
		}
		// The tick re-sends its wake-up a minute later; the last attempt fails.
		e.clock.Advance(2 * time.Minute)
		if res := e.tick(); res.Resent < 1 {
			t.Fatalf("tick %+v; want the wake-up re-sent", res)
		}
		e.drain()
		if it := e.wantStatus(r3.ID, runs.StatusFailed); it.Reason != "model:server_error" || it.Used() != 2 {
			t.Fatalf("after the last attempt: %+v", it)
		}
	})
}

// garbleDraft answers the draft with something that is not a patch.
type garbleDraft struct{ model.Model }

func (g garbleDraft) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if phase(req) == "draft" {
		return model.Response{Text: "I would rather not answer in JSON."}, nil
	}
	return g.Model.Generate(ctx, req)
}
