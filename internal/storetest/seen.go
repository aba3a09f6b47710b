package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// kindCounter is a kind only used for its slot counter: an extra op that adds
// to it shows, by the count, whether a write was applied once, twice or not.
const kindCounter work.Kind = "counter"

func bump() work.Op { return work.AdjustSlots{Kind: kindCounter, Delta: 1} }

// failing returns an extra op on item id whose condition fails (the item is
// never in that status).
func failing(e *env, id string) work.UpdateItem {
	return work.UpdateItem{Kind: kindT, ID: id, If: work.Cond{Statuses: []work.Status{"never"}},
		Set: work.Set{Reason: work.Ptr("must not be written"), UpdatedAt: e.clock.Now(), OpID: "failing-" + id}}
}

// wantFailedOp checks that err is ReasonAlsoFailed and carries op itself.
func wantFailedOp(t *testing.T, err error, op work.Op) {
	t.Helper()
	wantReason(t, err, work.ReasonAlsoFailed)
	if got := work.FailedOp(err); !reflect.DeepEqual(got, op) {
		t.Fatalf("FailedOp = %#v, want %#v", got, op)
	}
}

func (e *env) absent(kind work.Kind, id string) {
	e.t.Helper()
	if _, err := e.s.GetItem(e.ctx, kind, id); molt.ErrorCode(err) != molt.ENOTFOUND {
		e.t.Fatalf("%s %s: %v, want not found", kind, id, err)
	}
}

// testCreateClaimed: an item created already claimed holds its slot and lock
// from its first write; a held lock, a full budget, an existing key or a
// failed extra op refuse it with nothing written; a lost response is settled
// by reading back, never reported as a failure and never applied twice.
func testCreateClaimed(t *testing.T, open Opener) {
	t.Run("Claimed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		c, it, err := e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, LockKey: "apply/acme", Workspace: "acme"}, 1)
		if err != nil {
			t.Fatalf("create claimed: %v", err)
		}
		got := e.get(kindT, c.ID)
		if got.Status != work.StatusRunning || !got.Active || got.Attempts != 1 || got.Token == "" || got.Token != c.Token ||
			got.OpID != it.OpID || !got.HeartbeatAt.Equal(e.clock.Now()) || got.Workspace != "acme" {
			t.Fatalf("created claimed item %+v, claim %+v", got, c)
		}
		if c.Attempts != 1 || c.LockKey != "apply/acme" || it.Token != c.Token {
			t.Fatalf("claim %+v item %+v", c, it)
		}
		if n, h := e.active(kindT), e.holder("apply/acme"); n != 1 || h != work.Holder(kindT, c.ID) {
			t.Fatalf("slots %d lock %q, want 1 and held by %s", n, h, c.ID)
		}
		if err := e.p.Heartbeat(e.ctx, c); err != nil {
			t.Fatalf("heartbeat of the created claim: %v", err)
		}
		if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}); err != nil {
			t.Fatalf("finish the created claim: %v", err)
		}
		if n, h := e.active(kindT), e.holder("apply/acme"); n != 0 || h != "" {
			t.Fatalf("after finish slots %d lock %q", n, h)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		first, _, err := e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, LockKey: "apply/acme"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		// The lock is held by first.
		_, _, err = e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, ID: "locked", LockKey: "apply/acme"}, 0)
		wantReason(t, err, work.ReasonLocked)
		e.absent(kindT, "locked")
		// Every slot is taken (first holds the only one).
		_, _, err = e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, ID: "full", LockKey: "apply/other"}, 1)
		wantReason(t, err, work.ReasonBudgetFull)
		e.absent(kindT, "full")
		if h := e.holder("apply/other"); h != "" {
			t.Fatalf("refused create took the lock: %q", h)
		}
		// The key is taken: the existing claim is untouched.
		_, _, err = e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, ID: first.ID}, 0)
		wantReason(t, err, work.ReasonExists)
		if got := e.get(kindT, first.ID); got.Token != first.Token || got.Attempts != 1 {
			t.Fatalf("existing item changed: %+v", got)
		}
		if n, h := e.active(kindT), e.holder("apply/acme"); n != 1 || h != work.Holder(kindT, first.ID) {
			t.Fatalf("after refusals slots %d lock %q, want 1 and first's", n, h)
		}
		// The second extra op fails: FailedOp is that op, and nothing is written
		// (no item, no slot, no lock, not the first extra op).
		note := e.create(kindT, "")
		bad := failing(e, note.ID)
		_, _, err = e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, ID: "also", LockKey: "apply/also"}, 0, bump(), bad)
		wantFailedOp(t, err, bad)
		e.absent(kindT, "also")
		if n, c, h := e.active(kindT), e.active(kindCounter), e.holder("apply/also"); n != 1 || c != 0 || h != "" {
			t.Fatalf("failed create wrote: slots %d counter %d lock %q", n, c, h)
		}
		if got := e.get(kindT, note.ID); got.OpID != note.OpID {
			t.Fatalf("failed create wrote the other item: %+v", got)
		}
	})
	for _, m := range []struct {
		name string
		mode faults.Mode
	}{{"Before", faults.Before}, {"After", faults.After}} {
		t.Run("Fault"+m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			e.faults.Next(m.mode)
			c, it, err := e.p.CreateClaimed(e.ctx, work.Item{Kind: kindT, LockKey: "apply/acme"}, 1, bump())
			if err != nil {
				t.Fatalf("create claimed with one %s fault: %v (falsely reported as failed)", m.name, err)
			}
			e.checkFaultsUsed()
			got := e.get(kindT, c.ID)
			if got.OpID != it.OpID || got.Token != c.Token || !got.Active {
				t.Fatalf("stored %+v, want the claim %+v", got, c)
			}
			if n, k, h := e.active(kindT), e.active(kindCounter), e.holder("apply/acme"); n != 1 || k != 1 || h != work.Holder(kindT, c.ID) {
				t.Fatalf("slots %d counter %d lock %q: want each written once", n, k, h)
			}
			if err := e.p.Heartbeat(e.ctx, c); err != nil {
				t.Fatalf("heartbeat after the recovered create: %v", err)
			}
		})
	}
}

