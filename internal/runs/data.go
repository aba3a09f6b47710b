package runs

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// Data is a run's Data (JSON, within work.MaxData): what it was enqueued from,
// the current attempt's results, who approved it and its bounded log. The
// artifacts themselves live in blobs (see Keys).
type Data struct {
	Workspace     string `json:"workspace"`
	SourceSession string `json:"source_session"`
	// SourceTurn is the compacting turn of a pre-compact run.
	SourceTurn string `json:"source_turn,omitempty"`
	Agent      string `json:"agent"`
	Trigger    string `json:"trigger"` // TriggerEvo or TriggerPreCompact
	Hint       string `json:"hint,omitempty"`
	// ReviewerHint is the reviewer's note on approval, for the apply.
	ReviewerHint string `json:"reviewer_hint,omitempty"`
	// SourceAccess is the source session's access (full, workspace, readonly),
	// or external when it ever took outside input.
	SourceAccess string          `json:"source_access"`
	Snapshot     SnapshotSummary `json:"snapshot"`
	CreatedAt    time.Time       `json:"created_at"`

	// Result is the latest attempt's outcome; nil until an attempt ends, and
	// cleared by a retry.
	Result *Result `json:"result,omitempty"`

	// ApprovedBy is who approved the latest apply (ApprovedByAuto or
	// ApprovedByReviewer); LatestApply its id; Applies every apply of the run.
	ApprovedBy  string   `json:"approved_by,omitempty"`
	LatestApply string   `json:"latest_apply,omitempty"`
	Applies     []string `json:"applies,omitempty"`

	Logs []LogEntry `json:"logs,omitempty"`
	// ArchivedAt is set when retention archived the artifacts (issue 5).
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// SnapshotSummary describes the frozen session snapshot.
type SnapshotSummary struct {
	MessageCount   int    `json:"message_count"`
	FirstUser      string `json:"first_user,omitempty"`
	FirstAssistant string `json:"first_assistant,omitempty"`
}

// Result is what an attempt found. Attempt is the claim's attempt number: the
// attempt's artifacts are under runs/<id>/attempt-<Attempt>/.
type Result struct {
	Attempt        int                `json:"attempt"`
	Patch          *PatchSummary      `json:"patch,omitempty"`
	SkipReason     string             `json:"skip_reason,omitempty"`
	Score          *evolution.Score   `json:"score,omitempty"`
	Verdict        *evolution.Verdict `json:"verdict,omitempty"`
	Observation    string             `json:"observation,omitempty"`
	HasObservation bool               `json:"has_observation"`
}

// PatchSummary is a patch without its file contents (those are in patch.json).
type PatchSummary struct {
	Files        []string               `json:"files"`
	Deletes      []string               `json:"deletes,omitempty"`
	TestScenario evolution.TestScenario `json:"test_scenario"`
	Rationale    string                 `json:"rationale"`
}

// LogEntry is one line of a run's log.
type LogEntry struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt,omitempty"`
	Msg     string    `json:"msg"`
}

// Bounds of what Data keeps.
const (
	MaxLogs       = 40   // log entries (the oldest are dropped)
	MaxLogMsg     = 300  // characters of one log entry
	MaxHint       = 4000 // characters of a hint or reviewer hint
	maxSummaryMsg = 500  // characters of a snapshot summary's first messages
	maxRationale  = 2000 // characters of a patch summary's rationale and scenario texts
)

// ParseData decodes a run's Data; EINVALID when it is not a run's.
func ParseData(b []byte) (Data, error) {
	var d Data
	if err := json.Unmarshal(b, &d); err != nil || d.Workspace == "" || d.Trigger == "" {
		return Data{}, molt.Invalid("data", "not a run's data")
	}
	return d, nil
}

// Encode returns d as JSON, within work.MaxData: when it is over, the logs are
// thinned first, then the long texts cut.
func (d Data) Encode() []byte {
	b, _ := json.Marshal(d)
	for len(b) > work.MaxData && len(d.Logs) > 0 {
		d.Logs = d.Logs[len(d.Logs)/2+1:]
		b, _ = json.Marshal(d)
	}
	if len(b) > work.MaxData && d.Result != nil {
		r := *d.Result
		if r.Verdict != nil {
			v := *r.Verdict
			v.Observation, v.Score = "", nil
			r.Verdict = &v
		}
		if r.Patch != nil {
			p := *r.Patch
			p.Rationale = clip(p.Rationale, 200)
			p.TestScenario.Description = clip(p.TestScenario.Description, 200)
			p.TestScenario.Message = clip(p.TestScenario.Message, 200)
			r.Patch = &p
		}
		d.Result = &r
		b, _ = json.Marshal(d)
	}
	return b
}

// log appends a log entry, keeping the last MaxLogs.
func (d *Data) log(at time.Time, attempt int, msg string) {
	d.Logs = append(d.Logs, LogEntry{At: at.UTC(), Attempt: attempt, Msg: clip(oneLine(msg), MaxLogMsg)})
	if len(d.Logs) > MaxLogs {
		d.Logs = d.Logs[len(d.Logs)-MaxLogs:]
	}
}

// addApply records a new apply of the run.
func (d *Data) addApply(id, approvedBy string) {
	d.LatestApply, d.ApprovedBy = id, approvedBy
	d.Applies = append(d.Applies, id)
	if len(d.Applies) > 20 {
		d.Applies = d.Applies[len(d.Applies)-20:]
	}
}

// summarizePatch returns p without file contents, texts bounded.
func summarizePatch(p evolution.Patch) *PatchSummary {
	s := &PatchSummary{Files: []string{}, Deletes: p.Deletes, Rationale: clip(p.Rationale, maxRationale),
		TestScenario: evolution.TestScenario{Description: clip(p.TestScenario.Description, maxRationale),
			Message: clip(p.TestScenario.Message, maxRationale)}}
	for _, f := range p.Files {
		s.Files = append(s.Files, f.Path)
	}
	return s
}

// ApplyData is the Data of the pending apply a run's approval creates: the
// run → apply handoff (evolution.ApplyRequest).
type ApplyData = evolution.ApplyRequest

// ApplyLockKey is the lock every apply of a workspace holds while claimed
// (evolution.ApplyLockKey).
func ApplyLockKey(ws string) string { return evolution.ApplyLockKey(ws) }

// clip trims s and cuts it to at most n characters, marking a cut with "…".
func clip(s string, n int) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// oneLine joins the lines of s with spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
