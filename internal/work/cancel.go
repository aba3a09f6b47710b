package work

import (
	"context"
	"fmt"

	"github.com/molt-dev/molt/internal/molt"
)

// Cancel ends seen, as the caller read it, in status to with reason, whoever
// holds it: an unclaimed item must still be in seen's status at seen's
// attempts; a claimed one must still be held by the claim seen carries (same
// attempts and token), whose slot and lock are released in the same write. The
// claim's owner finds out at its next heartbeat (ELOSTCLAIM: its context is
// cancelled with ErrClaimLost) or at its final write, which then fails and
// writes nothing. It is how a client's cancel of an A2A task ends a turn.
//
// Errors: ECONFLICT/ReasonChanged when the item moved on since it was read
// (nothing written); ENOTFOUND when it is gone.
func (p *Protocol) Cancel(ctx context.Context, seen Item, to Status, reason string) (Item, error) {
	if err := ValidateKey(seen.Kind, seen.ID); err != nil {
		return Item{}, err
	}
	if to == "" {
		return Item{}, molt.Invalid("status", "cancel needs a target status")
	}
	now := p.now()
	opID := p.IDs.NewID()
	cond := Cond{Statuses: []Status{seen.Status}, Attempts: Ptr(seen.Attempts), Active: Ptr(seen.Active)}
	set := Set{Status: to, Reason: Ptr(reason), UpdatedAt: now, OpID: opID}
	var release []Op
	if seen.Active {
		if seen.Token == "" {
			return Item{}, molt.Conflict(ReasonChanged, "%s %s is claimed without a token", seen.Kind, seen.ID)
		}
		cond.Token = seen.Token
		set.Active, set.Slot, set.Token = Ptr(false), Ptr(false), Ptr("")
		release = releaseOps(seen)
	}
	ops := append([]Op{UpdateItem{Kind: seen.Kind, ID: seen.ID, If: cond, Set: set}}, release...)
	if err := p.commit(ctx, seen.Kind, seen.ID, opID, ops); err != nil {
		if _, ok := failedIndex(err); ok {
			if _, gerr := p.Backend.GetItem(ctx, seen.Kind, seen.ID); molt.ErrorCode(gerr) == molt.ENOTFOUND {
				return Item{}, gerr
			}
			return Item{}, molt.Conflict(ReasonChanged, "%s %s changed since it was read", seen.Kind, seen.ID)
		}
		return Item{}, fmt.Errorf("cancel %s %s: %w", seen.Kind, seen.ID, err)
	}
	it := seen
	it.Status, it.Active, it.Slot, it.Token, it.Reason, it.UpdatedAt, it.OpID = to, false, false, "", reason, now, opID
	return it, nil
}
