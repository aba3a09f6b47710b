package evolution

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Limits of a patch.
const (
	MaxPatchFiles      = 50   // files written plus files deleted
	MaxObservation     = 2000 // characters of a Larger observation
	MaxRationale       = 8000 // characters
	MaxScenarioText    = 8000 // characters of a test scenario's description or message
	MaxSkipReason      = 2000 // characters
	ObservationHeading = "Larger observation"
)

// Stable reasons of the parse errors (molt.Error.Reason).
const (
	ReasonPatchInvalid = "patch_invalid" // ParsePatch
	ReasonScoreMissing = "score_missing" // ParseScore: the gate's reason when no score can be read
	ReasonMergeInvalid = "merge_invalid" // ParseMerge
)

// PatchFile is one file a patch writes, with its full new content.
type PatchFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// TestScenario is what the dry-run asks the patched agent: Message is sent to it as
// a user message; Description says what a good answer shows.
type TestScenario struct {
	Description string `json:"description"`
	Message     string `json:"message"`
}

// Patch is the __evo_agent__'s answer: either a skip (SkipReason set, no files)
// or files to write and delete with a test scenario and a rationale. Either may
// carry a Larger observation.
type Patch struct {
	SkipReason   string       `json:"skip_reason,omitempty"`
	Files        []PatchFile  `json:"files,omitempty"`
	Deletes      []string     `json:"deletes,omitempty"` // always classified manual
	TestScenario TestScenario `json:"test_scenario"`
	Rationale    string       `json:"rationale,omitempty"`
	// Observation is the "## Larger observation" section (at most
	// MaxObservation characters); HasObservation is true when it is not empty.
	Observation    string `json:"observation,omitempty"`
	HasObservation bool   `json:"has_observation"`
}

// Skipped reports whether the draft proposed no change.
func (p Patch) Skipped() bool { return p.SkipReason != "" }

// Sandbox returns the patch's files as the classifier takes them (path → content).
func (p Patch) Sandbox() map[string][]byte {
	m := make(map[string][]byte, len(p.Files))
	for _, f := range p.Files {
		m[f.Path] = []byte(f.Content)
	}
	return m
}

// Paths returns the paths the patch writes or deletes, in patch order.
func (p Patch) Paths() []string {
	out := make([]string, 0, len(p.Files)+len(p.Deletes))
	for _, f := range p.Files {
		out = append(out, f.Path)
	}
	return append(out, p.Deletes...)
}

// wirePatch is the JSON the __evo_agent__ writes.
type wirePatch struct {
	SkipReason   *string       `json:"skip_reason"`
	Files        []PatchFile   `json:"files"`
	Deletes      []string      `json:"deletes"`
	TestScenario *TestScenario `json:"test_scenario"`
	Rationale    string        `json:"rationale"`
	// Observation is accepted as an alternative to the Markdown section.
	Observation string `json:"observation"`
}

