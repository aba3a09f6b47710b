package applies_test

import (
	"testing"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// TestRetentionReachesDueBehindHistory: more archived runs waiting for their
// purge than one pass used to page through (20 pages of 100) sort before a
// run due for archiving; the pass still archives it, and reads only what is
// due (the archived history costs it nothing).
func TestRetentionReachesDueBehindHistory(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		now := e.clock.Now()
		archived, old := now.Add(-5*day), idsAt(now.Add(-40*day))
		data := withArchived(t, []byte(`{"workspace":"acme"}`), archived)
		var history []work.Item
		for i := 0; i < 2100; i++ {
			history = append(history, work.Item{Kind: work.KindRun, ID: old.NewID(), Workspace: "acme",
				Status: runs.StatusRejected, Attempts: 1, Data: data, CreatedAt: now.Add(-40 * day),
				UpdatedAt: now.Add(-39 * day), OpID: e.ids.NewID(), ArchivedAt: archived})
		}
		due := now.Add(-15 * day)
		run := work.Item{Kind: work.KindRun, ID: idsAt(due).NewID(), Workspace: "acme", Status: runs.StatusRejected,
			Attempts: 1, Data: []byte(`{"workspace":"acme"}`), CreatedAt: due, UpdatedAt: due, OpID: e.ids.NewID()}
		seedItems(t, e, append(history, run))
		listed := e.store.listed.Load()
		res, err := e.svc.RetainNow(e.ctx)
		if err != nil || res.Archived != 1 {
			t.Fatalf("retain = %+v %v, want the due run archived", res, err)
		}
		if at := applies.ArchivedAt(e.item(work.KindRun, run.ID)); at == nil || !at.Equal(now) {
			t.Fatalf("due run archived at %v, want %v", at, now)
		}
		if got := e.item(work.KindRun, run.ID).ArchivedAt; !got.Equal(now) {
			t.Fatalf("due run's item archived at %v, want %v", got, now)
		}
		if n := e.store.listed.Load() - listed; n != 1 {
			t.Fatalf("the pass listed %d items, want 1 (only the due run)", n)
		}
	})
}

// TestRetentionOfLegacyArchive: a run archived before the store kept the
// archive time (archived_at in its data only, so it is listed by its update
// time) has the time recorded by the next pass, keeping its updated_at, and
// is purged when it is due, as any other.
func TestRetentionOfLegacyArchive(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		now := e.clock.Now()
		archived, updated := now.Add(-10*day), now.Add(-30*day)
		run := work.Item{Kind: work.KindRun, ID: idsAt(updated).NewID(), Workspace: "acme", Status: runs.StatusRejected,
			Attempts: 1, Data: withArchived(t, []byte(`{"workspace":"acme"}`), archived), CreatedAt: updated,
			UpdatedAt: updated, OpID: e.ids.NewID()}
		seedItems(t, e, []work.Item{run})
		if res, err := e.svc.RetainNow(e.ctx); err != nil || res.Archived+res.Purged != 0 {
			t.Fatalf("retain = %+v %v, want nothing archived nor purged", res, err)
		}
		it := e.item(work.KindRun, run.ID)
		if !it.ArchivedAt.Equal(archived) || !it.UpdatedAt.Equal(updated) {
			t.Fatalf("legacy run: archived at %v, updated at %v; want %v, %v", it.ArchivedAt, it.UpdatedAt, archived, updated)
		}
		e.clock.Advance(21 * day)
		if res, err := e.svc.RetainNow(e.ctx); err != nil || res.Purged != 1 {
			t.Fatalf("retain 31 days after the archive = %+v %v, want the run purged", res, err)
		}
		if _, err := e.store.GetItem(e.ctx, work.KindRun, run.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("legacy run after its purge: %v", err)
		}
	})
}
