package work

import (
	"regexp"

	"github.com/molt-dev/molt/internal/molt"
)

// Limits on the fields of ops (both adapters refuse the same ops: see Validate).
const (
	MaxTokenLen   = 200 // Claim tokens, op ids and lock holders
	MaxCondStatus = 50  // statuses in one Cond
	MaxReason     = 2000
)

var statusRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ValidateStatus returns EINVALID unless st is a status: lowercase letters,
// digits and underscores, starting with a letter, at most 32 characters.
func ValidateStatus(st Status) error {
	if !statusRe.MatchString(string(st)) {
		return molt.Invalid("status", "status %q is not valid", st)
	}
	return nil
}

// ValidateKind returns EINVALID unless kind is a kind: lowercase letters, digits
// and underscores, starting with a letter, at most 32 characters.
func ValidateKind(kind Kind) error {
	if !validKind(string(kind)) {
		return molt.Invalid("kind", "kind %q is not valid", kind)
	}
	return nil
}

// ValidateLockKey returns EINVALID unless key is a lock key ("kind/name").
func ValidateLockKey(key string) error {
	if !lockRe.MatchString(key) {
		return molt.Invalid("lock_key", "lock key %q is not valid", key)
	}
	return nil
}

// Validate returns EINVALID (or ETOOLARGE) unless op, one of this package's ops,
// is well formed; any other op is EINVALID (ops of other packages check
// themselves: see CheckedOp). CheckCommit calls it for every op of a Commit.
func Validate(op Op) error {
	switch op := op.(type) {
	case CreateItem:
		return op.Item.Validate()
	case UpdateItem:
		if err := ValidateKey(op.Kind, op.ID); err != nil {
			return err
		}
		if err := op.If.validate(); err != nil {
			return err
		}
		return op.Set.validate()
	case DeleteItem:
		if err := ValidateKey(op.Kind, op.ID); err != nil {
			return err
		}
		return op.If.validate()
	case AdjustSlots:
		if op.Shard < 0 || op.Shard >= MaxSlotShards {
			return molt.Invalid("shard", "slot shard %d is not in [0, %d)", op.Shard, MaxSlotShards)
		}
		return ValidateKind(op.Kind)
	case AcquireLock:
		return validateLock(op.Key, op.Holder)
	case ReleaseLock:
		return validateLock(op.Key, op.Holder)
	case nil:
		return molt.Invalid("ops", "nil op")
	}
	return molt.Invalid("ops", "unknown op %T", op)
}

func validateLock(key, holder string) error {
	if err := ValidateLockKey(key); err != nil {
		return err
	}
	if holder == "" || len(holder) > MaxTokenLen {
		return molt.Invalid("holder", "lock holder is empty or too long")
	}
	return nil
}

func (c Cond) validate() error {
	if len(c.Statuses) > MaxCondStatus {
		return molt.Invalid("status", "too many statuses in a condition")
	}
	for _, st := range c.Statuses {
		if err := ValidateStatus(st); err != nil {
			return err
		}
	}
	if len(c.Token) > MaxTokenLen {
		return molt.Invalid("token", "token too long")
	}
	if len(c.OpID) > MaxTokenLen {
		return molt.Invalid("op_id", "op id too long")
	}
	return nil
}

func (s Set) validate() error {
	switch {
	case s.KeepUpdatedAt && (!s.UpdatedAt.IsZero() || s.ArchivedAt != nil):
		return molt.Invalid("updated_at", "a write that keeps updated_at sets neither it nor archived_at")
	case len(s.Data) > MaxData:
		return &molt.Error{Code: molt.ETOOLARGE, Field: "data", Message: "item data over the limit"}
	case s.Reason != nil && len(*s.Reason) > MaxReason:
		return molt.Invalid("reason", "reason over %d characters", MaxReason)
	case len(s.OpID) > MaxTokenLen:
		return molt.Invalid("op_id", "op id too long")
	case s.Token != nil && len(*s.Token) > MaxTokenLen:
		return molt.Invalid("token", "token too long")
	case s.SlotShard != nil && (*s.SlotShard < 0 || *s.SlotShard >= MaxSlotShards):
		return molt.Invalid("slot_shard", "slot shard %d is not in [0, %d)", *s.SlotShard, MaxSlotShards)
	}
	if s.Status != "" {
		return ValidateStatus(s.Status)
	}
	return nil
}
