package storetest

import (
	"testing"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/work"
)

// testRelay: a claim's final write that also updates another item as the
// writer read it, on condition that no one holds that item (a supervisor
// decision relaying its request to its campaign): refused, all or nothing,
// while the other item is claimed or changed; written once when it is free,
// also when the write fails before it is applied or its answer is lost.
func testRelay(t *testing.T, open Opener) {
	e := setup(t, open)
	dec := e.create(kindT, "")
	cmp := e.create(kindT, "")
	c := e.claim(dec, 0)
	// The campaign is held by a pass: the relay, built on the campaign as read
	// now (its op id current), fails on the claim alone.
	pass := e.claim(cmp, 0)
	held := e.get(kindT, cmp.ID)
	relay := e.p.UpdateSeenOp(held, work.Edit{Data: []byte(`{"requests":1}`)})
	_, err := e.p.Transition(e.ctx, c, work.Transition{To: "relayed"}, relay)
	wantFailedOp(t, err, relay)
	if got := e.get(kindT, dec.ID); !got.Active || got.Status != work.StatusRunning {
		t.Fatalf("a refused relay ended the decision: %+v", got)
	}
	if got := e.get(kindT, cmp.ID); string(got.Data) == `{"requests":1}` {
		t.Fatal("a relay written into a held item")
	}
	if _, err := e.p.Transition(e.ctx, pass, work.Transition{To: work.StatusPending}); err != nil {
		t.Fatal(err)
	}
	// Changed since it was read (the pass's final write): refused too.
	_, err = e.p.Transition(e.ctx, c, work.Transition{To: "relayed"}, relay)
	wantFailedOp(t, err, relay)
	for _, m := range []faults.Mode{faults.Before, faults.After} {
		if m == faults.After {
			dec = e.create(kindT, "")
			c = e.claim(dec, 0)
		}
		free := e.get(kindT, cmp.ID)
		relay = e.p.UpdateSeenOp(free, work.Edit{Data: []byte(`{"requests":2}`)})
		e.faults.Next(m)
		if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "relayed"}, relay); err != nil {
			t.Fatalf("relay with a fault %v: %v", m, err)
		}
		e.checkFaultsUsed()
		got, cur := e.get(kindT, dec.ID), e.get(kindT, cmp.ID)
		if got.Active || got.Status != "relayed" || string(cur.Data) != `{"requests":2}` || cur.OpID != relay.Set.OpID {
			t.Fatalf("after the relay (fault %v): decision %+v, campaign %+v", m, got, cur)
		}
		// Written once: the same relay again meets a changed item.
		if m == faults.Before {
			dec2 := e.create(kindT, "")
			c2 := e.claim(dec2, 0)
			_, err := e.p.Transition(e.ctx, c2, work.Transition{To: "relayed"}, relay)
			wantFailedOp(t, err, relay)
			cmp = e.get(kindT, cmp.ID)
			if _, err := e.p.Transition(e.ctx, c2, work.Transition{To: "refused"}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