// ParsePatch reads an __evo_agent__ answer: exactly one fenced ```json block (a
// bare JSON object is accepted when the answer has no fenced block at all),
// optionally followed or preceded by a "## Larger observation" section; prose
// around them is ignored. The JSON is decoded strictly (unknown keys are errors).
//
// A skip is {"skip_reason": "…"} with no files or deletes. Otherwise the patch
// needs at least one file or delete (at most MaxPatchFiles together), a
// test_scenario with a description and a message, and a rationale. Every path
// must pass workspace.ValidatePath and appear once; each content is at most
// workspace.MaxFileSize bytes. Paths of internal agents (agents/__<id>__/…) are
// accepted here; Classify marks them manual.
//
// The observation is the section's text, trimmed and cut to MaxObservation
// characters; HasObservation reports a non-empty one.
//
// Errors are EINVALID with Reason ReasonPatchInvalid and Field naming what is
// wrong ("files[2].path", "test_scenario.message", …).
func ParsePatch(text string) (Patch, error) {
	d := scanMarkdown(text)
	obs, from, to, hasObs := d.section(ObservationHeading)
	if !hasObs {
		from, to = -1, -1
	}
	outside := d.lines
	if hasObs {
		outside = append(append([]string{}, d.lines[:from]...), d.lines[to:]...)
	}
	raw, why := findJSON(strings.Join(outside, "\n"), d, from, to)
	if why != "" {
		return Patch{}, patchErr("", "the answer %s", why)
	}
	var w wirePatch
	if err := decodeStrict(raw, &w); err != nil {
		return Patch{}, patchErr("", "the patch JSON is invalid: %s", err)
	}
	p := Patch{
		Files:     w.Files,
		Deletes:   w.Deletes,
		Rationale: strings.TrimSpace(w.Rationale),
	}
	if w.TestScenario != nil {
		p.TestScenario = TestScenario{
			Description: strings.TrimSpace(w.TestScenario.Description),
			Message:     strings.TrimSpace(w.TestScenario.Message),
		}
	}
	if !hasObs {
		obs = strings.TrimSpace(w.Observation)
	}
	p.Observation = clip(obs, MaxObservation)
	p.HasObservation = p.Observation != ""

	if w.SkipReason != nil && strings.TrimSpace(*w.SkipReason) != "" {
		p.SkipReason = clip(strings.TrimSpace(*w.SkipReason), MaxSkipReason)
		if len(p.Files) > 0 || len(p.Deletes) > 0 {
			return Patch{}, patchErr("skip_reason", "a skip must not carry files or deletes")
		}
		p.TestScenario, p.Rationale = TestScenario{}, ""
		return p, nil
	}
	if err := validatePatch(p); err != nil {
		return Patch{}, err
	}
	return p, nil
}

func validatePatch(p Patch) error {
	n := len(p.Files) + len(p.Deletes)
	switch {
	case n == 0:
		return patchErr("files", "the patch has no files and no skip_reason")
	case n > MaxPatchFiles:
		return patchErr("files", "the patch touches %d files, at most %d allowed", n, MaxPatchFiles)
	}
	seen := map[string]string{}
	for i, f := range p.Files {
		field := fmt.Sprintf("files[%d]", i)
		if err := workspace.ValidatePath(f.Path); err != nil {
			return patchErr(field+".path", "%s.path: %s", field, errMessage(err))
		}
		if prev, dup := seen[f.Path]; dup {
			return patchErr(field+".path", "%s.path %q repeats %s", field, f.Path, prev)
		}
		seen[f.Path] = field
		if len(f.Content) > workspace.MaxFileSize {
			return patchErr(field+".content", "%s.content of %q is %d bytes, at most %d allowed", field, f.Path, len(f.Content), workspace.MaxFileSize)
		}
	}
	for i, path := range p.Deletes {
		field := fmt.Sprintf("deletes[%d]", i)
		if err := workspace.ValidatePath(path); err != nil {
			return patchErr(field, "%s: %s", field, errMessage(err))
		}
		if prev, dup := seen[path]; dup {
			return patchErr(field, "%s %q repeats %s", field, path, prev)
		}
		seen[path] = field
	}
	switch {
	case p.TestScenario.Description == "":
		return patchErr("test_scenario.description", "test_scenario.description is missing")
	case p.TestScenario.Message == "":
		return patchErr("test_scenario.message", "test_scenario.message is missing")
	case utf8.RuneCountInString(p.TestScenario.Description) > MaxScenarioText:
		return patchErr("test_scenario.description", "test_scenario.description is longer than %d characters", MaxScenarioText)
	case utf8.RuneCountInString(p.TestScenario.Message) > MaxScenarioText:
		return patchErr("test_scenario.message", "test_scenario.message is longer than %d characters", MaxScenarioText)
	case p.Rationale == "":
		return patchErr("rationale", "rationale is missing")
	case utf8.RuneCountInString(p.Rationale) > MaxRationale:
		return patchErr("rationale", "rationale is longer than %d characters", MaxRationale)
	}
	return nil
}

func patchErr(field, format string, args ...any) error {
	return &molt.Error{Code: molt.EINVALID, Reason: ReasonPatchInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// decodeStrict decodes one JSON object, refusing unknown keys and trailing data.
func decodeStrict(raw string, v any) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// clip trims s and cuts it to at most n characters, marking a cut with "…".
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// errMessage is the message of a *molt.Error without its code or reason.
func errMessage(err error) string {
	var e *molt.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}
