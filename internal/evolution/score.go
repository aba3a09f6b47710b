package evolution

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
)

// Confidence levels of a score.
const (
	ConfidenceHigh   = "high"
	ConfidenceMedium = "medium"
	ConfidenceLow    = "low"
)

// MaxNotes bounds Score.Notes (characters).
const MaxNotes = 2000

// Score is the __score__ agent's judgement of a dry-run, each number 0–100.
type Score struct {
	Lint       int    `json:"lint"`
	Behavior   int    `json:"behavior"`
	Scope      int    `json:"scope"`
	Avg        int    `json:"avg"`
	Confidence string `json:"confidence"` // high, medium or low
	Checks     Checks `json:"checks"`
	// Notes is the scorer's optional short explanation.
	Notes string `json:"notes,omitempty"`
}

// Checks are the four yes/no checks of a score. PatchInSandbox is computed by the
// worker (the patch applied cleanly to the sandbox); the others come from the
// scorer.
type Checks struct {
	PatchInSandbox bool `json:"patchInSandbox"`
	UsedInDryRun   bool `json:"usedInDryRun"`
	Probe          bool `json:"probe"`
	ProbeLanguage  bool `json:"probeLanguage"`
}

// wireScore is the JSON the __score__ agent writes; numbers and checks are kept
// raw so their shapes can be read tolerantly.
type wireScore struct {
	Lint       json.RawMessage            `json:"lint"`
	Behavior   json.RawMessage            `json:"behavior"`
	Scope      json.RawMessage            `json:"scope"`
	Avg        json.RawMessage            `json:"avg"`
	Confidence string                     `json:"confidence"`
	Checks     map[string]json.RawMessage `json:"checks"`
	Notes      string                     `json:"notes"`
}

// ParseScore reads a __score__ answer: exactly one fenced ```json block (or a
// bare JSON object) with lint, behavior, scope and avg (integers 0–100; integral
// numbers like 85.0 and numeric strings are accepted), confidence (high, medium or
// low, any case) and checks usedInDryRun, probe and probeLanguage (booleans, or
// the words yes/no, pass/fail, valid/invalid, same/different, true/false).
// Unknown keys are ignored; a patchInSandbox check in the answer is ignored too:
// the returned Checks.PatchInSandbox is always false for the caller to set.
//
// Every error is EINVALID with Reason ReasonScoreMissing ("score_missing"), Field
// naming the missing or malformed key: the gate treats an unreadable score as no
// score.
func ParseScore(text string) (Score, error) {
	d := scanMarkdown(text)
	raw, why := findJSON(text, d, -1, -1)
	if why != "" {
		return Score{}, scoreErr("", "the score answer %s", why)
	}
	var w wireScore
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		return Score{}, scoreErr("", "the score JSON is invalid: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var s Score
	for _, f := range []struct {
		key string
		raw json.RawMessage
		dst *int
	}{{"lint", w.Lint, &s.Lint}, {"behavior", w.Behavior, &s.Behavior}, {"scope", w.Scope, &s.Scope}, {"avg", w.Avg, &s.Avg}} {
		n, err := scoreInt(f.key, f.raw)
		if err != nil {
			return Score{}, err
		}
		*f.dst = n
	}
	s.Confidence = strings.ToLower(strings.TrimSpace(w.Confidence))
	switch s.Confidence {
	case ConfidenceHigh, ConfidenceMedium, ConfidenceLow:
	case "":
		return Score{}, scoreErr("confidence", "confidence is missing")
	default:
		return Score{}, scoreErr("confidence", "confidence %q must be high, medium or low", clip(w.Confidence, 40))
	}
	if w.Checks == nil {
		return Score{}, scoreErr("checks", "checks is missing")
	}
	for _, c := range []struct {
		key string
		dst *bool
	}{{"usedInDryRun", &s.Checks.UsedInDryRun}, {"probe", &s.Checks.Probe}, {"probeLanguage", &s.Checks.ProbeLanguage}} {
		raw, ok := w.Checks[c.key]
		if !ok {
			return Score{}, scoreErr("checks."+c.key, "checks.%s is missing", c.key)
		}
		b, ok := checkBool(raw)
		if !ok {
			return Score{}, scoreErr("checks."+c.key, "checks.%s must be true or false", c.key)
		}
		*c.dst = b
	}
	s.Notes = clip(w.Notes, MaxNotes)
	return s, nil
}

func scoreInt(key string, raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, scoreErr(key, "%s is missing", key)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, scoreErr(key, "%s is not a number", key)
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		p, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, scoreErr(key, "%s is not a number", key)
		}
		f = p
	default:
		return 0, scoreErr(key, "%s is not a number", key)
	}
	if f != math.Trunc(f) {
		return 0, scoreErr(key, "%s must be a whole number", key)
	}
	if f < 0 || f > 100 {
		return 0, scoreErr(key, "%s must be between 0 and 100", key)
	}
	return int(f), nil
}

func checkBool(raw json.RawMessage) (bool, bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, false
	}
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes", "pass", "passed", "valid", "same":
			return true, true
		case "false", "no", "fail", "failed", "invalid", "different":
			return false, true
		}
	}
	return false, false
}

func scoreErr(field, format string, args ...any) error {
	return &molt.Error{Code: molt.EINVALID, Reason: ReasonScoreMissing, Field: field, Message: fmt.Sprintf(format, args...)}
}
