package storetest

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/work"
)

// testOpIDAndExpiry: Cond.OpID makes a write conditional on the item being
// unchanged since it was read (two writers that read the same version: one wins);
// Set.ExpiresAt sets the item's expiry (kept to the second), a zero time clears
// it, and CreateItem stores one too.
func testOpIDAndExpiry(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "")
	seen := e.get(kindT, it.ID)
	if !seen.ExpiresAt.IsZero() {
		t.Fatalf("new item expires at %v, want zero", seen.ExpiresAt)
	}

	// Two writers read the same version; the first stamp wins, the second fails.
	expires := epoch.Add(30*24*time.Hour + 1500*time.Millisecond)
	stamp := func(op string, data string) error {
		return e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: it.ID,
			If:  work.Cond{Statuses: []work.Status{work.StatusPending}, OpID: seen.OpID},
			Set: work.Set{Data: []byte(data), ExpiresAt: &expires, UpdatedAt: e.clock.Now(), OpID: op}})
	}
	if err := stamp("stamp-1", `{"n":1}`); err != nil {
		t.Fatalf("first stamp: %v", err)
	}
	if err := stamp("stamp-2", `{"n":2}`); !isCondFailed(err) {
		t.Fatalf("second stamp on a stale op id: %v, want a condition failure", err)
	}
	got := e.get(kindT, it.ID)
	if string(got.Data) != `{"n":1}` || got.OpID != "stamp-1" {
		t.Fatalf("after the race: data %s op %s, want the first stamp", got.Data, got.OpID)
	}
	if want := expires.Truncate(time.Second); !got.ExpiresAt.Equal(want) {
		t.Fatalf("expires at %v, want %v", got.ExpiresAt, want)
	}

	// A write without ExpiresAt keeps it; a zero time clears it.
	if err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: it.ID, If: work.Cond{OpID: "stamp-1"},
		Set: work.Set{Reason: work.Ptr("kept"), UpdatedAt: e.clock.Now(), OpID: "stamp-3"}}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, it.ID); got.ExpiresAt.IsZero() {
		t.Fatal("expiry lost by a write that did not set it")
	}
	if err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: it.ID, If: work.Cond{OpID: "stamp-3"},
		Set: work.Set{ExpiresAt: &time.Time{}, UpdatedAt: e.clock.Now(), OpID: "stamp-4"}}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, it.ID); !got.ExpiresAt.IsZero() {
		t.Fatalf("expiry %v after clearing, want zero", got.ExpiresAt)
	}

	// A delete conditional on the op id.
	if err := e.s.Commit(e.ctx, work.DeleteItem{Kind: kindT, ID: it.ID, If: work.Cond{OpID: "stamp-3"}}); !isCondFailed(err) {
		t.Fatalf("delete on a stale op id: %v, want a condition failure", err)
	}
	if err := e.s.Commit(e.ctx, work.DeleteItem{Kind: kindT, ID: it.ID, If: work.Cond{OpID: "stamp-4"}}); err != nil {
		t.Fatalf("delete on the current op id: %v", err)
	}

	// CreateItem stores an expiry.
	now := e.clock.Now()
	c := work.Item{Kind: kindT, ID: "expiring", Status: "done", CreatedAt: now, UpdatedAt: now, OpID: "c1", ExpiresAt: expires}
	if err := e.s.Commit(e.ctx, work.CreateItem{Item: c}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, "expiring"); !got.ExpiresAt.Equal(expires.Truncate(time.Second)) {
		t.Fatalf("created item expires at %v, want %v", got.ExpiresAt, expires.Truncate(time.Second))
	}
}
