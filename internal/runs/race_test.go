package runs_test

import (
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// TestRetryRacesRetention: retention archives a finished run (its snapshot
// zipped away, archived_at and a TTL set) between a retry's read and its
// write. The retry must not land on the archived run: it would bring back a
// pending run without its snapshot (the worker could only fail it), with
// archived_at lost and the TTL still set (DynamoDB would delete an active
// run). It is refused as an archived run is, and the run stays archived.
func TestRetryRacesRetention(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		run := e.reviewed(ss.ID, "always answer in French")
		if _, err := e.runs.Reject(e.ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(15 * 24 * time.Hour)

		var once sync.Once
		var archived applies.RetentionResult
		var rerr error
		e.store.setBefore(func(ops []work.Op) {
			u, ok := ops[0].(work.UpdateItem)
			if !ok || u.Kind != work.KindRun || u.ID != run.ID || u.Set.Status != runs.StatusPending {
				return
			}
			once.Do(func() { archived, rerr = e.app.Applies.RetainNow(e.ctx) })
		})
		_, err := e.runs.Retry(e.ctx, run.ID, "answer in Spanish")
		e.store.setBefore(nil)
		if rerr != nil || archived.Archived != 1 {
			t.Fatalf("retention between the retry's read and write: %+v %v", archived, rerr)
		}
		if molt.ErrorCode(err) != molt.ECONFLICT {
			t.Fatalf("retry = %v, want a conflict: the run was archived meanwhile", err)
		}
		wantReason(t, err, runs.CodeNotRetryable)
		it := e.wantStatus(run.ID, runs.StatusRejected)
		if applies.ArchivedAt(it) == nil {
			t.Fatal("the run lost its archived_at")
		}
	})
}

// TestApproveRacesDelete: an approval and a delete of one run, each landing
// between the other's read and write. Whichever writes first wins; the other
// is refused and writes nothing: never an approved run without its apply, nor
// an apply whose run is gone.
func TestApproveRacesDelete(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)

		// The approval lands inside the delete.
		a := e.reviewed(ss.ID, "always answer in French")
		var once sync.Once
		var aerr error
		e.store.setBefore(func(ops []work.Op) {
			if d, ok := ops[0].(work.DeleteItem); ok && d.Kind == work.KindRun && d.ID == a.ID {
				once.Do(func() { _, aerr = e.runs.Approve(e.ctx, a.ID, "") })
			}
		})
		derr := e.runs.Delete(e.ctx, a.ID)
		e.store.setBefore(nil)
		if aerr != nil {
			t.Fatalf("approve: %v", aerr)
		}
		wantReason(t, derr, runs.CodeActive)
		e.wantStatus(a.ID, runs.StatusApproved)
		if aps := e.applies(); len(aps) != 1 || aps[0].Status != runs.ApplyPending {
			t.Fatalf("applies %+v, want the approval's pending apply", aps)
		}

		// The delete lands inside the approval.
		b := e.reviewed(ss.ID, "be brief")
		once = sync.Once{}
		e.store.setBefore(func(ops []work.Op) {
			if u, ok := ops[0].(work.UpdateItem); ok && u.Kind == work.KindRun && u.ID == b.ID && u.Set.Status == runs.StatusApproved {
				once.Do(func() { derr = e.runs.Delete(e.ctx, b.ID) })
			}
		})
		_, aerr = e.runs.Approve(e.ctx, b.ID, "")
		e.store.setBefore(nil)
		if derr != nil {
			t.Fatalf("delete: %v", derr)
		}
		wantCode(t, aerr, molt.ENOTFOUND)
		if _, err := e.store.GetItem(e.ctx, work.KindRun, b.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("run after delete: %v", err)
		}
		if aps := e.applies(); len(aps) != 1 {
			t.Fatalf("applies %+v: the refused approval created one", aps)
		}
	})
}
