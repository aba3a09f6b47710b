// Package settings holds molt's global settings: defaults,
// validation that names the offending key, and partial updates.
package settings

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"unicode"

	"github.com/molt-dev/molt/internal/molt"
)

// Evolution levels.
const (
	L0 = "L0" // manual /evo only
	L1 = "L1" // + pre-compact trigger
	L2 = "L2" // + auto-apply prompt changes
	L3 = "L3" // + auto-apply capability changes
)

// Settings are the global settings.
type Settings struct {
	General   General   `json:"general"`
	Evolution Evolution `json:"evolution"`
	A2A       A2A       `json:"a2a"`
	Naming    Naming    `json:"naming"`
}

// Naming modes.
const (
	NamingOnce     = "once"     // name a session once, while it has no title (the default)
	NamingAlways   = "always"   // rename after every reply, following the conversation
	NamingDisabled = "disabled" // never name automatically
)

// Naming is background chat naming: whether sessions are named after their
// replies, how long one naming job may take in all (the provider's own retries
// included), and which model names them ("" is the chat model). A workspace
// may override every key (Overrides).
type Naming struct {
	Mode           string `json:"mode"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	Model          string `json:"model,omitempty"`
}

// Bounds of naming.timeout_seconds.
const (
	MinNamingTimeout = 1
	MaxNamingTimeout = 300
)

// Validate returns EINVALID naming the first naming key out of range.
func (n Naming) Validate() error {
	switch n.Mode {
	case NamingOnce, NamingAlways, NamingDisabled:
	default:
		return molt.Invalid("naming.mode", "naming.mode must be once, always or disabled")
	}
	if n.TimeoutSeconds < MinNamingTimeout || n.TimeoutSeconds > MaxNamingTimeout {
		return molt.Invalid("naming.timeout_seconds", "naming.timeout_seconds must be between %d and %d",
			MinNamingTimeout, MaxNamingTimeout)
	}
	if len(n.Model) > 200 || strings.ContainsFunc(n.Model, unicode.IsSpace) {
		return molt.Invalid("naming.model", "naming.model must be a model name without spaces, at most 200 characters")
	}
	return nil
}

// A2A settings.
type A2A struct {
	// DefaultAgent ("ws/agent", or "") is the agent whose card the root
	// /.well-known/agent-card.json serves; unset, that address is 404.
	DefaultAgent string `json:"default_agent"`
}

var defaultAgentRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)

// General settings.
type General struct {
	Language string `json:"language"` // BCP-47; also the language of evo/score output
}

// Evolution settings.
type Evolution struct {
	Level               string   `json:"level"`
	AutoApplyThreshold  int      `json:"auto_apply_threshold"`
	MaxConcurrentRun    int      `json:"max_concurrent_run"`
	MaxConcurrentApply  int      `json:"max_concurrent_apply"`
	RunTimeoutMinutes   int      `json:"run_timeout_minutes"`
	ApplyTimeoutMinutes int      `json:"apply_timeout_minutes"`
	MaxAttempts         int      `json:"max_attempts"`
	HeartbeatSeconds    int      `json:"heartbeat_seconds"`
	Triggers            Triggers `json:"triggers"`
}

// Triggers of automatic evolution runs.
type Triggers struct {
	PreCompact bool `json:"pre_compact"`
}

// Default returns the default settings.
func Default() Settings {
	return Settings{
		General: General{Language: "en-US"},
		Evolution: Evolution{
			Level: L0, AutoApplyThreshold: 80, MaxConcurrentRun: 1, MaxConcurrentApply: 1,
			RunTimeoutMinutes: 12, ApplyTimeoutMinutes: 12, MaxAttempts: 3, HeartbeatSeconds: 60,
			Triggers: Triggers{PreCompact: true},
		},
		Naming: Naming{Mode: NamingOnce, TimeoutSeconds: 45},
	}
}

var bcp47 = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$`)

