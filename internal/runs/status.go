package runs

import (
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/work"
)

// Statuses of an evolution run (work.KindRun): aliases of the one vocabulary
// in internal/evolution (state.go), which says who moves a run into each and
// out of it.
const (
	StatusPending        = evolution.RunPending
	StatusRunning        = evolution.RunRunning
	StatusAwaitingReview = evolution.RunAwaitingReview
	StatusApproved       = evolution.RunApproved
	StatusApplied        = evolution.RunApplied
	StatusRolledBack     = evolution.RunRolledBack
	StatusRejected       = evolution.RunRejected
	StatusSkipped        = evolution.RunSkipped
	StatusFailed         = evolution.RunFailed
	StatusTimeout        = evolution.RunTimeout
)

// Statuses of an apply (work.KindApply) that runs look at.
const (
	ApplyPending = evolution.ApplyPending
	ApplyFailed  = evolution.ApplyFailed
	ApplyTimeout = evolution.ApplyTimeout
	applyApplied = evolution.ApplyApplied
)

// KindRollback is the kind of a rollback's own work item (evolution.KindRollback).
const KindRollback = evolution.KindRollback

// Who approved a run (Data.ApprovedBy, and the apply's approved_by).
const (
	ApprovedByAuto     = evolution.ApprovedByAuto
	ApprovedByReviewer = evolution.ApprovedByReviewer
)

// Triggers of a run (Data.Trigger).
const (
	TriggerEvo        = "evo"
	TriggerPreCompact = "pre_compact"
)

// Status sets of the admin operations.
var (
	// reviewable runs can be approved or rejected.
	reviewable = []work.Status{StatusAwaitingReview}
	// retryable runs can be retried (approved only when its latest apply failed
	// or timed out: checked separately).
	retryable = []work.Status{StatusAwaitingReview, StatusFailed, StatusTimeout, StatusSkipped,
		StatusRejected, StatusRolledBack, StatusApproved}
	// deletable runs can be deleted.
	deletable = []work.Status{StatusAwaitingReview, StatusApplied, StatusRolledBack, StatusRejected,
		StatusSkipped, StatusFailed, StatusTimeout}
	// terminalApply statuses of an apply that may be deleted with its run.
	terminalApply = []work.Status{evolution.ApplyApplied, evolution.ApplyFailed, evolution.ApplyTimeout, evolution.ApplyRolledBack}
)

// Statuses lists every run status, for validating a list filter.
func Statuses() []work.Status {
	return []work.Status{StatusPending, StatusRunning, StatusAwaitingReview, StatusApproved, StatusApplied,
		StatusRolledBack, StatusRejected, StatusSkipped, StatusFailed, StatusTimeout}
}
