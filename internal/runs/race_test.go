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
