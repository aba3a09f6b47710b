package applies_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

const day = 24 * time.Hour

// TestRetention: 14 days after an apply or run is terminal its artifacts are
// zipped into one archive and archived_at is set (an apply also gets its TTL);
// active rows and rollback snapshots are not archived, and an archived applied
// apply can still be rolled back. 30 days after archived_at the archive, the
// snapshot and the row are purged.
func TestRetention(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.put("acme", "INSTRUCTIONS.md", "v1")
		run, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "v2"}})
		failedRun, failedID := e.approve(runSpec{files: map[string]string{"INDEX.md": "x"}})
		e.mu.Lock()
		e.low[failedRun] = true
		e.mu.Unlock()
		e.drainOK()
		e.wantStatus(work.KindApply, id, applies.StatusApplied)
		e.wantStatus(work.KindApply, failedID, applies.StatusFailed)
		// A pending apply (its workspace's worker never came) and its approved
		// run are active: never archived.
		pendingRun, pendingID := e.approve(runSpec{ws: "beta", files: map[string]string{"INDEX.md": "x"}})
		e.receive(work.KindApply)

		e.clock.Advance(13 * day)
		if res, err := e.svc.RetainNow(e.ctx); err != nil || res.Archived != 0 {
			t.Fatalf("retain at 13 days = %+v %v, want nothing archived", res, err)
		}
		e.clock.Advance(day + time.Hour)
		res, err := e.svc.RetainNow(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The applied apply and its run, the failed apply. Not: the failed
		// apply's run (approved), the pending apply and its run.
		if res.Archived != 3 {
			t.Fatalf("archived %d, want 3", res.Archived)
		}
		now := e.clock.Now()
		for _, a := range []string{id, failedID} {
			it := e.item(work.KindApply, a)
			if at := applies.ArchivedAt(it); at == nil || !at.Equal(now) {
				t.Fatalf("apply %s archived_at %v", a, at)
			}
			if want := now.Add(32 * day).Truncate(time.Second); !it.ExpiresAt.Equal(want) {
				t.Fatalf("apply %s expires at %v, want %v (purge + grace)", a, it.ExpiresAt, want)
			}
		}
		entries, err := e.svc.ReadArchive(e.ctx, work.KindApply, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := entries["applies/"+id+"/attempt-1/merge.json"]; !ok {
			t.Fatalf("apply archive holds %v", keys(entries))
		}
		if left, _ := e.blobs.List(e.ctx, "applies/"+id+"/attempt-"); len(left) != 0 {
			t.Fatalf("attempt artifacts left after archiving: %v", left)
		}
		if _, ok := e.blob("applies/" + id + "/MANIFEST.json"); !ok {
			t.Fatal("the rollback snapshot was archived")
		}
		if _, ok := e.blob("applies/" + id + "/before/INSTRUCTIONS.md"); !ok {
			t.Fatal("the rollback backup was archived")
		}
		if it := e.item(work.KindRun, run); !it.ExpiresAt.Equal(now.Add(32 * day).Truncate(time.Second)) {
			t.Fatalf("run expires at %v", it.ExpiresAt)
		}
		runEntries, err := e.svc.ReadArchive(e.ctx, work.KindRun, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := runEntries[runs.AttemptKey(run, 1, runs.ArtifactPatch)]; !ok {
			t.Fatalf("run archive holds %v", keys(runEntries))
		}
		if left, _ := e.blobs.List(e.ctx, runs.Prefix(run)); len(left) != 0 {
			t.Fatalf("run artifacts left: %v", left)
		}
		// Archived runs are listed by view=archived, and only there.
		arch, err := e.app.Runs.List(e.ctx, runs.ListQuery{Archived: true, Page: page.Query{Limit: 50}})
		if err != nil || len(arch.Items) != 1 || arch.Items[0].ID != run {
			t.Fatalf("archived runs %+v (%v)", arch.Items, err)
		}
		for _, r := range []string{failedRun, pendingRun} {
			if applies.ArchivedAt(e.item(work.KindRun, r)) != nil {
				t.Fatalf("active run %s archived", r)
			}
		}
		if applies.ArchivedAt(e.item(work.KindApply, pendingID)) != nil {
			t.Fatal("a pending apply was archived")
		}
		// Nothing more to do on the next pass.
		if res, _ := e.svc.RetainNow(e.ctx); res.Archived+res.Purged != 0 {
			t.Fatalf("second pass %+v", res)
		}
		// The snapshot is kept: the archived apply rolls back.
		if _, err := e.svc.Rollback(e.ctx, id, false); err != nil {
			t.Fatalf("rollback of an archived apply: %v", err)
		}
		if got := e.files("acme")["INSTRUCTIONS.md"]; got != "v1" {
			t.Fatalf("INSTRUCTIONS.md = %q after rollback", got)
		}
		// Its run is rolled back but archived: its snapshot is in the zip, so
		// it cannot be retried.
		_, err = e.app.Runs.Retry(e.ctx, run, "again")
		if me := wantReason(t, err, runs.CodeNotRetryable); !strings.Contains(me.Message, "archived") {
			t.Fatalf("retry of an archived run: %v", err)
		}

		e.clock.Advance(29 * day)
		if res, _ := e.svc.RetainNow(e.ctx); res.Purged != 0 {
			t.Fatalf("purged %d before 30 days", res.Purged)
		}
		e.clock.Advance(day)
		res, err = e.svc.RetainNow(e.ctx)
		if err != nil || res.Purged != 3 {
			t.Fatalf("purge = %+v %v, want 3 purged", res, err)
		}
		for _, k := range []struct {
			kind work.Kind
			id   string
		}{{work.KindApply, id}, {work.KindApply, failedID}, {work.KindRun, run}} {
			if _, err := e.store.GetItem(e.ctx, k.kind, k.id); molt.ErrorCode(err) != molt.ENOTFOUND {
				t.Fatalf("%s %s still there: %v", k.kind, k.id, err)
			}
		}
		for _, p := range []string{"applies/" + id + "/", "runs/" + run + "/", "archive/apply-" + id, "archive/run-" + run} {
			if left, _ := e.blobs.List(e.ctx, p); len(left) != 0 {
				t.Fatalf("%s left after the purge: %v", p, left)
			}
		}
		// Active rows stay, whatever their age.
		e.item(work.KindApply, pendingID)
		e.item(work.KindRun, pendingRun)
		e.item(work.KindRun, failedRun)
		// The rollback item was archived with the rest and goes too.
		pg, _ := e.store.ListItems(e.ctx, work.ListQuery{Kind: applies.KindRollback, Page: page.Query{Limit: 10}})
		if len(pg.Items) != 1 || applies.ArchivedAt(pg.Items[0]) == nil {
			t.Fatalf("rollback items %+v", pg.Items)
		}

		// The tick runs retention at most once per hour in one process.
		if r, err := e.svc.Retain(e.ctx); err != nil || r.Skipped {
			t.Fatalf("first Retain %+v %v", r, err)
		}
		if r, _ := e.svc.Retain(e.ctx); !r.Skipped {
			t.Fatal("second Retain within the hour ran")
		}
		e.clock.Advance(time.Hour)
		if r, _ := e.svc.Retain(e.ctx); r.Skipped {
			t.Fatal("Retain an hour later skipped")
		}
	})
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRetentionRacesDelete: a run deleted while retention archives it (after
// the pass read its artifacts, before it wrote the zip) leaves no archive
// behind: the zip holds the session's frozen messages, and once the row is gone
// nothing would ever delete it.
func TestRetentionRacesDelete(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		run, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "v2"}})
		if err := e.blobs.Put(e.ctx, runs.SnapshotKey(run, runs.ArtifactMessages), []byte(`[{"text":"private"}]`)); err != nil {
			t.Fatal(err)
		}
		e.drainOK()
		e.wantStatus(work.KindApply, id, applies.StatusApplied)
		e.clock.Advance(15 * day)

		zip := "archive/run-" + run + ".zip"
		var once sync.Once
		var derr error
		e.blobs.setBeforePut(func(key string) {
			if key == zip {
				once.Do(func() { derr = e.app.Runs.Delete(e.ctx, run) })
			}
		})
		res, err := e.svc.RetainNow(e.ctx)
		e.blobs.setBeforePut(nil)
		if err != nil || derr != nil {
			t.Fatalf("retain = %+v %v; delete meanwhile: %v", res, err, derr)
		}
		if _, err := e.store.GetItem(e.ctx, work.KindRun, run); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("run after delete: %v", err)
		}
		for _, p := range []string{zip, "runs/" + run + "/", "archive/apply-" + id, "applies/" + id + "/"} {
			if left, _ := e.blobs.List(e.ctx, p); len(left) != 0 {
				t.Fatalf("%s left after the run was deleted: %v", p, left)
			}
		}
	})
}

