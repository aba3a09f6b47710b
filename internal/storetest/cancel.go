package storetest

import (
	"testing"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// testCancel: Protocol.Cancel ends a pending item at once, and a claimed one
// conditional on the claim it saw, releasing its slot and lock; the claimer
// is then out; a cancel from a stale read writes nothing.
func testCancel(t *testing.T, open Opener) {
	e := setup(t, open)
	pending := e.create(kindT, "turn/s1")
	got, err := e.p.Cancel(e.ctx, pending, "canceled", "canceled by client")
	if err != nil {
		t.Fatalf("cancel pending: %v", err)
	}
	if now := e.get(kindT, pending.ID); now.Status != "canceled" || now.Active || now.Reason != "canceled by client" || got.Status != "canceled" {
		t.Fatalf("after cancel of pending %+v", now)
	}
	// Cancelled again from the same read: it moved on.
	_, err = e.p.Cancel(e.ctx, pending, "canceled", "again")
	wantReason(t, err, work.ReasonChanged)

	it := e.create(kindT, "turn/s2")
	c := e.claim(it, 1)
	seen := e.get(kindT, it.ID)
	e.faults.Next(faults.After) // lost response: read back, not a false failure
	if _, err := e.p.Cancel(e.ctx, seen, "canceled", "canceled by client"); err != nil {
		t.Fatalf("cancel running: %v", err)
	}
	e.checkFaultsUsed()
	if now := e.get(kindT, it.ID); now.Status != "canceled" || now.Active || now.Token != "" {
		t.Fatalf("after cancel of running %+v", now)
	}
	if e.active(kindT) != 0 || e.holder("turn/s2") != "" {
		t.Fatalf("cancel left slot (%d) or lock (%q)", e.active(kindT), e.holder("turn/s2"))
	}
	if err := e.p.Heartbeat(e.ctx, c); !molt.IsLostClaim(err) {
		t.Fatalf("claimer heartbeat after cancel: %v, want lost", err)
	}
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); !molt.IsLostClaim(err) {
		t.Fatalf("claimer final write after cancel: %v, want lost", err)
	}

	// A cancel that read a claim which has since ended writes nothing.
	it3 := e.create(kindT, "")
	c3 := e.claim(it3, 1)
	seen3 := e.get(kindT, it3.ID)
	if _, err := e.p.Transition(e.ctx, c3, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.p.Cancel(e.ctx, seen3, "canceled", "late")
	wantReason(t, err, work.ReasonChanged)
	if now := e.get(kindT, it3.ID); now.Status != "done" {
		t.Fatalf("late cancel changed the item: %+v", now)
	}
}