// testUpdateSeen: a write conditional on the item being as read applies when
// nothing came between, and is refused (nothing written) when anything did,
// even a write that kept status and attempts.
func testUpdateSeen(t *testing.T, open Opener) {
	t.Run("Applies", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "")
		seen := e.get(kindT, it.ID)
		e.clock.Advance(time.Minute)
		expires := e.clock.Now().Add(24*time.Hour + 700*time.Millisecond)
		got, err := e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived", Data: []byte(`{"a":1}`), Reason: work.Ptr("old"),
			AttemptsBase: work.Ptr(0), ExpiresAt: &expires})
		if err != nil {
			t.Fatalf("update seen: %v", err)
		}
		now := e.get(kindT, it.ID)
		if now.Status != "archived" || string(now.Data) != `{"a":1}` || now.Reason != "old" || now.OpID != got.OpID ||
			now.OpID == seen.OpID || !now.UpdatedAt.Equal(e.clock.Now()) {
			t.Fatalf("after update seen %+v (returned %+v)", now, got)
		}
		if want := expires.Truncate(time.Second); !now.ExpiresAt.Equal(want) || !got.ExpiresAt.Equal(want) {
			t.Fatalf("expires at %v (returned %v), want %v", now.ExpiresAt, got.ExpiresAt, want)
		}
		if got.Status != now.Status || got.Reason != now.Reason || !got.UpdatedAt.Equal(now.UpdatedAt) {
			t.Fatalf("returned %+v, stored %+v", got, now)
		}
		// KeepUpdatedAt: bookkeeping keeps updated_at but is still a new version.
		e.clock.Advance(time.Minute)
		got2, err := e.p.UpdateSeen(e.ctx, now, work.Edit{Reason: work.Ptr("stamped"), ExpiresAt: &time.Time{}, KeepUpdatedAt: true})
		if err != nil {
			t.Fatal(err)
		}
		after := e.get(kindT, it.ID)
		if !after.UpdatedAt.Equal(now.UpdatedAt) || !got2.UpdatedAt.Equal(now.UpdatedAt) {
			t.Fatalf("updated_at %v (returned %v), want kept at %v", after.UpdatedAt, got2.UpdatedAt, now.UpdatedAt)
		}
		if after.OpID != got2.OpID || after.OpID == now.OpID || after.Reason != "stamped" || after.Status != "archived" {
			t.Fatalf("after the stamp %+v", after)
		}
		if !after.ExpiresAt.IsZero() {
			t.Fatalf("expiry %v, want cleared", after.ExpiresAt)
		}
		// Extra ops are written with it.
		if _, err := e.p.UpdateSeen(e.ctx, after, work.Edit{To: "done"}, bump()); err != nil {
			t.Fatal(err)
		}
		if e.get(kindT, it.ID).Status != "done" || e.active(kindCounter) != 1 {
			t.Fatal("update seen and its extra op not both written")
		}
	})
	t.Run("Changed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "")
		seen := e.get(kindT, it.ID)
		// Another writer read the same version and wrote first, keeping status
		// and attempts (a bookkeeping stamp).
		other, err := e.p.UpdateSeen(e.ctx, seen, work.Edit{Reason: work.Ptr("stamp"), KeepUpdatedAt: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived"}, bump())
		wantReason(t, err, work.ReasonChanged)
		if got := e.get(kindT, it.ID); got.OpID != other.OpID || got.Status != work.StatusPending || e.active(kindCounter) != 0 {
			t.Fatalf("refused update wrote: %+v counter %d", got, e.active(kindCounter))
		}
		err = e.p.DeleteSeen(e.ctx, seen, bump())
		wantReason(t, err, work.ReasonChanged)
		if got := e.get(kindT, it.ID); got.OpID != other.OpID || e.active(kindCounter) != 0 {
			t.Fatalf("refused delete wrote: %+v counter %d", got, e.active(kindCounter))
		}
		// Claimed since it was read: refused, the claim untouched.
		seen = e.get(kindT, it.ID)
		c := e.claim(seen, 0)
		_, err = e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived"})
		wantReason(t, err, work.ReasonChanged)
		wantReason(t, e.p.DeleteSeen(e.ctx, seen), work.ReasonChanged)
		claimed := e.get(kindT, it.ID)
		if claimed.Status != work.StatusRunning || claimed.Token != c.Token {
			t.Fatalf("refused writes touched the claim: %+v", claimed)
		}
		// An item read while claimed is refused without a write.
		_, err = e.p.UpdateSeen(e.ctx, claimed, work.Edit{To: "archived"})
		wantReason(t, err, work.ReasonChanged)
		wantReason(t, e.p.DeleteSeen(e.ctx, claimed), work.ReasonChanged)
		if got := e.get(kindT, it.ID); got.OpID != claimed.OpID {
			t.Fatalf("write on a claimed item: %+v", got)
		}
	})
	t.Run("AlsoFailed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "")
		note := e.create(kindT, "")
		seen := e.get(kindT, it.ID)
		bad := failing(e, note.ID)
		_, err := e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived"}, bump(), bad)
		wantFailedOp(t, err, bad)
		wantFailedOp(t, e.p.DeleteSeen(e.ctx, seen, bump(), bad), bad)
		if got := e.get(kindT, it.ID); got.OpID != seen.OpID || e.active(kindCounter) != 0 {
			t.Fatalf("failed extra op, yet written: %+v counter %d", got, e.active(kindCounter))
		}
		if got := e.get(kindT, note.ID); got.OpID != note.OpID {
			t.Fatalf("failing op written: %+v", got)
		}
		// The op UpdateSeenOp builds is conditional on the version too.
		stamp := e.p.UpdateSeenOp(e.get(kindT, note.ID), work.Edit{Reason: work.Ptr("noted")})
		if _, err := e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived"}, stamp); err != nil {
			t.Fatal(err)
		}
		if e.get(kindT, note.ID).Reason != "noted" || e.get(kindT, it.ID).Status != "archived" {
			t.Fatal("update seen with an UpdateSeenOp: not both written")
		}
		again := e.get(kindT, it.ID)
		_, err = e.p.UpdateSeen(e.ctx, again, work.Edit{To: "done"}, stamp) // note changed: its op fails
		wantFailedOp(t, err, stamp)
		if got := e.get(kindT, it.ID); got.OpID != again.OpID {
			t.Fatalf("written despite a stale UpdateSeenOp: %+v", got)
		}
	})
	t.Run("Deleted", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		it := e.create(kindT, "")
		seen := e.get(kindT, it.ID)
		if err := e.p.DeleteSeen(e.ctx, seen, bump()); err != nil {
			t.Fatalf("delete seen: %v", err)
		}
		e.absent(kindT, it.ID)
		if e.active(kindCounter) != 1 {
			t.Fatal("delete seen's extra op not written")
		}
		_, err := e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived"})
		wantCode(t, err, molt.ENOTFOUND)
		wantCode(t, e.p.DeleteSeen(e.ctx, seen), molt.ENOTFOUND)
		e.absent(kindT, it.ID)
	})
	for _, m := range []struct {
		name string
		mode faults.Mode
	}{{"Before", faults.Before}, {"After", faults.After}} {
		t.Run("Fault"+m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			it := e.create(kindT, "")
			seen := e.get(kindT, it.ID)
			e.faults.Next(m.mode)
			got, err := e.p.UpdateSeen(e.ctx, seen, work.Edit{To: "archived"}, bump())
			if err != nil {
				t.Fatalf("update seen with one %s fault: %v (falsely reported as failed)", m.name, err)
			}
			e.checkFaultsUsed()
			if now := e.get(kindT, it.ID); now.OpID != got.OpID || now.Status != "archived" {
				t.Fatalf("after update seen %+v, want the write %s", now, got.OpID)
			}
			if n := e.active(kindCounter); n != 1 {
				t.Fatalf("extra op applied %d times, want once", n)
			}
			e.faults.Next(m.mode)
			if err := e.p.DeleteSeen(e.ctx, e.get(kindT, it.ID), bump()); err != nil {
				t.Fatalf("delete seen with one %s fault: %v (falsely reported as failed)", m.name, err)
			}
			e.checkFaultsUsed()
			e.absent(kindT, it.ID)
			if n := e.active(kindCounter); n != 2 {
				t.Fatalf("counter %d after the delete, want 2 (each extra op once)", n)
			}
		})
	}
}

