package runs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// reviewed queues a run and works it to awaiting_review.
func (e *env) reviewed(sessionID, hint string) work.Item {
	e.t.Helper()
	run := e.evo(sessionID, hint)
	if errs := e.drain(); len(errs) > 0 {
		e.t.Fatalf("handler errors: %v", errs)
	}
	return e.wantStatus(run.ID, runs.StatusAwaitingReview)
}

// set moves an item as another component would (the apply worker, a rollback).
func (e *env) set(kind work.Kind, id string, from, to work.Status) {
	e.t.Helper()
	it := e.item(kind, id)
	if _, err := e.app.Protocol.Update(e.ctx, kind, id, work.Change{From: []work.Status{from}, Attempts: it.Attempts, To: to}); err != nil {
		e.t.Fatalf("set %s %s %s → %s: %v", kind, id, from, to, err)
	}
}

// TestRunTable walks every reviewer transition of the run's state machine
// (docs/architecture.md, "State machines") and every refusal, with its stable
// code.
func TestRunTable(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)

		// awaiting_review → approved (+ pending apply, approved_by reviewer).
		a := e.reviewed(ss.ID, "always answer in French")
		v, err := e.runs.Approve(e.ctx, a.ID, "  ship it  ")
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != string(runs.StatusApproved) || v.ApprovedBy != runs.ApprovedByReviewer || v.ReviewerHint != "ship it" {
			t.Fatalf("approved view %+v", v)
		}
		aps := e.applies()
		if len(aps) != 1 || aps[0].Status != runs.ApplyPending || v.LatestApply != aps[0].ID {
			t.Fatalf("applies %+v", aps)
		}
		var ad runs.ApplyData
		if err := json.Unmarshal(aps[0].Data, &ad); err != nil || ad.ApprovedBy != runs.ApprovedByReviewer || ad.ReviewerHint != "ship it" {
			t.Fatalf("apply data %+v (%v)", ad, err)
		}
		if w := e.receive(work.KindApply); len(w) != 1 || w[0].ID != aps[0].ID {
			t.Fatalf("apply wake-ups %+v", w)
		}
		// Approved: not reviewable, not retryable while its apply is pending, not deletable.
		_, err = e.runs.Approve(e.ctx, a.ID, "")
		wantReason(t, err, runs.CodeNotReviewable)
		_, err = e.runs.Reject(e.ctx, a.ID)
		wantReason(t, err, runs.CodeNotReviewable)
		_, err = e.runs.Retry(e.ctx, a.ID, "again")
		wantReason(t, err, runs.CodeNotRetryable)
		wantReason(t, e.runs.Delete(e.ctx, a.ID), runs.CodeActive)
		// approved whose apply failed → retry allowed; timed out too.
		e.set(work.KindApply, aps[0].ID, runs.ApplyPending, runs.ApplyFailed)
		_, err = e.runs.Retry(e.ctx, a.ID, "")
		wantReason(t, err, runs.CodeHintRequired)
		before := e.item(work.KindRun, a.ID)
		v, err = e.runs.Retry(e.ctx, a.ID, "always answer in Spanish")
		if err != nil {
			t.Fatal(err)
		}
		after := e.item(work.KindRun, a.ID)
		if after.Status != runs.StatusPending || after.AttemptsBase != before.Attempts || after.Attempts != before.Attempts ||
			v.Attempts != 0 || v.Hint != "always answer in Spanish" || v.Patch != nil || v.Verdict != nil {
			t.Fatalf("after retry: item %+v view %+v", after, v)
		}
		// pending: every operation refused.
		_, err = e.runs.Retry(e.ctx, a.ID, "x")
		wantReason(t, err, runs.CodeActive)
		_, err = e.runs.Approve(e.ctx, a.ID, "")
		wantReason(t, err, runs.CodeNotReviewable)
		wantReason(t, e.runs.Delete(e.ctx, a.ID), runs.CodeActive)
		// running: refused too.
		c, _, err := e.app.Protocol.Claim(e.ctx, work.KindRun, a.ID, after.Attempts, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.runs.Retry(e.ctx, a.ID, "x")
		wantReason(t, err, runs.CodeActive)
		_, err = e.runs.Reject(e.ctx, a.ID)
		wantReason(t, err, runs.CodeNotReviewable)
		wantReason(t, e.runs.Delete(e.ctx, a.ID), runs.CodeActive)
		if _, err := e.app.Protocol.Transition(e.ctx, c, work.Transition{To: runs.StatusPending}); err != nil {
			t.Fatal(err)
		}
		// The retried run runs again from the draft with the new hint, in a fresh
		// attempt (the hand claim above spent one of this round's).
		e.drain()
		r := e.wantStatus(a.ID, runs.StatusAwaitingReview)
		d := e.detail(a.ID)
		if d.Attempt != r.Attempts || d.Attempts != r.Attempts-r.AttemptsBase || !strings.Contains(d.PatchMD, "Spanish") ||
			strings.Contains(d.PatchMD, "French") {
			t.Fatalf("after the retried run: item %+v detail attempt %d attempts %d patch.md %q", r, d.Attempt, d.Attempts, d.PatchMD)
		}

		// awaiting_review → rejected → (retry) pending.
		b := e.reviewed(ss.ID, "be brief")
		if v, err := e.runs.Reject(e.ctx, b.ID); err != nil || v.Status != string(runs.StatusRejected) {
			t.Fatalf("reject: %+v %v", v, err)
		}
		_, err = e.runs.Approve(e.ctx, b.ID, "")
		wantReason(t, err, runs.CodeNotReviewable)
		if _, err := e.runs.Retry(e.ctx, b.ID, "be briefer"); err != nil {
			t.Fatalf("retry rejected: %v", err)
		}
		e.drain()
		e.wantStatus(b.ID, runs.StatusAwaitingReview)
		// approved whose apply timed out: retry allowed.
		if _, err := e.runs.Approve(e.ctx, b.ID, ""); err != nil {
			t.Fatal(err)
		}
		bd := e.detail(b.ID)
		e.set(work.KindApply, bd.LatestApply, runs.ApplyPending, runs.ApplyTimeout)
		if _, err := e.runs.Retry(e.ctx, b.ID, "be briefest"); err != nil {
			t.Fatalf("retry approved with a timed-out apply: %v", err)
		}
		e.drain()
		e.wantStatus(b.ID, runs.StatusAwaitingReview)

		// applied: retry refused (roll back first), delete allowed; rolled_back: retry allowed.
		c2 := e.reviewed(ss.ID, "use metric units")
		if _, err := e.runs.Approve(e.ctx, c2.ID, ""); err != nil {
			t.Fatal(err)
		}
		e.set(work.KindRun, c2.ID, runs.StatusApproved, runs.StatusApplied)
		_, err = e.runs.Retry(e.ctx, c2.ID, "again")
		wantReason(t, err, runs.CodeNotRetryable)
		e.set(work.KindRun, c2.ID, runs.StatusApplied, runs.StatusRolledBack)
		if _, err := e.runs.Retry(e.ctx, c2.ID, "again"); err != nil {
			t.Fatalf("retry rolled_back: %v", err)
		}
		e.drain()

		// skipped, failed and timeout are retryable.
		s := e.evo(ss.ID, "")
		e.drain()
		e.wantStatus(s.ID, runs.StatusSkipped)
		for _, from := range []work.Status{runs.StatusSkipped, runs.StatusFailed, runs.StatusTimeout} {
			cur := e.item(work.KindRun, s.ID)
			if cur.Status != from {
				e.set(work.KindRun, s.ID, cur.Status, from)
			}
			if _, err := e.runs.Retry(e.ctx, s.ID, "a hint"); err != nil {
				t.Fatalf("retry %s: %v", from, err)
			}
			e.set(work.KindRun, s.ID, runs.StatusPending, from)
		}

		// Unknown runs: not found.
		for _, id := range []string{"nope", "../x", ""} {
			_, err := e.runs.Get(e.ctx, id)
			wantCode(t, err, molt.ENOTFOUND)
			_, err = e.runs.Approve(e.ctx, id, "")
			wantCode(t, err, molt.ENOTFOUND)
		}
	})
}

