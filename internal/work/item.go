package work

import (
	"regexp"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// Kind names a kind of work. Each kind has its own queue, budget and policy.
type Kind string

// The kinds of work molt runs.
const (
	KindRun     Kind = "run"      // evolution run
	KindApply   Kind = "apply"    // evolution apply
	KindTurn    Kind = "turn"     // chat turn
	KindNaming  Kind = "naming"   // chat naming job
	KindA2ATask Kind = "a2a_task" // A2A task
)

// Status is a work item's status. The protocol itself only knows StatusPending
// (claimable) and StatusRunning (what a claim makes of it); each kind adds its own
// (syncing, applied, failed, timeout, …) and moves items into them with Transition
// or Update.
type Status string

// Statuses the protocol moves items through.
const (
	// StatusPending: created, or returned by the tick or a retry; claimable.
	StatusPending Status = "pending"
	// StatusRunning: claimed by a worker (Claim), which heartbeats it; left by the
	// worker's Transition, or by the tick's Requeue when its heartbeat is stale.
	StatusRunning Status = "running"
	// StatusTimeout: the tick found it stale with its retry budget spent.
	StatusTimeout Status = "timeout"
)

// Item is one work item.
type Item struct {
	Kind      Kind
	ID        string
	Workspace string // "" when the work belongs to no workspace
	// LockKey, when set, names a lock the item holds while claimed (e.g. one apply
	// per workspace: "apply/<ws>"; one turn per session: "turn/<session>").
	LockKey string

	Status Status
	// Active is true while the item is claimed: it holds its lock, and a slot of
	// its kind's budget when Slot says so. A transition that keeps the claim
	// (running → syncing) keeps it.
	Active bool
	// Slot is true while the item's claim holds a slot of its kind's budget: set
	// by a claim under a budget (budget > 0), cleared by the release. A claim of a
	// kind without a budget writes no slot counter at all, so it is no hot key;
	// the release decrements the counter only when the item holds a slot, so a
	// budget raised or lowered while the item is claimed keeps the counter exact.
	Slot bool
	// SlotShard is the shard of the kind's slot counter that the slot is in
	// (SlotShards): written by every claim, meaningful only while Slot. An
	// item stored before counters were sharded reads 0, the unsharded counter.
	SlotShard int
	// Attempts counts claims and is never reset; AttemptsBase is Attempts at the
	// last retry, so Attempts-AttemptsBase is the budget used since.
	Attempts     int
	AttemptsBase int
	Token        string    // the current claim's token; "" when not claimed
	HeartbeatAt  time.Time // the current claim's last heartbeat
	Reason       string    // why the item is in its status (failure reason, …)
	Data         []byte    // kind-specific JSON, opaque to the store

	CreatedAt time.Time
	UpdatedAt time.Time
	OpID      string // id of the last write, for read-back after a lost response
	// ExpiresAt is when retention may delete the item (zero: never). Stores keep it
	// to the second; on DynamoDB it is the table's TTL attribute.
	ExpiresAt time.Time
	// ArchivedAt is when retention archived the item (zero: not archived). The
	// stores index terminal history by it, and by UpdatedAt while it is zero,
	// so that retention lists only what is due (ListQuery.UpdatedBy and
	// ArchivedBy) however long the history.
	ArchivedAt time.Time
}

// Used is the part of the retry budget used since the last retry.
func (it Item) Used() int { return it.Attempts - it.AttemptsBase }

// Claim is a claimer's proof of ownership, passed to every later write.
type Claim struct {
	Kind     Kind
	ID       string
	Attempts int
	Token    string
	LockKey  string // the item's lock, released when the claim ends
	Slot     bool   // the claim holds a slot of the kind's budget (Item.Slot)
	// SlotShard is the counter shard the slot is in (Item.SlotShard).
	SlotShard int
}

// Limits on what the store accepts.
const (
	MaxData  = 96 << 10 // bytes of Item.Data
	MaxIDLen = 128
)

var lockRe = regexp.MustCompile(`^[a-z][a-z0-9_]*/[A-Za-z0-9_.:-]{1,128}$`)

// validKind reports whether k matches ^[a-z][a-z0-9_]{0,31}$, and validID
// whether id matches ^[A-Za-z0-9][A-Za-z0-9_.:-]*$: by hand, as every write
// and read of the claim path checks them (a regexp match costs more than the
// rest of the check).
func validKind(k string) bool {
	if len(k) == 0 || len(k) > 32 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func validID(id string) bool {
	if len(id) == 0 || !alnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !(alnum(c) || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// ValidateKey returns EINVALID unless kind and id are well formed.
func ValidateKey(kind Kind, id string) error {
	if err := ValidateKind(kind); err != nil {
		return err
	}
	if id == "" {
		return molt.Invalid("id", "id is empty")
	}
	if len(id) > MaxIDLen || !validID(id) {
		return molt.Invalid("id", "id %q is not valid", id)
	}
	return nil
}

// Validate returns EINVALID (naming the field) or ETOOLARGE unless the item can be stored.
func (it Item) Validate() error {
	if err := ValidateKey(it.Kind, it.ID); err != nil {
		return err
	}
	if it.LockKey != "" && !lockRe.MatchString(it.LockKey) {
		return molt.Invalid("lock_key", "lock key %q is not valid", it.LockKey)
	}
	if it.Status == "" {
		return molt.Invalid("status", "status is empty")
	}
	if err := ValidateStatus(it.Status); err != nil {
		return err
	}
	if len(it.Data) > MaxData {
		return &molt.Error{Code: molt.ETOOLARGE, Field: "data", Message: "item data over the limit"}
	}
	if len(it.Reason) > MaxReason {
		return molt.Invalid("reason", "reason over %d characters", MaxReason)
	}
	if len(it.Token) > MaxTokenLen || len(it.OpID) > MaxTokenLen {
		return molt.Invalid("token", "token or op id too long")
	}
	if it.SlotShard < 0 || it.SlotShard >= MaxSlotShards {
		return molt.Invalid("slot_shard", "slot shard %d is not in [0, %d)", it.SlotShard, MaxSlotShards)
	}
	return nil
}