// testPatch: an owner's patch keeps status, slot, lock and token; Stale clears
// the heartbeat, so the very next tick finds the claim stale; a lost claim
// cannot patch.
func testPatch(t *testing.T, open Opener) {
	e := setup(t, open)
	rec := &recorder{}
	pol := work.Policy{Kind: kindT, Timeout: 10 * time.Minute, MaxAttempts: 3,
		Claimed: []work.Status{work.StatusRunning, "syncing"}, Resume: []work.Status{"syncing"}}
	m := &work.Maintainer{Protocol: e.p, Queue: rec, Policies: func(context.Context) ([]work.Policy, error) { return []work.Policy{pol}, nil }}

	chk := e.create(kindT, "apply/acme")
	cs := e.claim(chk, roomy)
	if _, err := e.p.Transition(e.ctx, cs, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	run := e.create(kindT, "apply/other")
	cr := e.claim(run, roomy)
	fresh := e.claim(e.create(kindT, ""), roomy)
	hb := e.clock.Now()
	e.clock.Advance(time.Minute)

	// A plain patch: data and reason, everything else kept.
	got, err := e.p.Patch(e.ctx, cs, work.ClaimPatch{Data: []byte(`{"step":2}`), Reason: work.Ptr("publishing")})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	now := e.get(kindT, chk.ID)
	if now.Status != "syncing" || !now.Active || now.Token != cs.Token || now.Attempts != 1 || now.OpID != got.OpID ||
		string(now.Data) != `{"step":2}` || now.Reason != "publishing" || !now.HeartbeatAt.Equal(hb) {
		t.Fatalf("after patch %+v", now)
	}
	if e.active(kindT) != 3 || e.holder("apply/acme") != work.Holder(kindT, chk.ID) {
		t.Fatalf("patch changed slots (%d) or lock (%q)", e.active(kindT), e.holder("apply/acme"))
	}

	// Stale, with a lost response: read back, and the heartbeat is cleared.
	e.faults.Next(faults.After)
	if _, err := e.p.Patch(e.ctx, cs, work.ClaimPatch{Reason: work.Ptr("publish failed"), Stale: true}); err != nil {
		t.Fatalf("stale patch with a lost response: %v", err)
	}
	e.checkFaultsUsed()
	if _, err := e.p.Patch(e.ctx, cr, work.ClaimPatch{Stale: true}); err != nil {
		t.Fatal(err)
	}
	now = e.get(kindT, chk.ID)
	if now.Status != "syncing" || !now.Active || now.Token != cs.Token || now.Reason != "publish failed" ||
		string(now.Data) != `{"step":2}` || !now.HeartbeatAt.Before(e.clock.Now().Add(-pol.Timeout)) {
		t.Fatalf("after stale patch %+v", now)
	}
	// The tick, with no time passed: both patched claims are stale, the fresh one is not.
	res, err := m.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 1 || res.Requeued != 1 || rec.count(chk.ID) != 1 || rec.count(run.ID) != 1 || rec.count(fresh.ID) != 0 {
		t.Fatalf("pass %+v, sent %v: want the syncing claim resumed and the running one requeued", res, rec.sent)
	}
	if got := e.get(kindT, chk.ID); got.Status != "syncing" || got.Token != cs.Token || e.holder("apply/acme") == "" {
		t.Fatalf("resumable claim moved: %+v", got)
	}
	if got := e.get(kindT, fresh.ID); got.Status != work.StatusRunning || got.Token != fresh.Token {
		t.Fatalf("fresh claim moved: %+v", got)
	}

	// The requeued claim is lost: its patch is refused and writes nothing.
	before := e.get(kindT, run.ID)
	_, err = e.p.Patch(e.ctx, cr, work.ClaimPatch{Reason: work.Ptr("late")})
	wantCode(t, err, molt.ELOSTCLAIM)
	if got := e.get(kindT, run.ID); got.OpID != before.OpID || got.Reason == "late" {
		t.Fatalf("lost claim patched: %+v", got)
	}
	// Taken over: the old owner's patch is refused too.
	c2, _, err := e.p.Takeover(e.ctx, e.get(kindT, chk.ID), e.clock.Now().Add(-pol.Timeout))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.p.Patch(e.ctx, cs, work.ClaimPatch{Stale: true})
	wantCode(t, err, molt.ELOSTCLAIM)
	if got := e.get(kindT, chk.ID); got.Token != c2.Token || !got.HeartbeatAt.Equal(e.clock.Now()) {
		t.Fatalf("old owner's patch touched the new claim: %+v", got)
	}
}

// testOwns: a read-only confirmation of a claim: nil while it is held (also
// after a checkpoint), ELOSTCLAIM once it was requeued, taken over, ended or
// deleted.
func testOwns(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "apply/acme")
	c := e.claim(it, 0)
	// It writes nothing: a planned fault is left for the next write.
	e.faults.Next(faults.Before)
	if err := e.p.Owns(e.ctx, c); err != nil {
		t.Fatalf("owns while owned: %v", err)
	}
	if n := e.faults.Pending(); n != 1 {
		t.Fatal("owns used a planned write fault: it wrote")
	}
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "syncing", Keep: true}); err != nil {
		t.Fatal(err)
	}
	e.checkFaultsUsed()
	if err := e.p.Owns(e.ctx, c); err != nil {
		t.Fatalf("owns after a checkpoint: %v", err)
	}
	// Taken over: the old claim is lost, the new one owns.
	e.clock.Advance(time.Hour)
	c2, _, err := e.p.Takeover(e.ctx, e.get(kindT, it.ID), e.clock.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.p.Owns(e.ctx, c), molt.ELOSTCLAIM)
	if err := e.p.Owns(e.ctx, c2); err != nil {
		t.Fatalf("owns of the new claim: %v", err)
	}
	// Requeued as stale: lost; claimed again by another: still lost.
	e.clock.Advance(time.Hour)
	if _, err := e.p.Requeue(e.ctx, e.get(kindT, it.ID), e.clock.Now().Add(-time.Minute), 5, work.StatusTimeout); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.p.Owns(e.ctx, c2), molt.ELOSTCLAIM)
	c3 := e.claim(e.get(kindT, it.ID), 0)
	wantCode(t, e.p.Owns(e.ctx, c2), molt.ELOSTCLAIM)
	if err := e.p.Owns(e.ctx, c3); err != nil {
		t.Fatalf("owns of the third claim: %v", err)
	}
	// Ended: lost. Deleted: lost (not "not found").
	if _, err := e.p.Transition(e.ctx, c3, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.p.Owns(e.ctx, c3), molt.ELOSTCLAIM)
	if err := e.p.DeleteSeen(e.ctx, e.get(kindT, it.ID)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.p.Owns(e.ctx, c3), molt.ELOSTCLAIM)
}
