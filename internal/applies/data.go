package applies

import (
	"encoding/json"
	"time"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// Statuses of an apply (work.KindApply): aliases of the one vocabulary in
// internal/evolution (state.go), which says who moves an apply into each and
// out of it.
const (
	StatusPending    = evolution.ApplyPending
	StatusRunning    = evolution.ApplyRunning
	StatusSyncing    = evolution.ApplySyncing
	StatusApplied    = evolution.ApplyApplied
	StatusFailed     = evolution.ApplyFailed
	StatusTimeout    = evolution.ApplyTimeout
	StatusRolledBack = evolution.ApplyRolledBack
)

// Statuses of the runs an apply moves.
const (
	runApproved   = evolution.RunApproved
	runApplied    = evolution.RunApplied
	runRolledBack = evolution.RunRolledBack
)

// Who approved an apply's runs.
const (
	ApprovedByAuto     = evolution.ApprovedByAuto
	ApprovedByReviewer = evolution.ApprovedByReviewer
)

// Failure reasons (the item's Reason; stable prefixes before any detail).
const (
	ReasonRunMissing    = "run_missing"     // a source run or its patch is gone
	ReasonMergeFailed   = "merge_failed"    // the __apply_agent__'s answer was unusable
	ReasonRegression    = "regression"      // regression:<run>: lint or behavior under 50
	ReasonScoreMissing  = "score_missing"   // score_missing:<run>
	ReasonDryRunFailed  = "dry_run_failed"  // dry_run_failed:<run>: the agent could not run
	ReasonModel         = "model"           // model:<reason>: the model failed for good
	ReasonAutoRecheck   = "auto_recheck"    // auto_recheck:<gate reason>
	ReasonPreflight     = "preflight"       // preflight:<why>: limits, snapshot
	ReasonPublish       = "publish"         // publish:<why>
	ReasonBadData       = "bad_apply_data"  // the apply's Data is unreadable
	ReasonNothingToMake = "no_patch_files"  // no source run writes any file
	ReasonTimeout       = "timeout"         // the tick found it stale, attempts spent
	ReasonResumeFailed  = "resume_failed"   // resume_failed:<why>
	ReasonSnapshotGone  = "snapshot_broken" // the checkpointed snapshot is unreadable
)

// Data is an apply's Data. The runs helper creates it with Workspace, Runs and
// ApprovedBy (and ReviewerHint); the worker, the notice step, retention and
// rollback add the rest. Unknown keys written by others are not kept.
type Data struct {
	Workspace    string   `json:"workspace"`
	Runs         []string `json:"runs"`
	ApprovedBy   string   `json:"approved_by"`
	ReviewerHint string   `json:"reviewer_hint,omitempty"`

	// Attempt is the claim attempt whose merge and regress results are below;
	// their artifacts are under applies/<id>/attempt-<Attempt>/.
	Attempt int            `json:"attempt,omitempty"`
	Merge   *MergeSummary  `json:"merge,omitempty"`
	Regress []RegressEntry `json:"regress,omitempty"`
	// Snapshot is the rollback snapshot the checkpoint committed to.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// Published lists the files the apply effectively changed (the manifest
	// without its unchanged copies); Unchanged the byte-equal copies of global
	// files it also wrote. Set when applied.
	Published []string `json:"published,omitempty"`
	Unchanged []string `json:"unchanged,omitempty"`
	// SkippedDeletes are deletions a source patch asked for: publish never
	// deletes.
	SkippedDeletes []string `json:"skipped_deletes,omitempty"`
	// Level is the evolution level the auto re-check read.
	Level string `json:"level,omitempty"`
	// Score and Observation are the (first) source run's, for the notice and the
	// run's banner.
	Score       *evolution.Score `json:"score,omitempty"`
	Observation string           `json:"observation,omitempty"`

	FailureReason string     `json:"failure_reason,omitempty"`
	AppliedAt     *time.Time `json:"applied_at,omitempty"`
	NotifiedAt    *time.Time `json:"notified_at,omitempty"`
	ArchivedAt    *time.Time `json:"archived_at,omitempty"`
	// Rollback is what a rollback did.
	Rollback *RollbackResult `json:"rollback,omitempty"`
}

// MergeSummary is what the merge phase did.
type MergeSummary struct {
	Files       []string `json:"files"`                 // paths the merged sandbox changes
	Overlapping []string `json:"overlapping,omitempty"` // paths the __apply_agent__ merged
	Notes       string   `json:"notes,omitempty"`
}

// RegressEntry is one source run's regression score on the merged sandbox.
type RegressEntry struct {
	Run      string `json:"run"`
	Lint     int    `json:"lint"`
	Behavior int    `json:"behavior"`
	Avg      int    `json:"avg"`
	Passed   bool   `json:"passed"`
	Reason   string `json:"reason,omitempty"`
}

// SnapshotRef names the rollback snapshot the checkpoint committed to: the
// manifest's hash (the manifest at applies/<id>/MANIFEST.json must still hash to
// it) and what it holds.
type SnapshotRef struct {
	Attempt        int       `json:"attempt"`
	ManifestSHA256 string    `json:"manifest_sha256"`
	CapturedAt     time.Time `json:"captured_at"`
	Files          int       `json:"files"`
	CreatedDirs    []string  `json:"created_dirs,omitempty"`
}

// ParseData decodes an apply's Data; EINVALID when it is not an apply's.
func ParseData(b []byte) (Data, error) {
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return Data{}, molt.Invalid("data", "apply data is not JSON: %v", err)
	}
	if d.Workspace == "" || len(d.Runs) == 0 {
		return Data{}, molt.Invalid("data", "apply data needs a workspace and runs")
	}
	switch d.ApprovedBy {
	case ApprovedByAuto, ApprovedByReviewer:
	default:
		return Data{}, molt.Invalid("approved_by", "approved_by must be auto or reviewer")
	}
	return d, nil
}

// Encode returns d as JSON, within work.MaxData.
func (d Data) Encode() []byte {
	b, _ := json.Marshal(d)
	if len(b) > work.MaxData {
		// Only the lists can grow; keep the counts in the snapshot ref.
		d.Merge, d.Regress, d.Unchanged = nil, nil, nil
		if len(d.Published) > 200 {
			d.Published = d.Published[:200]
		}
		b, _ = json.Marshal(d)
	}
	return b
}

// Auto reports whether the apply was queued by the auto-apply gates.
func (d Data) Auto() bool { return d.ApprovedBy == ApprovedByAuto }
