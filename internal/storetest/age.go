package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/work"
)

// testListByAge: Item.ArchivedAt is stored to the nanosecond (CreateItem,
// Set.ArchivedAt, Edit.ArchivedAt), kept by writes that do not set it and
// cleared by a zero time; ListItems with UpdatedBy lists the items of one
// status not archived and updated at or before the bound, with ArchivedBy the
// items archived at or before it, oldest first (ties by id), in pages that
// repeat and skip nothing, even when the item at the cursor goes away; an item
// leaves a listing when a write moves its time past the bound, its status, or
// its phase (archived or not).
func testListByAge(t *testing.T, open Opener) {
	e := setup(t, open)
	t0 := epoch.Add(-30 * 24 * time.Hour)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	mk := func(id string, st work.Status, updated, archived time.Time) work.Item {
		return work.Item{Kind: kindT, ID: id, Status: st, Attempts: 1, CreatedAt: updated, UpdatedAt: updated,
			OpID: "c-" + id, ArchivedAt: archived}
	}
	items := []work.Item{
		mk("u1", "done", at(time.Hour), time.Time{}),
		mk("u2", "done", at(3*time.Hour), time.Time{}),
		mk("u0", "done", at(3*time.Hour), time.Time{}), // same time as u2: id order
		mk("u3", "done", at(5*time.Hour+time.Nanosecond), time.Time{}),
		mk("u4", "done", at(9*time.Hour), time.Time{}),
		mk("f1", "failed", at(time.Hour), time.Time{}),
		mk("a1", "done", at(0), at(2*time.Hour+123456789)),
		mk("a2", "done", at(0), at(4*time.Hour)),
		mk("a3", "done", at(0), at(8*time.Hour)),
		mk("g1", "failed", at(0), at(time.Hour)),
	}
	ops := make([]work.Op, len(items))
	for i, it := range items {
		ops[i] = work.CreateItem{Item: it}
	}
	if err := e.s.Commit(e.ctx, ops...); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := e.get(kindT, "a1").ArchivedAt; !got.Equal(at(2*time.Hour + 123456789)) {
		t.Fatalf("archived at %v, want %v (to the nanosecond)", got, at(2*time.Hour+123456789))
	}
	if got := e.get(kindT, "u1").ArchivedAt; !got.IsZero() {
		t.Fatalf("an item never archived has archived_at %v", got)
	}

	list := func(q work.ListQuery) []string {
		t.Helper()
		var ids []string
		q.Kind, q.Page.Cursor = kindT, ""
		for pages := 0; ; pages++ {
			pg, err := e.s.ListItems(e.ctx, q)
			if err != nil {
				t.Fatalf("list %+v: %v", q, err)
			}
			if q.Page.Limit > 0 && len(pg.Items) > q.Page.Limit {
				t.Fatalf("page of %d items, limit %d", len(pg.Items), q.Page.Limit)
			}
			for _, it := range pg.Items {
				ids = append(ids, it.ID)
			}
			if pg.Next == "" {
				return ids
			}
			if pages > 20 {
				t.Fatalf("listing %+v does not end: %v", q, ids)
			}
			q.Page.Cursor = pg.Next
		}
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	for _, limit := range []int{0, 1, 2} {
		name := fmt.Sprintf("limit %d", limit)
		pq := page.Query{Limit: limit}
		// The bound is inclusive, to the nanosecond.
		want(name+": done, updated by 5h+1ns", list(work.ListQuery{Status: "done", UpdatedBy: at(5*time.Hour + time.Nanosecond), Page: pq}),
			"u1", "u0", "u2", "u3")
		want(name+": done, updated by 5h", list(work.ListQuery{Status: "done", UpdatedBy: at(5 * time.Hour), Page: pq}),
			"u1", "u0", "u2")
		want(name+": failed, updated by 5h", list(work.ListQuery{Status: "failed", UpdatedBy: at(5 * time.Hour), Page: pq}), "f1")
		want(name+": done, archived by 4h", list(work.ListQuery{Status: "done", ArchivedBy: at(4 * time.Hour), Page: pq}),
			"a1", "a2")
		want(name+": done, archived by 1 day", list(work.ListQuery{Status: "done", ArchivedBy: at(24 * time.Hour), Page: pq}),
			"a1", "a2", "a3")
		want(name+": done, archived by 1h", list(work.ListQuery{Status: "done", ArchivedBy: at(time.Hour), Page: pq}))
	}

	// The item at the cursor goes away between two pages: the next page goes on
	// after it.
	pg, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Status: "done", UpdatedBy: at(24 * time.Hour), Page: page.Query{Limit: 2}})
	if err != nil || len(pg.Items) != 2 || pg.Next == "" {
		t.Fatalf("first page %+v %v", pg, err)
	}
	if err := e.s.Commit(e.ctx, work.DeleteItem{Kind: kindT, ID: pg.Items[1].ID}); err != nil {
		t.Fatal(err)
	}
	next, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Status: "done", UpdatedBy: at(24 * time.Hour),
		Page: page.Query{Limit: 10, Cursor: pg.Next}})
	if err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, it := range next.Items {
		rest = append(rest, it.ID)
	}
	want("after a deleted cursor item", rest, "u2", "u3", "u4")

	// A write's new update time moves the item past the bound; a new status
	// moves it to that status's listing.
	u1 := e.get(kindT, "u1")
	if _, err := e.p.UpdateSeen(e.ctx, u1, work.Edit{Reason: work.Ptr("touched")}); err != nil {
		t.Fatal(err)
	}
	want("u1 updated now", list(work.ListQuery{Status: "done", UpdatedBy: at(10 * time.Hour)}), "u2", "u3", "u4")
	u4 := e.get(kindT, "u4")
	if _, err := e.p.UpdateSeen(e.ctx, u4, work.Edit{To: "failed", KeepUpdatedAt: true}); err != nil {
		t.Fatal(err)
	}
	want("u4 failed", list(work.ListQuery{Status: "failed", UpdatedBy: at(10 * time.Hour)}), "f1", "u4")

	// Archiving moves an item to the archived listing (Edit.ArchivedAt, the
	// returned item carrying it); a later write keeps its archive time, even
	// one that changes its status and update time; a zero time clears it.
	u2 := e.get(kindT, "u2")
	arch := at(6 * time.Hour)
	got, err := e.p.UpdateSeen(e.ctx, u2, work.Edit{ArchivedAt: &arch, KeepUpdatedAt: true})
	if err != nil || !got.ArchivedAt.Equal(arch) {
		t.Fatalf("archive u2 = %v (archived at %v), want %v", err, got.ArchivedAt, arch)
	}
	want("u2 archived: by update", list(work.ListQuery{Status: "done", UpdatedBy: at(10 * time.Hour)}), "u3")
	want("u2 archived: by archive", list(work.ListQuery{Status: "done", ArchivedBy: at(6 * time.Hour)}), "a1", "a2", "u2")
	if _, err := e.p.UpdateSeen(e.ctx, got, work.Edit{To: "failed"}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, "u2"); !got.ArchivedAt.Equal(arch) || got.Status != "failed" {
		t.Fatalf("u2 after a status change: %s archived at %v, want failed, %v", got.Status, got.ArchivedAt, arch)
	}
	want("u2 failed, archived", list(work.ListQuery{Status: "failed", ArchivedBy: at(6 * time.Hour)}), "g1", "u2")
	want("u2 failed, not by update", list(work.ListQuery{Status: "failed", UpdatedBy: at(24 * time.Hour)}), "f1", "u4")
	if err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: "u2",
		Set: work.Set{ArchivedAt: &time.Time{}, UpdatedAt: at(13 * time.Hour), OpID: "unarchive"}}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, "u2"); !got.ArchivedAt.IsZero() {
		t.Fatalf("archived at %v after clearing, want zero", got.ArchivedAt)
	}
	want("u2 cleared: by archive", list(work.ListQuery{Status: "failed", ArchivedBy: at(24 * time.Hour)}), "g1")
	want("u2 cleared: by update", list(work.ListQuery{Status: "failed", UpdatedBy: at(24 * time.Hour)}), "f1", "u4", "u2")

	// Malformed queries.
	for _, q := range []work.ListQuery{
		{Kind: kindT, UpdatedBy: at(0)},
		{Kind: kindT, ArchivedBy: at(0)},
		{Kind: kindT, Status: "done", UpdatedBy: at(0), ArchivedBy: at(0)},
		{Kind: kindT, Status: "done", UpdatedBy: at(0), Page: page.Query{Cursor: page.Cursor("nonsense")}},
	} {
		if _, err := e.s.ListItems(e.ctx, q); molt.ErrorCode(err) != molt.EINVALID {
			t.Fatalf("list %+v: %v, want EINVALID", q, err)
		}
	}
}
