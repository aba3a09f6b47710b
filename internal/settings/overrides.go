package settings

import (
	"context"
	"encoding/json"

	"github.com/molt-dev/molt/internal/molt"
)

// Overrides are one workspace's overrides of the global settings (only the
// naming keys for now). A nil field is no override: the workspace inherits the
// global value.
type Overrides struct {
	Naming NamingOverride `json:"naming"`
}

// NamingOverride overrides the naming keys; nil inherits the global key.
type NamingOverride struct {
	Mode           *string `json:"mode"`
	TimeoutSeconds *int    `json:"timeout_seconds"`
	Model          *string `json:"model"`
}

// Clone returns a copy of o that shares no memory with it.
func (o Overrides) Clone() Overrides {
	return Overrides{Naming: NamingOverride{
		Mode: clonePtr(o.Naming.Mode), TimeoutSeconds: clonePtr(o.Naming.TimeoutSeconds), Model: clonePtr(o.Naming.Model),
	}}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func eqPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// Equal reports whether o and p override the same keys with the same values.
func (o Overrides) Equal(p Overrides) bool {
	a, b := o.Naming, p.Naming
	return eqPtr(a.Mode, b.Mode) && eqPtr(a.TimeoutSeconds, b.TimeoutSeconds) && eqPtr(a.Model, b.Model)
}

// Validate returns EINVALID naming the first overridden key out of range (the
// same rules as the global key's).
func (o Overrides) Validate() error {
	// Each key is checked on its own over valid defaults, so the error names it.
	n := Default().Naming
	n.Model = ""
	if o.Naming.Mode != nil {
		n.Mode = *o.Naming.Mode
	}
	if o.Naming.TimeoutSeconds != nil {
		n.TimeoutSeconds = *o.Naming.TimeoutSeconds
	}
	if o.Naming.Model != nil {
		n.Model = *o.Naming.Model
	}
	return n.Validate()
}

// Apply returns the effective naming settings: n with o's overridden keys.
func (o NamingOverride) Apply(n Naming) Naming {
	if o.Mode != nil {
		n.Mode = *o.Mode
	}
	if o.TimeoutSeconds != nil {
		n.TimeoutSeconds = *o.TimeoutSeconds
	}
	if o.Model != nil {
		n.Model = *o.Model
	}
	return n
}

// MergeOverrides applies a partial update to o and validates the result: a key
// absent from the patch keeps its override, a key given as null drops it (the
// workspace inherits the global value again). Unknown keys and wrong types are
// EINVALID naming the key.
func MergeOverrides(o Overrides, patch []byte) (Overrides, error) {
	// Decoding into a copy with pointers of its own overwrites only the keys
	// present in the patch and never writes through o's pointers.
	out := o.Clone()
	if err := molt.DecodeStrict(patch, &out); err != nil {
		return o, err
	}
	if err := out.Validate(); err != nil {
		return o, err
	}
	return out, nil
}

// Encode returns o as JSON.
func (o Overrides) Encode() []byte {
	b, _ := json.Marshal(o)
	return b
}

// DecodeOverrides decodes stored overrides ("" is none).
func DecodeOverrides(doc string) (Overrides, error) {
	var o Overrides
	if doc == "" {
		return o, nil
	}
	err := json.Unmarshal([]byte(doc), &o)
	return o, err
}

// WorkspaceStore keeps each workspace's Overrides with a revision: 0 while
// none were saved, one more with every write. The overrides live and die with
// their workspace: deleting it deletes them, and a workspace created again
// under its name starts with none.
type WorkspaceStore interface {
	// ReadWorkspaceSettings returns workspace ws's overrides (none when none
	// were saved) with their revision. EINVALID for a bad name, ENOTFOUND when
	// the workspace does not exist.
	ReadWorkspaceSettings(ctx context.Context, ws string) (Overrides, int64, error)
	// PutWorkspaceSettingsIf saves o as ws's overrides after Validate only if
	// their stored revision is still rev, and returns the new revision.
	// ECONFLICT with reason ReasonChanged when it moved on; ENOTFOUND when the
	// workspace does not exist (or is being deleted); EINVALID writes nothing.
	PutWorkspaceSettingsIf(ctx context.Context, ws string, o Overrides, rev int64) (int64, error)
}
