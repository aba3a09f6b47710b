package evolution

import (
	"github.com/molt-dev/molt/internal/settings"
)

// Source access of a run: the source session's access level, or SourceExternal
// when the session ever took input from outside (an A2A caller, a webhook).
const (
	SourceFull      = "full"
	SourceWorkspace = "workspace"
	SourceReadonly  = "readonly"
	SourceExternal  = "external"
)

// Gate names, in the order Decide checks them.
const (
	GateSource   = "source"
	GateCategory = "category"
	GateScore    = "score"
)

// Reasons a gate fails (Verdict.Reason, GateResult.Reason). A manual change's
// reason is ReasonCategoryManual followed by "<path>(<why>)", and a failed check's
// ReasonChecks followed by the check's name.
const (
	ReasonSourceAccess      = "source_access"
	ReasonSourceExternal    = "source_external"
	ReasonNoEffectiveChange = "no_effective_change"
	ReasonCategoryManual    = "category_manual:"
	ReasonLevel             = "level"
	ReasonBelowThreshold    = "below_threshold"
	ReasonConfidence        = "confidence"
	ReasonBehaviorFloor     = "behavior_floor"
	ReasonLintFloor         = "lint_floor"
	ReasonChecks            = "checks:"
	// ReasonScoreMissing ("score_missing") is shared with ParseScore's errors.
)

// Floors of the score gate.
const (
	BehaviorFloor = 70
	LintRequired  = 100
)

// GateResult is the outcome of one gate.
type GateResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Reason string `json:"reason,omitempty"`
}

// Verdict is the auto-apply decision of a run, stored with it and shown to
// reviewers. Reason is the first failing gate's reason ("" when Passed).
// Observation is not decided here: the caller copies the patch's into it.
type Verdict struct {
	Passed      bool          `json:"passed"`
	Reason      string        `json:"reason,omitempty"`
	Gates       []GateResult  `json:"gates"`
	Files       []FileVerdict `json:"files"`
	Category    Category      `json:"category,omitempty"`
	Score       *Score        `json:"score,omitempty"`
	Observation string        `json:"observation,omitempty"`
}

// Decide runs the three auto-apply gates and returns the verdict.
// Every gate is evaluated and recorded; the first that fails gives the Reason.
//
//  1. source: sourceAccess SourceFull passes; SourceExternal fails with
//     source_external; anything else with source_access.
//  2. category (files and cat as Classify returned them): no changed file →
//     no_effective_change; a manual file → category_manual:<path>(<why>) of the
//     first manual file; prompt needs level L2 or L3, capability L3, else level
//     (L0, L1 and unknown levels never auto-apply).
//  3. score: nil → score_missing; avg < threshold → below_threshold; confidence
//     not high → confidence; behavior < 70 → behavior_floor; lint ≠ 100 →
//     lint_floor; then each failed check in the order patchInSandbox,
//     usedInDryRun, probe, probeLanguage → checks:<name>.
func Decide(level string, threshold int, sourceAccess string, files []FileVerdict, cat Category, score *Score) Verdict {
	v := Verdict{Files: files, Category: cat, Score: score}
	if v.Files == nil {
		v.Files = []FileVerdict{}
	}
	v.Gates = []GateResult{
		result(GateSource, sourceGate(sourceAccess)),
		result(GateCategory, categoryGate(level, files, cat)),
		result(GateScore, scoreGate(threshold, score)),
	}
	v.Passed = true
	for _, g := range v.Gates {
		if !g.Passed {
			v.Passed, v.Reason = false, g.Reason
			break
		}
	}
	return v
}

func result(name, reason string) GateResult {
	return GateResult{Name: name, Passed: reason == "", Reason: reason}
}

func sourceGate(access string) string {
	switch access {
	case SourceFull:
		return ""
	case SourceExternal:
		return ReasonSourceExternal
	}
	return ReasonSourceAccess
}

func categoryGate(level string, files []FileVerdict, cat Category) string {
	if len(files) == 0 || cat == CategoryNone {
		return ReasonNoEffectiveChange
	}
	for _, f := range files {
		if f.Category == CategoryManual {
			return ManualReason(f)
		}
	}
	if cat == CategoryManual {
		// cat says manual but no file does: refuse rather than trust the files.
		return ReasonCategoryManual + "(category manual)"
	}
	switch level {
	case settings.L3:
		return ""
	case settings.L2:
		if cat == CategoryPrompt {
			return ""
		}
	}
	return ReasonLevel
}

// ManualReason is the category gate's reason for a manual file:
// "category_manual:<path>(<why>)".
func ManualReason(f FileVerdict) string {
	return ReasonCategoryManual + f.Path + "(" + f.Why + ")"
}

func scoreGate(threshold int, s *Score) string {
	switch {
	case s == nil:
		return ReasonScoreMissing
	case s.Avg < threshold:
		return ReasonBelowThreshold
	case s.Confidence != ConfidenceHigh:
		return ReasonConfidence
	case s.Behavior < BehaviorFloor:
		return ReasonBehaviorFloor
	case s.Lint != LintRequired:
		return ReasonLintFloor
	case !s.Checks.PatchInSandbox:
		return ReasonChecks + "patchInSandbox"
	case !s.Checks.UsedInDryRun:
		return ReasonChecks + "usedInDryRun"
	case !s.Checks.Probe:
		return ReasonChecks + "probe"
	case !s.Checks.ProbeLanguage:
		return ReasonChecks + "probeLanguage"
	}
	return ""
}
