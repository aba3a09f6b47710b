package work_test

import (
	"fmt"
	"testing"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// note is a CheckedOp of another package: it writes the record "note <id>"
// alone and the shared record "book <book>".
type note struct {
	book, id string
	bad      error
}

func (note) WorkOp()           {}
func (n note) Validate() error { return n.bad }
func (n note) Writes() []work.Record {
	return []work.Record{{Key: "book " + n.book, Shared: true}, {Key: "note " + n.id}}
}

// shareLock names a lock's record as shared, which its owner cannot do.
type shareLock struct{ key string }

func (shareLock) WorkOp()         {}
func (shareLock) Validate() error { return nil }
func (s shareLock) Writes() []work.Record {
	return []work.Record{{Key: "lock " + s.key, Shared: true}}
}

// unknown is an op no adapter knows.
type unknown struct{}

func (unknown) WorkOp() {}

func TestCheckCommit(t *testing.T) {
	t.Parallel()
	update := func(id string) work.Op {
		return work.UpdateItem{Kind: "job", ID: id, Set: work.Set{Reason: work.Ptr("x"), OpID: "w"}}
	}
	ops := func(n int, op func(i int) work.Op) []work.Op {
		out := make([]work.Op, n)
		for i := range out {
			out[i] = op(i)
		}
		return out
	}
	tooLarge := &molt.Error{Code: molt.ETOOLARGE, Message: "too large"}
	cases := []struct {
		name string
		ops  []work.Op
		want string // error code; "" for accepted
	}{
		{"no ops", nil, molt.EINVALID},
		{"one op", []work.Op{update("a")}, ""},
		{"MaxOps ops on distinct items", ops(work.MaxOps, func(i int) work.Op { return update(fmt.Sprint("j", i)) }), ""},
		{"MaxOps+1 ops", ops(work.MaxOps+1, func(i int) work.Op { return update(fmt.Sprint("j", i)) }), molt.EINVALID},
		{"a nil op", []work.Op{update("a"), nil}, molt.EINVALID},
		{"an unknown op", []work.Op{unknown{}}, molt.EINVALID},
		{"a malformed work op", []work.Op{work.AdjustSlots{Kind: "No Kind", Delta: 1}}, molt.EINVALID},
		{"an item created and updated", []work.Op{
			work.CreateItem{Item: work.Item{Kind: "job", ID: "a", Status: work.StatusPending}}, update("a")}, molt.EINVALID},
		{"an item updated and deleted", []work.Op{update("a"), work.DeleteItem{Kind: "job", ID: "a"}}, molt.EINVALID},
		{"the same id in two kinds", []work.Op{update("a"), work.UpdateItem{Kind: "task", ID: "a", Set: work.Set{OpID: "w"}}}, ""},
		{"a slot counter twice", []work.Op{work.AdjustSlots{Kind: "job", Delta: 1}, work.AdjustSlots{Kind: "job", Delta: -1}}, molt.EINVALID},
		{"two counters", []work.Op{work.AdjustSlots{Kind: "job", Delta: 1}, work.AdjustSlots{Kind: "task", Delta: -1}}, ""},
		{"a lock taken and released", []work.Op{work.AcquireLock{Key: "apply/a", Holder: "h"}, work.ReleaseLock{Key: "apply/a", Holder: "h"}}, molt.EINVALID},
		{"a checked op refusing itself", []work.Op{note{book: "b", id: "1", bad: molt.Invalid("x", "bad")}}, molt.EINVALID},
		{"a checked op too large", []work.Op{note{book: "b", id: "1", bad: tooLarge}}, molt.ETOOLARGE},
		{"checked ops sharing a record", []work.Op{note{book: "b", id: "1"}, note{book: "b", id: "2"}, update("a")}, ""},
		{"checked ops writing one record alone", []work.Op{note{book: "b", id: "1"}, note{book: "c", id: "1"}}, molt.EINVALID},
		{"a shared record also written alone", []work.Op{work.AcquireLock{Key: "apply/a", Holder: "h"}, shareLock{key: "apply/a"}}, molt.EINVALID},
		{"a record written alone, then shared", []work.Op{shareLock{key: "apply/a"}, work.AcquireLock{Key: "apply/a", Holder: "h"}}, molt.EINVALID},
		// MaxOps notes of one book write MaxOps+1 records.
		{"over MaxOps records", ops(work.MaxOps, func(i int) work.Op { return note{book: "b", id: fmt.Sprint(i)} }), molt.EINVALID},
		{"MaxOps records", ops(work.MaxOps-1, func(i int) work.Op { return note{book: "b", id: fmt.Sprint(i)} }), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := work.CheckCommit(c.ops)
			if got := molt.ErrorCode(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
				t.Errorf("CheckCommit = %v (code %q), want code %q", err, got, c.want)
			}
		})
	}
}

func TestValidateKind(t *testing.T) {
	t.Parallel()
	for kind, ok := range map[work.Kind]bool{
		work.KindRun: true, work.KindA2ATask: true, "k9": true,
		"": false, "Run": false, "9k": false, "a-b": false, "a/b": false,
		"abcdefghijklmnopqrstuvwxyz012345": true, "abcdefghijklmnopqrstuvwxyz0123456": false,
	} {
		err := work.ValidateKind(kind)
		if (err == nil) != ok {
			t.Errorf("ValidateKind(%q) = %v, want ok %v", kind, err, ok)
		}
		if err != nil && molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("ValidateKind(%q) = %v, want EINVALID", kind, err)
		}
		if kerr := work.ValidateKey(kind, "id-1"); (kerr == nil) != ok {
			t.Errorf("ValidateKey(%q, id-1) = %v, disagrees with ValidateKind", kind, kerr)
		}
	}
}
