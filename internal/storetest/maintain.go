package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// recorder is a queue.Sender that records wake-ups.
type recorder struct {
	mu   sync.Mutex
	sent []queue.Message
}

func (r *recorder) Send(_ context.Context, m queue.Message) error {
	r.mu.Lock()
	r.sent = append(r.sent, m)
	r.mu.Unlock()
	return nil
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.sent {
		if m.ID == id {
			n++
		}
	}
	return n
}

// testMaintainer: the tick returns stale claims to pending (and re-sends their
// wake-up) or makes them terminal, re-sends wake-ups for old pending work, and two
// passes at once move each item once.
func testMaintainer(t *testing.T, open Opener) {
	e := setup(t, open)
	rec := &recorder{}
	pol := work.Policy{Kind: kindT, Budget: 10, Timeout: 10 * time.Minute, MaxAttempts: 2, Expired: work.StatusTimeout, ResendAfter: time.Minute}
	m := &work.Maintainer{Protocol: e.p, Queue: rec, Policies: func(context.Context) ([]work.Policy, error) { return []work.Policy{pol}, nil }}

	const stale = 6
	var retry, spent []work.Item
	for i := 0; i < stale; i++ {
		it := e.create(kindT, "")
		if i%2 == 1 { // spend one attempt already: requeue, re-claim
			e.claim(it, 10)
			e.clock.Advance(11 * time.Minute)
			if _, err := e.p.Requeue(e.ctx, e.get(kindT, it.ID), e.clock.Now().Add(-10*time.Minute), 2, work.StatusTimeout); err != nil {
				t.Fatal(err)
			}
			it = e.get(kindT, it.ID)
			spent = append(spent, it)
		} else {
			retry = append(retry, it)
		}
		e.claim(it, 10)
	}
	fresh := e.claim(e.create(kindT, ""), 10) // heartbeats on time
	waiting := e.create(kindT, "")            // pending, wake-up maybe lost
	e.clock.Advance(11 * time.Minute)
	if err := e.p.Heartbeat(e.ctx, fresh); err != nil {
		t.Fatal(err)
	}
	newPending := e.create(kindT, "") // its own wake-up was just sent

	// Two passes at once.
	var wg sync.WaitGroup
	results := make([]work.Result, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func(i int) { defer wg.Done(); results[i], errs[i] = m.RunOnce(e.ctx) }(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("pass: %v", err)
		}
	}
	requeued := results[0].Requeued + results[1].Requeued
	expired := results[0].Expired + results[1].Expired
	if requeued != len(retry) || expired != len(spent) {
		t.Fatalf("two passes requeued %d expired %d, want %d and %d (each item once)", requeued, expired, len(retry), len(spent))
	}
	for _, it := range retry {
		if got := e.get(kindT, it.ID); got.Status != work.StatusPending || got.Active {
			t.Fatalf("retryable stale item %s is %s", it.ID, got.Status)
		}
		if rec.count(it.ID) == 0 {
			t.Fatalf("no wake-up re-sent for requeued %s", it.ID)
		}
	}
	for _, it := range spent {
		if got := e.get(kindT, it.ID); got.Status != work.StatusTimeout || got.Active {
			t.Fatalf("spent stale item %s is %s", it.ID, got.Status)
		}
	}
	if got := e.get(kindT, fresh.ID); got.Status != work.StatusRunning || got.Token != fresh.Token {
		t.Fatalf("fresh claim was touched: %+v", got)
	}
	if rec.count(waiting.ID) == 0 {
		t.Fatal("no wake-up re-sent for old pending work")
	}
	if rec.count(newPending.ID) != 0 {
		t.Fatal("wake-up re-sent for work created this instant")
	}
	if n := e.active(kindT); n != 1 {
		t.Fatalf("active after passes = %d, want 1 (the fresh claim)", n)
	}
	// A further pass finds nothing stale.
	res, err := m.RunOnce(e.ctx)
	if err != nil || res.Requeued != 0 || res.Expired != 0 {
		t.Fatalf("third pass %+v %v, want nothing stale", res, err)
	}
}

// testMaintainerLimit: a pass bounded to Limit items still reaches a stale claim
// behind more than Limit fresh ones (claims outnumber Limit when a kind's budget
// is above it, unlimited, or lowered while claims are held). Listed newest first,
// the oldest item — the one most likely to be stale — would never be looked at.
func testMaintainerLimit(t *testing.T, open Opener) {
	e := setup(t, open)
	rec := &recorder{}
	pol := work.Policy{Kind: kindT, Timeout: 10 * time.Minute, MaxAttempts: 3}
	m := &work.Maintainer{Protocol: e.p, Queue: rec, Limit: 2,
		Policies: func(context.Context) ([]work.Policy, error) { return []work.Policy{pol}, nil }}
	dead := e.claim(e.create(kindT, ""), 0) // its worker died
	var live []work.Claim
	for i := 0; i < 5; i++ {
		live = append(live, e.claim(e.create(kindT, ""), 0))
	}
	e.clock.Advance(11 * time.Minute)
	for _, c := range live {
		if err := e.p.Heartbeat(e.ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	res, err := m.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, dead.ID); got.Status != work.StatusPending || res.Requeued != 1 {
		t.Fatalf("stale claim behind %d fresh ones: %s after a pass (%+v), want requeued", len(live), got.Status, res)
	}
	for _, c := range live {
		if got := e.get(kindT, c.ID); got.Status != work.StatusRunning || got.Token != c.Token {
			t.Fatalf("fresh claim %s touched: %+v", c.ID, got)
		}
	}
}

// failingQueue refuses wake-ups of one kind.
type failingQueue struct {
	recorder
	kind work.Kind
}

func (q *failingQueue) Send(ctx context.Context, m queue.Message) error {
	if m.Kind == string(q.kind) {
		return errors.New("queue unavailable")
	}
	return q.recorder.Send(ctx, m)
}

// testMaintainerKindsIndependent: one kind whose pass fails (its queue refuses
// wake-ups) does not stop the pass over the other kinds; the pass still reports
// the failure.
func testMaintainerKindsIndependent(t *testing.T, open Opener) {
	e := setup(t, open)
	const broken, other work.Kind = "broken", "other"
	q := &failingQueue{kind: broken}
	pols := []work.Policy{
		{Kind: broken, Timeout: 10 * time.Minute, MaxAttempts: 3},
		{Kind: other, Timeout: 10 * time.Minute, MaxAttempts: 3},
	}
	m := &work.Maintainer{Protocol: e.p, Queue: q,
		Policies: func(context.Context) ([]work.Policy, error) { return pols, nil }}
	e.create(broken, "") // pending, its wake-up to be re-sent
	stale := e.claim(e.create(other, ""), 0)
	waiting := e.create(other, "")
	e.clock.Advance(11 * time.Minute)
	_, err := m.RunOnce(e.ctx)
	if err == nil {
		t.Fatal("a pass whose wake-ups failed reported no error")
	}
	if got := e.get(other, stale.ID); got.Status != work.StatusPending {
		t.Fatalf("stale %s claim is %s after a pass, want requeued despite the %s kind's failure", other, got.Status, broken)
	}
	if q.count(waiting.ID) == 0 {
		t.Fatalf("no wake-up re-sent for pending %s work after the %s kind failed", other, broken)
	}
}
