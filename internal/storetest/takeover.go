package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// testTakeover: a stale checkpointed claim is taken over in place — same status,
// slot and lock, attempts+1, new token — and the old claimer is locked out.
func testTakeover(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "apply/acme")
	old := e.claim(it, 1)
	if _, err := e.p.Transition(e.ctx, old, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	seen := e.get(kindT, it.ID)
	// Not stale yet: refused, nothing written.
	_, _, err := e.p.Takeover(e.ctx, seen, e.clock.Now().Add(-time.Minute))
	wantReason(t, err, work.ReasonChanged)
	e.clock.Advance(time.Hour)
	e.faults.Next(faults.After) // lost response: read back, not a false failure
	c, got, err := e.p.Takeover(e.ctx, seen, e.clock.Now().Add(-time.Minute))
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	e.checkFaultsUsed()
	now := e.get(kindT, it.ID)
	if now.Status != "syncing" || !now.Active || now.Token != c.Token || now.Attempts != 2 || got.Attempts != 2 || !now.HeartbeatAt.Equal(e.clock.Now()) {
		t.Fatalf("after takeover %+v", now)
	}
	if e.active(kindT) != 1 || e.holder("apply/acme") != work.Holder(kindT, it.ID) {
		t.Fatalf("takeover changed slot (%d) or lock (%q)", e.active(kindT), e.holder("apply/acme"))
	}
	// A second takeover from the same stale read loses.
	_, _, err = e.p.Takeover(e.ctx, seen, e.clock.Now().Add(time.Minute))
	wantReason(t, err, work.ReasonChanged)
	// The old claimer is out; the new one finishes and releases.
	if err := e.p.Heartbeat(e.ctx, old); !molt.IsLostClaim(err) {
		t.Fatalf("old claim heartbeat: %v, want lost", err)
	}
	if _, err := e.p.Transition(e.ctx, old, work.Transition{To: "applied"}); !molt.IsLostClaim(err) {
		t.Fatalf("old claim finish: %v, want lost", err)
	}
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "applied"}); err != nil {
		t.Fatal(err)
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatal("finish after takeover did not release")
	}
}

// testExpireAlso: the terminal move of a stale claim commits its extra ops in the
// same write; when one fails nothing is written.
func testExpireAlso(t *testing.T, open Opener) {
	e := setup(t, open)
	run := e.create("run2", "")
	if _, err := e.p.Update(e.ctx, "run2", run.ID, work.Change{From: []work.Status{work.StatusPending}, To: "approved"}); err != nil {
		t.Fatal(err)
	}
	it := e.create(kindT, "apply/acme")
	e.claim(it, 1)
	e.clock.Advance(time.Hour)
	back := work.UpdateItem{Kind: "run2", ID: run.ID, If: work.Cond{Statuses: []work.Status{"approved"}},
		Set: work.Set{Status: "awaiting_review", UpdatedAt: e.clock.Now(), OpID: "back"}}
	wrong := work.UpdateItem{Kind: "run2", ID: run.ID, If: work.Cond{Statuses: []work.Status{"applied"}},
		Set: work.Set{Status: "x", UpdatedAt: e.clock.Now(), OpID: "wrong"}}
	seen := e.get(kindT, it.ID)
	_, err := e.p.Expire(e.ctx, seen, e.clock.Now().Add(-time.Minute), "failed", "timeout", wrong)
	wantReason(t, err, work.ReasonAlsoFailed)
	if got := e.get(kindT, it.ID); got.Status != work.StatusRunning || !got.Active || e.holder("apply/acme") == "" {
		t.Fatalf("failed expire wrote something: %+v", got)
	}
	if _, err := e.p.Expire(e.ctx, seen, e.clock.Now().Add(-time.Minute), "failed", "timeout", back); err != nil {
		t.Fatal(err)
	}
	if e.get(kindT, it.ID).Status != "failed" || e.get("run2", run.ID).Status != "awaiting_review" {
		t.Fatal("expire and its extra op not both written")
	}
	if e.active(kindT) != 0 || e.holder("apply/acme") != "" {
		t.Fatal("expire did not release slot and lock")
	}
}

// testMaintainerResume: stale items in a Resume status are woken, not requeued,
// and keep their lock; when their attempts are spent they expire with OnExpire's
// ops.
func testMaintainerResume(t *testing.T, open Opener) {
	e := setup(t, open)
	rec := &recorder{}
	note := e.create("note", "")
	pol := work.Policy{Kind: kindT, Timeout: 10 * time.Minute, MaxAttempts: 2, Expired: "failed",
		Claimed: []work.Status{work.StatusRunning, "syncing"}, Resume: []work.Status{"syncing"},
		OnExpire: func(_ context.Context, it work.Item) ([]work.Op, error) {
			return []work.Op{work.UpdateItem{Kind: "note", ID: note.ID, If: work.Cond{Statuses: []work.Status{work.StatusPending}},
				Set: work.Set{Status: "noted", UpdatedAt: e.clock.Now(), OpID: "note-" + it.ID}}}, nil
		}}
	m := &work.Maintainer{Protocol: e.p, Queue: rec, Policies: func(context.Context) ([]work.Policy, error) { return []work.Policy{pol}, nil }}
	it := e.create(kindT, "apply/acme")
	c := e.claim(it, 0)
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(11 * time.Minute)
	res, err := m.RunOnce(e.ctx)
	if err != nil || res.Resumed != 1 || res.Requeued != 0 || rec.count(it.ID) != 1 {
		t.Fatalf("pass = %+v %v, want one resume wake-up", res, err)
	}
	if got := e.get(kindT, it.ID); got.Status != "syncing" || !got.Active || e.holder("apply/acme") == "" {
		t.Fatalf("resumed item changed: %+v", got)
	}
	// The worker takes over (attempt 2 of 2) and dies again: the tick expires it.
	if _, _, err := e.p.Takeover(e.ctx, e.get(kindT, it.ID), e.clock.Now().Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(11 * time.Minute)
	res, err = m.RunOnce(e.ctx)
	if err != nil || res.Expired != 1 {
		t.Fatalf("pass = %+v %v, want one expiry", res, err)
	}
	if e.get(kindT, it.ID).Status != "failed" || e.get("note", note.ID).Status != "noted" || e.holder("apply/acme") != "" {
		t.Fatal("expiry did not write its extra op or release the lock")
	}
}