// TestRetentionOverlap: two retention passes at once (two ticks overlap). One
// archives a run while the other is between reading the (not yet written) zip
// and reading the artifacts, which are gone by then. The late pass must not
// overwrite the archive with what it could still read (nothing): the archive
// keeps every artifact.
func TestRetentionOverlap(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		run, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "v2"}})
		e.drainOK()
		e.wantStatus(work.KindApply, id, applies.StatusApplied)
		e.clock.Advance(15 * day)

		zip := "archive/run-" + run + ".zip"
		var fired atomic.Bool
		var first applies.RetentionResult
		var ferr error
		e.blobs.setAfterGet(func(key string) {
			if key == zip && fired.CompareAndSwap(false, true) {
				first, ferr = e.svc.RetainNow(e.ctx)
			}
		})
		late, err := e.svc.RetainNow(e.ctx)
		e.blobs.setAfterGet(nil)
		if err != nil || ferr != nil || first.Archived != 2 {
			t.Fatalf("passes: first %+v %v, late %+v %v", first, ferr, late, err)
		}
		entries, err := e.svc.ReadArchive(e.ctx, work.KindRun, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := entries[runs.AttemptKey(run, 1, runs.ArtifactPatch)]; !ok {
			t.Fatalf("the run's archive holds %v: the late pass overwrote it", keys(entries))
		}
	})
}

