package work

import (
	"context"

	"github.com/molt-dev/molt/internal/molt"
)

// DeleteItem removes an item when If holds; like UpdateItem's, its condition
// includes that the item exists. It touches no slot counter and no lock, so only
// delete items that are not claimed (If.Active = false).
type DeleteItem struct {
	Kind Kind
	ID   string
	If   Cond
}

// WorkOp marks DeleteItem as an op of Backend.Commit.
func (DeleteItem) WorkOp() {}

// Delete removes kind/id together with also, atomically: the item must be in one
// of from, at attempts, and not claimed. It returns ENOTFOUND when the item is
// absent, ECONFLICT/ReasonChanged when it is not as described (nothing written),
// ECONFLICT/ReasonAlsoFailed when an extra op's condition failed, and
// EUNAVAILABLE when the store could not be reached and the item is known to
// still exist, or when not even a read could settle whether it was deleted. A
// write whose outcome was unknown is settled by reading the item back: gone
// means deleted.
func (p *Protocol) Delete(ctx context.Context, kind Kind, id string, from []Status, attempts int, also ...Op) error {
	if err := ValidateKey(kind, id); err != nil {
		return err
	}
	if len(from) == 0 {
		return molt.Invalid("status", "delete needs the statuses it may delete from")
	}
	ops := append([]Op{DeleteItem{Kind: kind, ID: id,
		If: Cond{Statuses: from, Attempts: Ptr(attempts), Active: Ptr(false)}}}, also...)
	return p.deleteOps(ctx, kind, id, ops)
}

// deleteOps commits ops, whose first deletes kind/id, settling an unknown
// outcome by reading the item back.
func (p *Protocol) deleteOps(ctx context.Context, kind Kind, id string, ops []Op) error {
	var last error
	for try := 0; try < p.tries(); try++ {
		err := p.Backend.Commit(ctx, ops...)
		if err == nil {
			return nil
		}
		if idx, ok := failedIndex(err); ok {
			if try > 0 {
				// An earlier try's outcome was unknown: it may have landed, its
				// response lost, and be what failed this one.
				switch p.presence(ctx, kind, id) {
				case absent:
					return nil
				case unknown:
					return molt.Unavailable(last, "delete %s %s: outcome unknown, the store could not be read back", kind, id)
				}
			}
			if idx >= 1 {
				return alsoFailed(ops, idx, 1)
			}
			if p.presence(ctx, kind, id) == absent {
				return molt.NotFound("%s %s not found", kind, id)
			}
			return molt.Conflict(ReasonChanged, "%s %s changed since it was read", kind, id)
		}
		last = err
		// Sending a delete again is safe even blind: once it has landed, its own
		// first op (the item exists) fails.
		rctx, cancel := detached(ctx)
		got := p.presence(rctx, kind, id)
		cancel()
		if got == absent {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return molt.Unavailable(last, "delete %s %s", kind, id)
}

// presence reads kind/id: absent, present or unknown.
func (p *Protocol) presence(ctx context.Context, kind Kind, id string) readBack {
	_, err := p.Backend.GetItem(ctx, kind, id)
	switch {
	case err == nil:
		return present
	case molt.ErrorCode(err) == molt.ENOTFOUND:
		return absent
	}
	return unknown
}
