package storetest

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// testFaults covers every write path of the claim protocol with (a) a write that
// fails before it is applied and (b) a write that is applied but whose response is
// lost. The protocol reads back: no claim is double-counted, no lock is left held
// by nobody, and no claim is reported lost when it is held.
func testFaults(t *testing.T, open Opener) {
	modes := []struct {
		name string
		mode faults.Mode
	}{{"before", faults.Before}, {"after", faults.After}}
	for _, m := range modes {
		t.Run("Create/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			e.faults.Next(m.mode)
			it, err := e.p.Create(e.ctx, work.Item{Kind: kindT, LockKey: "apply/acme"})
			if err != nil {
				t.Fatalf("create with one %s fault: %v", m.name, err)
			}
			if got := e.get(kindT, it.ID); got.OpID != it.OpID || got.Status != work.StatusPending {
				t.Fatalf("created item %+v", got)
			}
			e.checkFaultsUsed()
		})
		t.Run("TransitionUncounted/"+m.name, func(t *testing.T) {
			// A give-back that does not count: attempts since the last
			// retry back to 0, the claim released, once, under the fault.
			e := setup(t, open)
			it := e.create(kindT, "apply/acme")
			c := e.claim(it, 1)
			e.faults.Next(m.mode)
			got, err := e.p.Transition(e.ctx, c, work.Transition{To: work.StatusPending, Uncounted: true, Reason: work.Ptr("busy")})
			if err != nil {
				t.Fatalf("uncounted transition with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			stored := e.get(kindT, it.ID)
			if stored.Status != work.StatusPending || stored.Active || stored.Attempts != 1 || stored.Used() != 0 ||
				got.Used() != 0 || e.active(kindT) != 0 || e.holder("apply/acme") != "" {
				t.Fatalf("after an uncounted give-back: stored %+v (used %d), returned used %d, active %d, holder %q",
					stored, stored.Used(), got.Used(), e.active(kindT), e.holder("apply/acme"))
			}
			// A counted one after it counts again.
			c = e.claim(stored, 1)
			if _, err := e.p.Transition(e.ctx, c, work.Transition{To: work.StatusPending}); err != nil {
				t.Fatal(err)
			}
			if again := e.get(kindT, it.ID); again.Attempts != 2 || again.Used() != 1 {
				t.Fatalf("after a counted give-back: attempts %d used %d, want 2 and 1", again.Attempts, again.Used())
			}
		})
		t.Run("Claim/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			it := e.create(kindT, "apply/acme")
			e.faults.Next(m.mode)
			c, _, err := e.p.Claim(e.ctx, kindT, it.ID, 0, 1)
			if err != nil {
				t.Fatalf("claim with one %s fault: %v (falsely reported as failed)", m.name, err)
			}
			e.checkFaultsUsed()
			got := e.get(kindT, it.ID)
			if got.Attempts != 1 || got.Token != c.Token || !got.Active {
				t.Fatalf("claimed item %+v, want attempts 1 with token %s", got, c.Token)
			}
			if n := e.active(kindT); n != 1 {
				t.Fatalf("active count %d after one claim, want 1 (double-counted?)", n)
			}
			if h := e.holder("apply/acme"); h != work.Holder(kindT, it.ID) {
				t.Fatalf("lock holder %q, want the claimer", h)
			}
			if err := e.p.Heartbeat(e.ctx, c); err != nil {
				t.Fatalf("heartbeat after recovered claim: %v", err)
			}
		})
		t.Run("Heartbeat/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			c := e.claim(e.create(kindT, ""), 1)
			e.clock.Advance(time.Minute)
			e.faults.Next(m.mode)
			if err := e.p.Heartbeat(e.ctx, c); err != nil {
				t.Fatalf("heartbeat with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			if hb := e.get(kindT, c.ID).HeartbeatAt; !hb.Equal(e.clock.Now()) {
				t.Fatalf("heartbeat %v, want %v", hb, e.clock.Now())
			}
		})
		t.Run("Finish/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			c := e.claim(e.create(kindT, "apply/acme"), 1)
			e.faults.Next(m.mode)
			if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
				t.Fatalf("finish with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			if got := e.get(kindT, c.ID); got.Status != "done" || got.Active {
				t.Fatalf("finished item %+v", got)
			}
			if n, h := e.active(kindT), e.holder("apply/acme"); n != 0 || h != "" {
				t.Fatalf("after finish active %d lock %q, want 0 and free", n, h)
			}
		})
		t.Run("Checkpoint/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			c := e.claim(e.create(kindT, "apply/acme"), 1)
			e.faults.Next(m.mode)
			if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "syncing", Keep: true}); err != nil {
				t.Fatalf("checkpoint with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			got := e.get(kindT, c.ID)
			if got.Status != "syncing" || !got.Active || got.Token != c.Token || e.active(kindT) != 1 || e.holder("apply/acme") == "" {
				t.Fatalf("checkpointed item %+v active %d", got, e.active(kindT))
			}
			if err := e.p.Heartbeat(e.ctx, c); err != nil {
				t.Fatalf("heartbeat after checkpoint: %v", err)
			}
		})
		t.Run("Requeue/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			c := e.claim(e.create(kindT, "apply/acme"), 1)
			e.clock.Advance(time.Hour)
			e.faults.Next(m.mode)
			got, err := e.p.Requeue(e.ctx, e.get(kindT, c.ID), e.clock.Now().Add(-time.Minute), 3, work.StatusTimeout)
			if err != nil {
				t.Fatalf("requeue with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			if got.Status != work.StatusPending || e.get(kindT, c.ID).Status != work.StatusPending {
				t.Fatalf("requeued status %s", e.get(kindT, c.ID).Status)
			}
			if n, h := e.active(kindT), e.holder("apply/acme"); n != 0 || h != "" {
				t.Fatalf("after requeue active %d lock %q", n, h)
			}
			if err := e.p.Heartbeat(e.ctx, c); !molt.IsLostClaim(err) {
				t.Fatalf("old claim heartbeat after requeue: %v, want lost claim", err)
			}
		})
		t.Run("Update/"+m.name, func(t *testing.T) {
			e := setup(t, open)
			it := e.create(kindT, "")
			now := e.clock.Now()
			e.faults.Next(m.mode)
			_, err := e.p.Update(e.ctx, kindT, it.ID, work.Change{From: []work.Status{work.StatusPending}, To: "approved"},
				work.CreateItem{Item: work.Item{Kind: "apply2", ID: "a-" + it.ID, Status: work.StatusPending, CreatedAt: now, UpdatedAt: now, OpID: "x"}})
			if err != nil {
				t.Fatalf("update with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			if e.get(kindT, it.ID).Status != "approved" || e.get("apply2", "a-"+it.ID).Status != work.StatusPending {
				t.Fatal("update+create not both written")
			}
		})
	}

	// A store that stays down: the protocol gives up with EUNAVAILABLE, and nothing
	// was written (the claim is not taken, the slot and lock are free).
	t.Run("Unavailable", func(t *testing.T) {
		e := setup(t, open)
		it := e.create(kindT, "apply/acme")
		e.faults.Next(faults.Before, faults.Before, faults.Before)
		_, _, err := e.p.Claim(e.ctx, kindT, it.ID, 0, 1)
		wantCode(t, err, molt.EUNAVAILABLE)
		e.checkFaultsUsed()
		got := e.get(kindT, it.ID)
		if got.Status != work.StatusPending || got.Attempts != 0 || e.active(kindT) != 0 || e.holder("apply/acme") != "" {
			t.Fatalf("failed claim left state: %+v active %d lock %q", got, e.active(kindT), e.holder("apply/acme"))
		}
		// Claimed item, store down for its heartbeat: unavailable, not lost.
		c := e.claim(got, 1)
		e.faults.Next(faults.Before, faults.Before, faults.Before)
		err = e.p.Heartbeat(e.ctx, c)
		if molt.IsLostClaim(err) || molt.ErrorCode(err) != molt.EUNAVAILABLE {
			t.Fatalf("heartbeat with the store down: %v, want unavailable (not lost)", err)
		}
		if err := e.p.Heartbeat(e.ctx, c); err != nil {
			t.Fatalf("heartbeat after the store came back: %v", err)
		}
	})

	// Writes outside the protocol: a failed-before write stores nothing.
	t.Run("WorkspaceWriteBefore", func(t *testing.T) {
		e := setup(t, open)
		e.putWorkspace("acme")
		e.faults.Next(faults.Before)
		if _, err := e.s.PutFile(e.ctx, file("acme", "INSTRUCTIONS.md", "hi")); err == nil {
			t.Fatal("put file with a before fault succeeded")
		}
		e.checkFaultsUsed()
		if _, err := e.s.GetFile(e.ctx, "acme", "INSTRUCTIONS.md"); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("file written despite the fault: %v", err)
		}
	})
}

func (e *env) checkFaultsUsed() {
	e.t.Helper()
	if n := e.faults.Pending(); n != 0 {
		e.t.Fatalf("%d planned faults were not used: the adapter's writes bypass the client wrapper", n)
	}
}
