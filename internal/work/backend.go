package work

import (
	"context"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
)

// Reader is the read side of a Backend: what services hold. Every write of a
// work item goes through a Protocol.
type Reader interface {
	// GetItem reads one item with strong consistency; ENOTFOUND if absent.
	GetItem(ctx context.Context, kind Kind, id string) (Item, error)
	// ListItems lists items of one kind, newest (highest id) first, optionally only
	// those with one status.
	ListItems(ctx context.Context, q ListQuery) (page.Page[Item], error)
	// ActiveCount returns the kind's slot counter, the sum of its shards
	// (SlotShards): how many items hold a slot (Item.Slot). Claims of a kind
	// without a budget take no slot.
	ActiveCount(ctx context.Context, kind Kind) (int, error)
	// LockHolder returns who holds the lock ("kind/id"), or "" when it is free.
	LockHolder(ctx context.Context, key string) (string, error)
}

// BatchReader is a Reader that reads several items of one kind in one round
// trip, with GetItem's consistency: items[i] and errs[i] for ids[i] (ENOTFOUND
// when absent, EINVALID for a malformed id). The executor reads a batch of
// wake-ups with it when its Backend has it, and with GetItem in parallel
// otherwise (DynamoDB's adapter: strongly consistent reads one item each).
type BatchReader interface {
	GetItems(ctx context.Context, kind Kind, ids []string) (items []Item, errs []error)
}

// Backend is what a store adapter implements for the protocol: an atomic commit of
// conditional operations, a strongly consistent read, and listings. Only the
// Protocol (and the adapters' own tests) call Commit.
type Backend interface {
	Reader
	// Commit applies every op or none. When an op's condition fails it returns a
	// *ConditionFailed (possibly wrapped) naming that op and writes nothing.
	// Before writing anything it returns the error of CheckCommit: EINVALID or
	// ETOOLARGE for no ops or too many, a malformed op, or two ops writing one
	// record (an item, a slot counter, a lock, a message). Any other error means
	// the outcome is unknown: the ops may or may not have been applied (the
	// protocol reads back).
	Commit(ctx context.Context, ops ...Op) error
	// CommitEach commits each of cs as Commit would, independently of the
	// others, in as few store round trips as the store allows (on SQLite one
	// transaction, a savepoint each; on DynamoDB TransactWriteItems of members
	// that write disjoint records, within its limits). It returns one result a
	// member, errs[i] for cs[i], with Commit's meaning: nil (applied), a
	// *ConditionFailed naming the op of cs[i] that failed (nothing of cs[i]
	// written), EINVALID/ETOOLARGE (cs[i] refused before anything was sent),
	// or any other error (cs[i]'s outcome is unknown). One member's failed
	// condition or malformed op never fails another member; a round trip lost
	// in transit leaves every member it carried unknown.
	CommitEach(ctx context.Context, cs ...[]Op) []error
}

// ListQuery selects items for ListItems.
type ListQuery struct {
	Kind   Kind
	Status Status // "" for every status
	// Oldest lists oldest (lowest id) first instead, so a bounded pass over pending
	// work reaches the items that have waited longest.
	Oldest bool
	// UpdatedBy, when not zero, lists only the items of Status (which it
	// requires) that are not archived and were last updated at or before it,
	// least recently updated first (Oldest is implied). ArchivedBy likewise
	// lists the items of Status archived at or before it, earliest archived
	// first. At most one of the two. Both are index ranges on every adapter:
	// a page reads the items it returns, not the items that are not due, so
	// retention's cost does not grow with the history it keeps.
	UpdatedBy  time.Time
	ArchivedBy time.Time
	Page       page.Query
}

// Validate returns EINVALID unless the kind, and the status when set, are well
// formed, and UpdatedBy or ArchivedBy (at most one) come with a status (the
// page is checked by page.Query.Normalize).
func (q ListQuery) Validate() error {
	if err := ValidateKind(q.Kind); err != nil {
		return err
	}
	if !q.UpdatedBy.IsZero() && !q.ArchivedBy.IsZero() {
		return molt.Invalid("query", "list by update time or by archive time, not both")
	}
	if q.Status == "" {
		if !q.UpdatedBy.IsZero() || !q.ArchivedBy.IsZero() {
			return molt.Invalid("status", "a listing by update or archive time needs a status")
		}
		return nil
	}
	return ValidateStatus(q.Status)
}

