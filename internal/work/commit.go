package work

import (
	"github.com/molt-dev/molt/internal/molt"
)

// MaxOps bounds one Commit: at most this many ops, writing at most this many
// records. It is DynamoDB's limit of items in one transaction; the SQLite
// adapter keeps it too, so a commit that works on one store works on the other.
const MaxOps = 100

// CheckedOp is an op another package defines (session.AppendMessage, …). It
// validates itself and names what it writes, so CheckCommit holds it to the
// rules of this package's ops.
type CheckedOp interface {
	Op
	// Validate returns EINVALID or ETOOLARGE unless the op is well formed.
	Validate() error
	// Writes names the records the op writes.
	Writes() []Record
}

// Record names one record a Commit writes: a work item, a slot counter, a lock,
// a session, a message. Key is unique across the kinds of record ("item
// run/r-1", "message s-1/4").
type Record struct {
	Key string
	// Shared: several ops of one commit may write it, and the adapter merges
	// them into one write (appends and a summary of one session advance the
	// session once). Otherwise no other op of the commit may write it.
	Shared bool
}

// CheckCommit returns EINVALID (or ETOOLARGE) unless ops may be committed
// together: at least one op and at most MaxOps, each well formed (see Validate
// and CheckedOp), no record written by two ops unless every op writing it
// shares it, and at most MaxOps records written. Every adapter calls it before
// writing anything, so they all refuse the same commits. Writing one record
// twice is refused because the adapters would disagree on it: a DynamoDB
// transaction checks every condition before any write, where SQLite applies ops
// one after the other.
func CheckCommit(ops []Op) error {
	if len(ops) == 0 {
		return molt.Invalid("ops", "commit needs at least one op")
	}
	if len(ops) > MaxOps {
		return molt.Invalid("ops", "commit of %d ops is over the limit of %d", len(ops), MaxOps)
	}
	type writer struct {
		op     int
		shared bool
	}
	seen := make(map[string]writer, len(ops))
	for i, op := range ops {
		recs, err := check(op)
		if err != nil {
			return err
		}
		for _, r := range recs {
			w, dup := seen[r.Key]
			if dup && !(w.shared && r.Shared) {
				return molt.Invalid("ops", "ops %d and %d write the same record (%s)", w.op, i, r.Key)
			}
			if !dup {
				seen[r.Key] = writer{op: i, shared: r.Shared}
			}
		}
	}
	if len(seen) > MaxOps {
		return molt.Invalid("ops", "commit writes %d records, over the limit of %d", len(seen), MaxOps)
	}
	return nil
}

// check validates op and returns the records it writes.
func check(op Op) ([]Record, error) {
	if c, ok := op.(CheckedOp); ok {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return c.Writes(), nil
	}
	if err := Validate(op); err != nil {
		return nil, err
	}
	var key string
	switch op := op.(type) {
	case CreateItem:
		key = itemRecord(op.Item.Kind, op.Item.ID)
	case UpdateItem:
		key = itemRecord(op.Kind, op.ID)
	case DeleteItem:
		key = itemRecord(op.Kind, op.ID)
	case AdjustSlots:
		key = SlotsRecord(op.Kind, op.Shard)
	case AcquireLock:
		key = "lock " + op.Key
	case ReleaseLock:
		key = "lock " + op.Key
	}
	return []Record{{Key: key}}, nil
}

func itemRecord(kind Kind, id string) string { return "item " + string(kind) + "/" + id }

// Records names the records ops write, each once, as CheckCommit counts them
// (for a store that packs independent commits into one transaction: two
// members writing one record cannot share it). Malformed ops are skipped.
func Records(ops []Op) []string {
	var keys []string
	seen := map[string]bool{}
	for _, op := range ops {
		recs, err := check(op)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if !seen[r.Key] {
				seen[r.Key] = true
				keys = append(keys, r.Key)
			}
		}
	}
	return keys
}
