package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// testRecover: the start-up pass of a process that owns its store finds the
// claims of its previous incarnation with fresh heartbeats and moves each at
// once, without waiting out the timeout: a running claim with attempts left
// back to pending (woken), one with its attempts spent to its expired status,
// a checkpointed one (Resume) abandoned — still claimed, slot and lock kept,
// its heartbeat cleared — and woken, so the executor takes it over; every
// pending item is woken again. The pass is safe to run twice.
func testRecover(t *testing.T, open Opener) {
	e := setup(t, open)
	rec := &recorder{}
	pol := work.Policy{Kind: kindT, Timeout: time.Hour, MaxAttempts: 2, Expired: work.StatusTimeout,
		Claimed: []work.Status{work.StatusRunning, "syncing"}, Resume: []work.Status{"syncing"}}
	m := &work.Maintainer{Protocol: e.p, Queue: rec, Policies: func(context.Context) ([]work.Policy, error) { return []work.Policy{pol}, nil }}

	running := e.create(kindT, "")
	e.claim(running, roomy)
	spent := e.create(kindT, "")
	c := e.claim(spent, roomy)
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: work.StatusPending}); err != nil {
		t.Fatal(err)
	}
	e.claim(e.get(kindT, spent.ID), roomy) // attempt 2 of 2
	syncing := e.create(kindT, "apply/acme")
	sc := e.claim(syncing, roomy)
	if _, err := e.p.Transition(e.ctx, sc, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	pending := e.create(kindT, "")
	e.clock.Advance(time.Second) // every heartbeat is fresh: the tick would leave them for an hour

	e.faults.Next(faults.After) // the first move's response is lost: read back, not counted twice
	res, err := m.Recover(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.checkFaultsUsed()
	if res.Requeued != 1 || res.Expired != 1 || res.Resumed != 1 {
		t.Fatalf("recover = %+v, want 1 requeued, 1 expired, 1 resumed", res)
	}
	if got := e.get(kindT, running.ID); got.Status != work.StatusPending || got.Active || got.Used() != 1 {
		t.Fatalf("running claim after recovery: %+v", got)
	}
	if got := e.get(kindT, spent.ID); got.Status != work.StatusTimeout || got.Active {
		t.Fatalf("spent claim after recovery: %+v", got)
	}
	got := e.get(kindT, syncing.ID)
	if got.Status != "syncing" || !got.Active || got.Token != sc.Token || !got.HeartbeatAt.IsZero() || e.holder("apply/acme") == "" {
		t.Fatalf("checkpointed claim after recovery: %+v (lock %q)", got, e.holder("apply/acme"))
	}
	if n := e.active(kindT); n != 1 {
		t.Fatalf("slots after recovery %d, want 1 (the checkpointed claim's)", n)
	}
	for _, id := range []string{running.ID, syncing.ID, pending.ID} {
		if rec.count(id) < 1 {
			t.Fatalf("%s not woken (%d wake-ups in all)", id, rec.total())
		}
	}
	if rec.count(spent.ID) != 0 {
		t.Fatal("an expired item was woken")
	}
	// The abandoned claim can be taken over at once; its old token is out.
	if _, _, err := e.p.Takeover(e.ctx, got, e.clock.Now().Add(-pol.Timeout)); err != nil {
		t.Fatalf("takeover after recovery: %v", err)
	}
	if err := e.p.Heartbeat(e.ctx, sc); !molt.IsLostClaim(err) {
		t.Fatalf("old claim heartbeat after takeover: %v, want lost", err)
	}
	// A second pass treats the taken-over claim as a previous incarnation's
	// too: with its attempts spent (2 of 2) it expires, releasing the lock.
	res, err = m.Recover(e.ctx)
	if err != nil || res.Expired != 1 || res.Requeued != 0 || e.holder("apply/acme") != "" {
		t.Fatalf("second recover = %+v %v (lock %q)", res, err, e.holder("apply/acme"))
	}
}
