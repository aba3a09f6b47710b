package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// testMalformedOps: every adapter refuses the same malformed commits with
// EINVALID before writing anything, so code that works on one store works on
// the other (work.CheckCommit): malformed statuses, kinds, lock keys, holders,
// tokens, op ids, messages and summaries, no ops at all, too many ops or
// records, and two ops writing one record (DynamoDB cannot write an item twice
// in one transaction, and evaluates every condition before any write, where
// SQLite would apply them one after the other). Listings and counts refuse
// malformed kinds and statuses alike.
func testMalformedOps(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "")
	now := e.clock.Now()
	long := strings.Repeat("x", 201)
	set := func(s work.Set) work.Op {
		s.UpdatedAt, s.OpID = now, "bad-write"
		return work.UpdateItem{Kind: kindT, ID: it.ID, Set: s}
	}
	cases := []struct {
		name string
		ops  []work.Op
	}{
		{"no ops", nil},
		{"create with a malformed status", []work.Op{work.CreateItem{Item: work.Item{Kind: kindT, ID: "new-1", Status: "Not Valid",
			CreatedAt: now, UpdatedAt: now, OpID: "c"}}}},
		{"set a malformed status", []work.Op{set(work.Set{Status: "Bad Status"})}},
		{"condition on an empty status", []work.Op{work.UpdateItem{Kind: kindT, ID: it.ID, If: work.Cond{Statuses: []work.Status{""}},
			Set: work.Set{Reason: work.Ptr("x"), UpdatedAt: now, OpID: "bad-write"}}}},
		{"set an overlong token", []work.Op{set(work.Set{Token: &long})}},
		{"set an overlong op id", []work.Op{work.UpdateItem{Kind: kindT, ID: it.ID, Set: work.Set{UpdatedAt: now, OpID: long}}}},
		{"condition on an overlong token", []work.Op{work.UpdateItem{Kind: kindT, ID: it.ID, If: work.Cond{Token: long},
			Set: work.Set{UpdatedAt: now, OpID: "bad-write"}}}},
		{"malformed lock key", []work.Op{work.AcquireLock{Key: "nolock", Holder: "job/x"}}},
		{"malformed lock key to release", []work.Op{work.ReleaseLock{Key: "no lock/x", Holder: "job/x"}}},
		{"overlong lock holder", []work.Op{work.AcquireLock{Key: "apply/acme", Holder: long}}},
		{"one item written twice", []work.Op{set(work.Set{Reason: work.Ptr("a")}),
			work.UpdateItem{Kind: kindT, ID: it.ID, Set: work.Set{Reason: work.Ptr("b"), UpdatedAt: now, OpID: "bad-write-2"}}}},
		{"one item created and written", []work.Op{work.CreateItem{Item: work.Item{Kind: kindT, ID: "new-2", Status: work.StatusPending,
			CreatedAt: now, UpdatedAt: now, OpID: "c"}},
			work.UpdateItem{Kind: kindT, ID: "new-2", Set: work.Set{Status: "done", UpdatedAt: now, OpID: "bad-write"}}}},
		{"one slot counter written twice", []work.Op{work.AdjustSlots{Kind: "tally", Delta: 1}, work.AdjustSlots{Kind: "tally", Delta: 1}}},
		{"one lock written twice", []work.Op{work.AcquireLock{Key: "apply/acme", Holder: "job/x"}, work.ReleaseLock{Key: "apply/acme", Holder: "job/x"}}},
		{"one message appended twice", []work.Op{
			session.AppendMessage{Message: session.Message{SessionID: "s-none", Seq: 1, Role: session.RoleUser, Text: "a", CreatedAt: now}},
			session.AppendMessage{Message: session.Message{SessionID: "s-none", Seq: 1, Role: session.RoleUser, Text: "b", CreatedAt: now}}}},
	}
	msg := func(sess string, seq int) work.Op {
		return session.AppendMessage{Message: session.Message{SessionID: sess, Seq: seq, Role: session.RoleUser, Text: "m", CreatedAt: now}}
	}
	tooMany := make([]work.Op, work.MaxOps+1)
	for i := range tooMany {
		tooMany[i] = work.AdjustSlots{Kind: work.Kind(fmt.Sprintf("tally%d", i)), Delta: 1}
	}
	// MaxOps appends to one session write MaxOps messages and the session.
	tooManyRecords := make([]work.Op, work.MaxOps)
	for i := range tooManyRecords {
		tooManyRecords[i] = msg("s-none", i+1)
	}
	cases = append(cases, []struct {
		name string
		ops  []work.Op
	}{
		{"over MaxOps ops", tooMany},
		{"over MaxOps records written", tooManyRecords},
		{"slots of a malformed kind", []work.Op{work.AdjustSlots{Kind: "Not A Kind", Delta: 1}}},
		{"a slot shard out of range", []work.Op{work.AdjustSlots{Kind: "tally", Shard: work.MaxSlotShards, Delta: 1}}},
		{"a negative slot shard", []work.Op{work.AdjustSlots{Kind: "tally", Shard: -1, Delta: 1}}},
		{"message of a malformed session id", []work.Op{msg("no session", 1)}},
		{"message seq over session.MaxSeq", []work.Op{msg("s-none", session.MaxSeq+1)}},
		{"message seq 0", []work.Op{msg("s-none", 0)}},
		{"summary with a negative seq", []work.Op{session.SetSummary{SessionID: "s-none", Summary: "x", UpToSeq: -1}}},
		{"one message appended twice among others", []work.Op{msg("s-none", 1), msg("s-none", 2), msg("s-none", 1)}},
	}...)
	for _, c := range cases {
		err := e.s.Commit(e.ctx, c.ops...)
		if molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("%s: commit = %v, want EINVALID", c.name, err)
		}
	}
	if got := e.get(kindT, it.ID); got.OpID != it.OpID {
		t.Errorf("a refused commit wrote the item: %+v", got)
	}
	for _, id := range []string{"new-1", "new-2"} {
		if _, err := e.s.GetItem(e.ctx, kindT, id); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("a refused commit created %s: %v", id, err)
		}
	}
	if n := e.active("tally"); n != 0 {
		t.Errorf("a refused commit counted slots: %d", n)
	}
	if h := e.holder("apply/acme"); h != "" {
		t.Errorf("a refused commit took a lock: %q", h)
	}
	if _, err := e.s.LockHolder(e.ctx, "not a lock"); molt.ErrorCode(err) != molt.EINVALID {
		t.Errorf("lock holder of a malformed key: %v, want EINVALID", err)
	}
	if _, err := e.s.ActiveCount(e.ctx, "Not A Kind"); molt.ErrorCode(err) != molt.EINVALID {
		t.Errorf("active count of a malformed kind: %v, want EINVALID", err)
	}
	for _, q := range []work.ListQuery{{Kind: "Not A Kind"}, {Kind: kindT, Status: "Bad Status"}} {
		if _, err := e.s.ListItems(e.ctx, q); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("list %+v: %v, want EINVALID", q, err)
		}
	}
}

// testZeroUpdatedAt: a Set without UpdatedAt stamps the store's clock (it is
// always written), the same on every adapter.
func testZeroUpdatedAt(t *testing.T, open Opener) {
	e := setup(t, open)
	it := e.create(kindT, "")
	e.clock.Advance(time.Minute)
	if err := e.s.Commit(e.ctx, work.UpdateItem{Kind: kindT, ID: it.ID, Set: work.Set{Reason: work.Ptr("x"), OpID: "no-time"}}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(kindT, it.ID); !got.UpdatedAt.Equal(e.clock.Now()) {
		t.Fatalf("updated_at %v after a write without one, want the store's now %v", got.UpdatedAt, e.clock.Now())
	}
}
