package storetest

import (
	"testing"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// testDelete: DeleteItem removes an item only while its condition holds, together
// with other ops or not at all; Protocol.Delete settles a lost response by reading
// back.
func testDelete(t *testing.T, open Opener) {
	e := setup(t, open)
	a := e.create(kindT, "")
	b := e.create(kindT, "")
	if _, err := e.p.Update(e.ctx, kindT, b.ID, work.Change{From: []work.Status{work.StatusPending}, To: "done"}); err != nil {
		t.Fatal(err)
	}
	// A claimed item is not deleted (Active must be false): nothing written.
	c := e.claim(a, 0)
	err := e.p.Delete(e.ctx, kindT, a.ID, []work.Status{work.StatusRunning}, c.Attempts)
	wantReason(t, err, work.ReasonChanged)
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	// Wrong status or attempts: refused.
	wantReason(t, e.p.Delete(e.ctx, kindT, a.ID, []work.Status{"failed"}, 1), work.ReasonChanged)
	wantReason(t, e.p.Delete(e.ctx, kindT, a.ID, []work.Status{"done"}, 0), work.ReasonChanged)
	// An extra op whose condition fails: nothing is deleted.
	err = e.p.Delete(e.ctx, kindT, a.ID, []work.Status{"done"}, 1,
		work.DeleteItem{Kind: kindT, ID: b.ID, If: work.Cond{Statuses: []work.Status{"failed"}}})
	wantReason(t, err, work.ReasonAlsoFailed)
	e.get(kindT, a.ID)
	e.get(kindT, b.ID)
	// Both in one write, the response lost: read back, reported deleted.
	e.faults.Next(faults.After)
	err = e.p.Delete(e.ctx, kindT, a.ID, []work.Status{"done"}, 1,
		work.DeleteItem{Kind: kindT, ID: b.ID, If: work.Cond{Statuses: []work.Status{"done"}, Active: work.Ptr(false)}})
	if err != nil {
		t.Fatalf("delete after lost response: %v", err)
	}
	e.checkFaultsUsed()
	for _, id := range []string{a.ID, b.ID} {
		if _, err := e.s.GetItem(e.ctx, kindT, id); err == nil {
			t.Fatalf("%s still there after delete", id)
		}
	}
	if e.active(kindT) != 0 {
		t.Fatalf("slots = %d after deletes, want 0", e.active(kindT))
	}
	// Absent: not found.
	wantCode(t, e.p.Delete(e.ctx, kindT, a.ID, []work.Status{"done"}, 1), molt.ENOTFOUND)
}