// TestRetentionOfFailedApply: a reviewer apply that failed leaves its run
// approved (a retry is allowed). Retention archives and, 30 days
// later, purges the failed apply, but the run is active and stays: it must
// still be retryable then (its apply is gone: nothing is in flight), or it
// could never be retried, deleted (approved) nor archived.
func TestRetentionOfFailedApply(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		run, id := e.approve(runSpec{files: map[string]string{"INDEX.md": "x"}})
		e.mu.Lock()
		e.low[run] = true
		e.mu.Unlock()
		e.drainOK()
		e.wantStatus(work.KindApply, id, applies.StatusFailed)
		e.wantStatus(work.KindRun, run, runs.StatusApproved)
		// Its snapshot, as the run's enqueue stores it (the seeded run has none).
		if err := e.blobs.Put(e.ctx, runs.SnapshotKey(run, runs.ArtifactMessages), []byte("[]")); err != nil {
			t.Fatal(err)
		}

		e.clock.Advance(15 * day)
		if res, err := e.svc.RetainNow(e.ctx); err != nil || res.Archived != 1 {
			t.Fatalf("archive = %+v %v, want the failed apply archived", res, err)
		}
		e.clock.Advance(31 * day)
		if res, err := e.svc.RetainNow(e.ctx); err != nil || res.Purged != 1 {
			t.Fatalf("purge = %+v %v, want the failed apply purged", res, err)
		}
		if _, err := e.store.GetItem(e.ctx, work.KindApply, id); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("apply after the purge: %v", err)
		}
		it := e.wantStatus(work.KindRun, run, runs.StatusApproved)
		if applies.ArchivedAt(it) != nil {
			t.Fatal("an approved run was archived")
		}
		if _, err := e.app.Runs.Retry(e.ctx, run, "try another way"); err != nil {
			t.Fatalf("retry of an approved run whose failed apply was purged: %v", err)
		}
		e.wantStatus(work.KindRun, run, runs.StatusPending)
	})
}
