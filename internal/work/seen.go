package work

import (
	"context"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// This file holds the verbs for writers that act on an item as they read it
// (a reviewer, the tick's retention and notice passes, a rollback), and the
// owner's patch of its own claim. Like every other verb they go through
// commit, so the bounded read-back after a lost response reaches them too.

// Edit is a change of an unclaimed item as the caller read it (UpdateSeen).
// Zero fields are left as they are.
type Edit struct {
	To           Status // "" keeps the status
	AttemptsBase *int   // e.g. a retry: attempts_base = attempts
	Data         []byte
	Reason       *string
	// ExpiresAt sets the item's expiry (zero time: clear it), as Set.ExpiresAt.
	ExpiresAt *time.Time
	// ArchivedAt sets the item's archive time (zero time: clear it), as
	// Set.ArchivedAt.
	ArchivedAt *time.Time
	// KeepUpdatedAt leaves updated_at as it was: the write is bookkeeping (an
	// archive stamp, a notice stamp, a touch), not a change of the item's state.
	KeepUpdatedAt bool
}

// seenCond is the condition "unchanged since the caller read seen": its status
// and attempts, not claimed, and its last write's op id.
func seenCond(seen Item) Cond {
	return Cond{Statuses: []Status{seen.Status}, Attempts: Ptr(seen.Attempts), Active: Ptr(false), OpID: seen.OpID}
}

// UpdateSeenOp returns the op that applies e to seen, conditional on the item
// being unchanged since it was read (status, attempts, not claimed, op id), for
// use as an extra op of another verb (a notice's stamp, a rollback's touch of
// its apply). The op's own write carries a new op id.
func (p *Protocol) UpdateSeenOp(seen Item, e Edit) UpdateItem {
	op, _ := p.updateSeenOp(seen, e)
	return op
}

func (p *Protocol) updateSeenOp(seen Item, e Edit) (UpdateItem, Item) {
	now := p.now()
	at := now
	if e.KeepUpdatedAt {
		at = seen.UpdatedAt
	}
	opID := p.IDs.NewID()
	op := UpdateItem{Kind: seen.Kind, ID: seen.ID, If: seenCond(seen),
		Set: Set{Status: e.To, AttemptsBase: e.AttemptsBase, Data: e.Data, Reason: e.Reason, ExpiresAt: e.ExpiresAt,
			ArchivedAt: e.ArchivedAt, UpdatedAt: at, OpID: opID}}
	got := seen
	got.UpdatedAt, got.OpID = at, opID
	if e.To != "" {
		got.Status = e.To
	}
	if e.AttemptsBase != nil {
		got.AttemptsBase = *e.AttemptsBase
	}
	if e.Data != nil {
		got.Data = e.Data
	}
	if e.Reason != nil {
		got.Reason = *e.Reason
	}
	if e.ExpiresAt != nil {
		got.ExpiresAt = e.ExpiresAt.Truncate(time.Second)
	}
	if e.ArchivedAt != nil {
		got.ArchivedAt = e.ArchivedAt.UTC()
	}
	return op, got
}

// UpdateSeen applies e to the item seen, as the caller read it, together with
// also, in one write conditional on the item being unchanged since (same
// status, attempts and op id, not claimed). A status-only condition (Update)
// would let a write of another between the read and this one pass, such as
// retention's archive stamp. It returns the item as written; ENOTFOUND when
// the item is gone; ECONFLICT/ReasonChanged when it changed (nothing
// written); ECONFLICT/ReasonAlsoFailed (FailedOp) when an extra op's
// condition failed; EUNAVAILABLE when the outcome stays unknown.
func (p *Protocol) UpdateSeen(ctx context.Context, seen Item, e Edit, also ...Op) (Item, error) {
	if err := ValidateKey(seen.Kind, seen.ID); err != nil {
		return Item{}, err
	}
	if seen.Active {
		return Item{}, molt.Conflict(ReasonChanged, "%s %s is claimed", seen.Kind, seen.ID)
	}
	op, got := p.updateSeenOp(seen, e)
	ops := append([]Op{op}, also...)
	if err := p.commit(ctx, seen.Kind, seen.ID, op.Set.OpID, ops); err != nil {
		return Item{}, p.seenErr(ctx, seen, ops, err, "update")
	}
	return got, nil
}

// DeleteSeen removes the item seen, as the caller read it, together with also,
// in one write conditional on the item being unchanged since (as UpdateSeen).
// Errors as UpdateSeen's; a write whose outcome was unknown is settled by
// reading the item back (gone means deleted, as Delete).
func (p *Protocol) DeleteSeen(ctx context.Context, seen Item, also ...Op) error {
	if err := ValidateKey(seen.Kind, seen.ID); err != nil {
		return err
	}
	if seen.Active {
		return molt.Conflict(ReasonChanged, "%s %s is claimed", seen.Kind, seen.ID)
	}
	ops := append([]Op{DeleteItem{Kind: seen.Kind, ID: seen.ID, If: seenCond(seen)}}, also...)
	return p.deleteOps(ctx, seen.Kind, seen.ID, ops)
}

// seenErr turns a failed commit of a seen-conditional write into the verb's
// error: the item gone, changed, or an extra op's failure.
func (p *Protocol) seenErr(ctx context.Context, seen Item, ops []Op, err error, what string) error {
	idx, ok := failedIndex(err)
	if !ok {
		return fmt.Errorf("%s %s %s: %w", what, seen.Kind, seen.ID, err)
	}
	if idx >= 1 {
		return alsoFailed(ops, idx, 1)
	}
	if p.presence(ctx, seen.Kind, seen.ID) == absent {
		return molt.NotFound("%s %s not found", seen.Kind, seen.ID)
	}
	return molt.Conflict(ReasonChanged, "%s %s changed since it was read", seen.Kind, seen.ID)
}

// CreateClaimed stores a new item already claimed by the caller, in one write:
// the item running at attempt 1 with a token and a fresh heartbeat, a slot of
// its kind's budget (budget <= 0: unlimited), its lock when it names one, and
// also. It is for work that starts at once in the request that creates it (a
// rollback), so that no other claimer can take it first. Errors: EINVALID;
// ECONFLICT with ReasonExists, ReasonBudgetFull, ReasonLocked, or
// ReasonAlsoFailed (FailedOp); EUNAVAILABLE as Claim's.
func (p *Protocol) CreateClaimed(ctx context.Context, it Item, budget int, also ...Op) (Claim, Item, error) {
	if it.ID == "" {
		it.ID = p.IDs.NewID()
	}
	shards := SlotShards(budget)
	it.SlotShard = 0
	if budget > 0 {
		it.SlotShard = firstShard(it.ID, shards)
	}
	// Refused by one shard's share of the budget, it tries the next (ClaimEach).
	for tries := 1; ; tries++ {
		c, got, err := p.createClaimed(ctx, it, budget, also...)
		if molt.ErrorReason(err) != ReasonBudgetFull || tries >= shards {
			return c, got, err
		}
		it.SlotShard = (it.SlotShard + 1) % shards
	}
}

func (p *Protocol) createClaimed(ctx context.Context, it Item, budget int, also ...Op) (Claim, Item, error) {
	now := p.now()
	it.Status, it.Active, it.Slot, it.Attempts, it.AttemptsBase = StatusRunning, true, budget > 0, 1, 0
	it.Token, it.HeartbeatAt, it.CreatedAt, it.UpdatedAt = p.IDs.NewID(), now, now, now
	it.OpID = p.IDs.NewID()
	if err := it.Validate(); err != nil {
		return Claim{}, Item{}, err
	}
	c := Claim{Kind: it.Kind, ID: it.ID, Attempts: 1, Token: it.Token, LockKey: it.LockKey, Slot: it.Slot,
		SlotShard: it.SlotShard}
	ops := []Op{CreateItem{Item: it}}
	slotIdx := -1
	if it.Slot {
		slotIdx = len(ops)
		ops = append(ops, AdjustSlots{Kind: it.Kind, Shard: it.SlotShard, Delta: 1, Max: ShardCap(budget, it.SlotShard)})
	}
	if it.LockKey != "" {
		ops = append(ops, AcquireLock{Key: it.LockKey, Holder: Holder(it.Kind, it.ID)})
	}
	base := len(ops)
	ops = append(ops, also...)
	if err := p.commit(ctx, it.Kind, it.ID, it.OpID, ops); err != nil {
		if idx, ok := failedIndex(err); ok {
			switch {
			case idx >= base:
				return Claim{}, Item{}, alsoFailed(ops, idx, base)
			case idx > 0 && idx == slotIdx:
				return Claim{}, Item{}, molt.Conflict(ReasonBudgetFull, "no free %s slot (budget %d)", it.Kind, budget)
			case idx == 0:
				return Claim{}, Item{}, molt.Conflict(ReasonExists, "%s %s exists", it.Kind, it.ID)
			default:
				return Claim{}, Item{}, molt.Conflict(ReasonLocked, "lock %s is held", it.LockKey)
			}
		}
		return Claim{}, Item{}, fmt.Errorf("create claimed %s %s: %w", it.Kind, it.ID, err)
	}
	return c, it, nil
}

// ClaimPatch is an owner's change of its claimed item that keeps its status
// and claim (Patch).
type ClaimPatch struct {
	Data   []byte  // nil keeps it
	Reason *string // nil keeps it
	// Stale clears the heartbeat, so the tick finds the claim stale at its next
	// pass and resumes or ends it (a checkpointed apply whose publish failed).
	Stale bool
}

// Patch writes cp to the claimed item, keeping its status, slot, lock and
// token; ELOSTCLAIM when the claim is no longer the caller's.
func (p *Protocol) Patch(ctx context.Context, c Claim, cp ClaimPatch) (Item, error) {
	if err := ValidateKey(c.Kind, c.ID); err != nil {
		return Item{}, err
	}
	now := p.now()
	opID := p.IDs.NewID()
	set := Set{Data: cp.Data, Reason: cp.Reason, UpdatedAt: now, OpID: opID}
	if cp.Stale {
		set.HeartbeatAt = Ptr(time.Time{})
	}
	if err := p.commit(ctx, c.Kind, c.ID, opID, []Op{UpdateItem{Kind: c.Kind, ID: c.ID, If: owned(c), Set: set}}); err != nil {
		return Item{}, p.ownedErr(c, "patch", err)
	}
	it := Item{Kind: c.Kind, ID: c.ID, LockKey: c.LockKey, Active: true, Attempts: c.Attempts, Token: c.Token,
		Data: cp.Data, UpdatedAt: now, OpID: opID}
	if cp.Reason != nil {
		it.Reason = *cp.Reason
	}
	return it, nil
}

// Abandon marks the claim of seen, as the caller read it, as stale at once
// (its heartbeat cleared; status, slot, lock and token kept), for a claimer
// known to be gone: a process that owns its store exclusively finds, at start,
// the claims of its previous incarnation (Maintainer.Recover). The executor
// then takes the claim over (Policy.Resume) or the tick moves it, without
// waiting out its timeout. ECONFLICT/ReasonChanged when the claim moved on.
func (p *Protocol) Abandon(ctx context.Context, seen Item) (Item, error) {
	if !seen.Active || seen.Token == "" {
		return Item{}, molt.Conflict(ReasonChanged, "%s %s is not claimed", seen.Kind, seen.ID)
	}
	now := p.now()
	opID := p.IDs.NewID()
	op := UpdateItem{Kind: seen.Kind, ID: seen.ID,
		If:  Cond{Statuses: []Status{seen.Status}, Attempts: Ptr(seen.Attempts), Token: seen.Token, Active: Ptr(true)},
		Set: Set{HeartbeatAt: Ptr(time.Time{}), UpdatedAt: now, OpID: opID}}
	if err := p.commit(ctx, seen.Kind, seen.ID, opID, []Op{op}); err != nil {
		if _, ok := failedIndex(err); ok {
			return Item{}, molt.Conflict(ReasonChanged, "%s %s changed since it was read", seen.Kind, seen.ID)
		}
		return Item{}, fmt.Errorf("abandon %s %s: %w", seen.Kind, seen.ID, err)
	}
	it := seen
	it.HeartbeatAt, it.UpdatedAt, it.OpID = time.Time{}, now, opID
	return it, nil
}