// TestDelete: delete removes the run, its applies and every artifact (the
// applies' too); it is refused while one of its applies is in flight.
func TestDelete(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		run := e.reviewed(ss.ID, "always answer in French")
		if _, err := e.runs.Approve(e.ctx, run.ID, ""); err != nil {
			t.Fatal(err)
		}
		ap := e.applies()[0]
		// An auto apply's failure would send the run back to review: simulate the
		// apply still in flight first.
		e.set(work.KindRun, run.ID, runs.StatusApproved, runs.StatusAwaitingReview)
		wantReason(t, e.runs.Delete(e.ctx, run.ID), runs.CodeApplyInFlight)
		e.set(work.KindApply, ap.ID, runs.ApplyPending, runs.ApplyFailed)
		if err := e.blobs.Put(e.ctx, runs.ApplyPrefix(ap.ID)+"MANIFEST.json", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := e.runs.Delete(e.ctx, run.ID); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := e.store.GetItem(e.ctx, work.KindRun, run.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("run after delete: %v", err)
		}
		if _, err := e.store.GetItem(e.ctx, work.KindApply, ap.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("apply after delete: %v", err)
		}
		for _, p := range []string{runs.Prefix(run.ID), runs.ApplyPrefix(ap.ID)} {
			if ks, err := e.blobs.List(e.ctx, p); err != nil || len(ks) != 0 {
				t.Fatalf("artifacts under %s after delete: %v %v", p, ks, err)
			}
		}
		wantCode(t, e.runs.Delete(e.ctx, run.ID), molt.ENOTFOUND)
	})
}