// ConditionFailed reports that the condition of ops[Index] failed; nothing was written.
// Index is -1 when the backend cannot tell which op failed. Adapters set Index;
// the Protocol adds Op (the op itself) when it reports an extra op's failure.
type ConditionFailed struct {
	Index int
	Op    Op
}

func (e *ConditionFailed) Error() string {
	return fmt.Sprintf("condition of op %d failed", e.Index)
}

// Op is one conditional write inside a Commit. Adapters switch over the concrete
// types: the ones below, and those other domain packages define (session.AppendMessage, …).
type Op interface{ WorkOp() }

// CreateItem creates an item; its condition is that no item with its key exists.
type CreateItem struct{ Item Item }

// UpdateItem updates an existing item when If holds.
type UpdateItem struct {
	Kind Kind
	ID   string
	If   Cond
	Set  Set
}

// Cond is a condition on an item's current state. Zero fields are not checked,
// except that the item must exist.
type Cond struct {
	Statuses    []Status  // the status is one of these
	Attempts    *int      // attempts equals
	Token       string    // claim token equals (and is not empty)
	Active      *bool     // active equals
	StaleBefore time.Time // heartbeat is strictly before
	// OpID: the item's last write had this op id, i.e. it is unchanged since the
	// caller read it (a compare-and-swap for writers outside a claim, such as a
	// tick stamping a field of a terminal item's Data).
	OpID string
}

// Set is what an UpdateItem writes. Nil or empty fields are left unchanged, except
// OpID and UpdatedAt, which are always written.
type Set struct {
	Status       Status
	Active       *bool
	Slot         *bool // Item.Slot
	SlotShard    *int  // Item.SlotShard
	Attempts     *int
	AttemptsBase *int
	Token        *string
	HeartbeatAt  *time.Time
	Reason       *string
	Data         []byte
	// ExpiresAt, when not nil, sets the item's expiry (retention: DynamoDB's TTL
	// attribute deletes the item some time after it); a zero time clears it.
	ExpiresAt *time.Time
	// ArchivedAt, when not nil, sets the item's archive time (Item.ArchivedAt);
	// a zero time clears it.
	ArchivedAt *time.Time
	UpdatedAt  time.Time
	// KeepUpdatedAt leaves updated_at (and the indexes that follow it: the
	// change feed, the age listings) as they are: for a write that is claim
	// bookkeeping, not a change of the item (a heartbeat), so a busy claim
	// costs one small write per beat and the change feed stays quiet. It
	// excludes UpdatedAt and ArchivedAt.
	KeepUpdatedAt bool
	OpID          string
}

// AdjustSlots adds Delta to shard Shard of the kind's slot counter (0 <= Shard
// < MaxSlotShards; shard 0 is the counter as it was before sharding). When
// Delta > 0 and Max > 0 its condition is shard+Delta <= Max; when Delta < 0 it
// is shard+Delta >= 0. Each shard is its own record.
type AdjustSlots struct {
	Kind  Kind
	Shard int
	Delta int
	Max   int
}

// AcquireLock takes the lock Key for Holder; its condition is that the lock is free
// or already held by Holder.
type AcquireLock struct{ Key, Holder string }

// ReleaseLock frees the lock Key; its condition is that Holder holds it.
type ReleaseLock struct{ Key, Holder string }

func (CreateItem) WorkOp()  {}
func (UpdateItem) WorkOp()  {}
func (AdjustSlots) WorkOp() {}
func (AcquireLock) WorkOp() {}
func (ReleaseLock) WorkOp() {}

// Holder is how an item names itself as a lock holder.
func Holder(kind Kind, id string) string { return string(kind) + "/" + id }

// Ptr returns a pointer to v, for Cond and Set fields.
func Ptr[T any](v T) *T { return &v }
