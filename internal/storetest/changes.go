package storetest

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// testItemsChanged: ItemsChangedAfter lists one kind's items in (updated_at, id)
// order strictly after a position, sees every write that moves updated_at (a
// claim here), honours the limit, ties on the same instant broken by id, and
// leaves deleted items and other kinds out.
func testItemsChanged(t *testing.T, open Opener) {
	e := setup(t, open)
	const other work.Kind = "job_other"
	ids := func(items []work.Item) []string {
		out := []string{}
		for _, it := range items {
			out = append(out, it.ID)
		}
		return out
	}
	changed := func(at time.Time, id string, limit int) []string {
		t.Helper()
		items, err := e.s.ItemsChangedAfter(e.ctx, kindT, at, id, limit)
		if err != nil {
			t.Fatalf("changed after %v %q: %v", at, id, err)
		}
		return ids(items)
	}
	want := func(what string, got []string, w ...string) {
		t.Helper()
		if len(w) == 0 {
			w = []string{}
		}
		if len(got) != len(w) {
			t.Fatalf("%s: got %v, want %v", what, got, w)
		}
		for i := range got {
			if got[i] != w[i] {
				t.Fatalf("%s: got %v, want %v", what, got, w)
			}
		}
	}

	t0 := e.clock.Now()
	a := e.create(kindT, "")
	e.clock.Advance(time.Millisecond)
	t1 := e.clock.Now()
	b := e.create(kindT, "")
	c := e.create(kindT, "") // the same instant as b: after it by id
	e.create(other, "")
	e.clock.Advance(time.Millisecond)
	t2 := e.clock.Now()
	e.claim(a, 10) // moves a's updated_at to t2

	want("from the start", changed(t0.Add(-time.Second), "", 10), b.ID, c.ID, a.ID)
	want("after t1 (ties included)", changed(t1, "", 10), b.ID, c.ID, a.ID)
	want("after b", changed(t1, b.ID, 10), c.ID, a.ID)
	want("after c", changed(t1, c.ID, 10), a.ID)
	want("limit", changed(t0.Add(-time.Second), "", 2), b.ID, c.ID)
	want("after the claim", changed(t2, a.ID, 10))
	if got := e.get(kindT, a.ID); !got.UpdatedAt.Equal(t2) {
		t.Fatalf("a's updated_at = %v, want %v", got.UpdatedAt, t2)
	}

	// A delete leaves the feed: nothing of it is listed any more.
	if err := e.p.Delete(e.ctx, kindT, b.ID, []work.Status{work.StatusPending}, 0); err != nil {
		t.Fatalf("delete b: %v", err)
	}
	want("after deleting b", changed(t0.Add(-time.Second), "", 10), c.ID, a.ID)

	for _, bad := range []struct {
		kind  work.Kind
		limit int
	}{{kindT, 0}, {kindT, 1000}, {"", 10}, {"Bad Kind", 10}} {
		if _, err := e.s.ItemsChangedAfter(e.ctx, bad.kind, t0, "", bad.limit); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("kind %q limit %d: %v, want EINVALID", bad.kind, bad.limit, err)
		}
	}
}