// Validate returns EINVALID naming the first key out of range (e.g.
// "evolution.max_attempts").
func (s Settings) Validate() error {
	e := s.Evolution
	ranges := []struct {
		key       string
		v, lo, hi int
	}{
		{"evolution.auto_apply_threshold", e.AutoApplyThreshold, 0, 100},
		{"evolution.max_concurrent_run", e.MaxConcurrentRun, 1, 64},
		{"evolution.max_concurrent_apply", e.MaxConcurrentApply, 1, 64},
		{"evolution.run_timeout_minutes", e.RunTimeoutMinutes, 1, 240},
		{"evolution.apply_timeout_minutes", e.ApplyTimeoutMinutes, 1, 240},
		{"evolution.max_attempts", e.MaxAttempts, 1, 20},
		{"evolution.heartbeat_seconds", e.HeartbeatSeconds, 5, 3600},
	}
	if len(s.General.Language) > 35 || !bcp47.MatchString(s.General.Language) {
		return molt.Invalid("general.language", "general.language must be a BCP-47 tag")
	}
	if d := s.A2A.DefaultAgent; d != "" && !defaultAgentRe.MatchString(d) {
		return molt.Invalid("a2a.default_agent", "a2a.default_agent must be \"workspace/agent\" or empty")
	}
	switch e.Level {
	case L0, L1, L2, L3:
	default:
		return molt.Invalid("evolution.level", "evolution.level must be L0, L1, L2 or L3")
	}
	for _, r := range ranges {
		if r.v < r.lo || r.v > r.hi {
			return molt.Invalid(r.key, "%s must be between %d and %d", r.key, r.lo, r.hi)
		}
	}
	if err := s.Naming.Validate(); err != nil {
		return err
	}
	// Heartbeats must come well within the claim timeout (at least 4 per timeout).
	if e.HeartbeatSeconds*4 > e.RunTimeoutMinutes*60 {
		return molt.Invalid("evolution.heartbeat_seconds", "evolution.heartbeat_seconds must be at most a quarter of run_timeout_minutes")
	}
	if e.HeartbeatSeconds*4 > e.ApplyTimeoutMinutes*60 {
		return molt.Invalid("evolution.heartbeat_seconds", "evolution.heartbeat_seconds must be at most a quarter of apply_timeout_minutes")
	}
	return nil
}

// Merge applies a partial update (a JSON object with any subset of the keys) to s
// and validates the result. Unknown keys and wrong types are EINVALID naming the key.
func Merge(s Settings, patch []byte) (Settings, error) {
	// Decoding into a copy overwrites only the keys present in the patch.
	out := s
	if err := molt.DecodeStrict(patch, &out); err != nil {
		return s, err
	}
	if err := out.Validate(); err != nil {
		return s, err
	}
	return out, nil
}

// Encode returns s as JSON.
func (s Settings) Encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

// ReasonChanged is the ECONFLICT reason of a conditional settings write whose
// revision is no longer the stored one: another write came first.
const ReasonChanged = "settings_changed"

// Store keeps the settings and their revision. The revision is 0 while nothing
// was saved with one and grows by one with every write, conditional or not.
type Store interface {
	// GetSettings returns the stored settings, or Default when none were saved.
	GetSettings(ctx context.Context) (Settings, error)
	// PutSettings saves settings after Validate, whatever the stored revision;
	// EINVALID writes nothing.
	PutSettings(ctx context.Context, s Settings) error
	// ReadSettings returns the stored settings (Default when none were saved)
	// with their revision.
	ReadSettings(ctx context.Context) (Settings, int64, error)
	// PutSettingsIf saves s after Validate only if the stored revision is still
	// rev, and returns the new revision. ECONFLICT with reason ReasonChanged when
	// the revision moved on; EINVALID writes nothing.
	PutSettingsIf(ctx context.Context, s Settings, rev int64) (int64, error)
}