// TestList: newest first, status filter, the auto and observation filters, the
// archived view, and a cursor that walks every run once.
func TestList(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		var ids []string
		for _, hint := range []string{"be brief", "observe the tone", ""} {
			ids = append(ids, e.evo(ss.ID, hint).ID)
			e.drain()
		}
		e.settings(func(ev *settings.Evolution) { ev.Level = settings.L2 })
		ids = append(ids, e.evo(ss.ID, "use metric units").ID)
		e.drain()

		list := func(q runs.ListQuery) []string {
			t.Helper()
			pg, err := e.runs.List(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, v := range pg.Items {
				out = append(out, v.ID)
			}
			return out
		}
		want := []string{ids[3], ids[2], ids[1], ids[0]}
		if got := list(runs.ListQuery{}); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("list %v, want %v", got, want)
		}
		if got := list(runs.ListQuery{Status: runs.StatusAwaitingReview}); strings.Join(got, ",") != ids[1]+","+ids[0] {
			t.Fatalf("awaiting_review %v", got)
		}
		if got := list(runs.ListQuery{Filter: runs.FilterAuto}); strings.Join(got, ",") != ids[3] {
			t.Fatalf("auto %v", got)
		}
		if got := list(runs.ListQuery{Filter: runs.FilterObservation}); strings.Join(got, ",") != ids[1] {
			t.Fatalf("observation %v", got)
		}
		if got := list(runs.ListQuery{Archived: true}); len(got) != 0 {
			t.Fatalf("archived %v", got)
		}
		var walked []string
		q := runs.ListQuery{Page: page.Query{Limit: 1}}
		for {
			pg, err := e.runs.List(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range pg.Items {
				walked = append(walked, v.ID)
			}
			if pg.Next == "" {
				break
			}
			q.Page.Cursor = pg.Next
		}
		if strings.Join(walked, ",") != strings.Join(want, ",") {
			t.Fatalf("walked %v, want %v", walked, want)
		}
		_, err := e.runs.List(e.ctx, runs.ListQuery{Status: "bogus"})
		wantCode(t, err, molt.EINVALID)
		_, err = e.runs.List(e.ctx, runs.ListQuery{Filter: "bogus"})
		wantCode(t, err, molt.EINVALID)
	})
}

// TestApproveWorkspaceGone: a run whose workspace was deleted cannot be
// approved (409 workspace_gone): its apply could only fail. Nothing is written.
func TestApproveWorkspaceGone(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		a := e.reviewed(ss.ID, "always answer in French")
		before := e.item(work.KindRun, a.ID)
		if err := e.store.DeleteWorkspace(e.ctx, before.Workspace); err != nil {
			t.Fatal(err)
		}
		_, err := e.runs.Approve(e.ctx, a.ID, "")
		wantReason(t, err, runs.CodeWorkspaceGone)
		if got := e.item(work.KindRun, a.ID); got.OpID != before.OpID || got.Status != runs.StatusAwaitingReview {
			t.Fatalf("the refused approval wrote the run: %+v", got)
		}
		if len(e.applies()) != 0 {
			t.Fatal("an apply was created for a deleted workspace")
		}
	})
}
