package runs

import "github.com/molt-dev/molt/internal/work"

// Statuses of an evolution run (work.KindRun; docs/architecture.md, "State
// machines"). Each says who moves a run into it and who moves it out.
const (
	// StatusPending: created by enqueue (/evo, pre-compact), or returned by the
	// tick (stale claim with attempts left), by the worker (an attempt it gave
	// back: shutdown, deadline, the model unavailable) or by a retry. Left by a
	// claim (worker on a wake-up).
	StatusPending = work.StatusPending
	// StatusRunning: claimed by the worker (pending → running, a run slot taken),
	// which heartbeats it. Left by the worker's own terminal write (awaiting
	// review, skipped, failed, approved) or give-back, or by the tick (pending or
	// timeout) when its heartbeat is stale.
	StatusRunning = work.StatusRunning
	// StatusAwaitingReview: the worker scored a patch and the gates did not pass
	// (or the level is below L2). Left by a reviewer: approve, reject, retry; an
	// auto apply that failed also brings a run back here (issue 5).
	StatusAwaitingReview work.Status = "awaiting_review"
	// StatusApproved: a reviewer approved it, or the worker auto-approved it at
	// L2/L3; either way its pending apply was created in the same write. Left by
	// the apply (applied; an auto apply's failure → awaiting_review) or by a
	// retry when its latest apply failed or timed out.
	StatusApproved work.Status = "approved"
	// StatusApplied: its apply published it (issue 5). Left by a rollback.
	StatusApplied work.Status = "applied"
	// StatusRolledBack: its apply was rolled back (issue 5). Left by a retry.
	StatusRolledBack work.Status = "rolled_back"
	// StatusRejected: a reviewer rejected it. Left by a retry.
	StatusRejected work.Status = "rejected"
	// StatusSkipped: the draft proposed no change (a skip reason). Left by a retry.
	StatusSkipped work.Status = "skipped"
	// StatusFailed: the worker gave up (invalid patch, the model refused or
	// stayed unavailable, snapshot missing, …) with a safe reason. Left by a retry.
	StatusFailed work.Status = "failed"
	// StatusTimeout: the tick found its claim stale with its attempts spent, or
	// the worker hit its own deadline on the last attempt. Left by a retry.
	StatusTimeout = work.StatusTimeout
)

// Statuses of an apply (work.KindApply) that runs look at; the apply worker
// (issue 5) owns the others.
const (
	ApplyPending work.Status = "pending"
	ApplyFailed  work.Status = "failed"
	ApplyTimeout work.Status = "timeout"
	applyApplied work.Status = "applied"
)

// KindRollback is the kind of a rollback's own work item (internal/applies,
// which names it applies.KindRollback): while it runs it holds the workspace's
// apply lock, and its Data names the apply it rolls back ({"apply": id}).
const KindRollback work.Kind = "apply_rollback"

// Who approved a run (Data.ApprovedBy, and the apply's approved_by).
const (
	ApprovedByAuto     = "auto"
	ApprovedByReviewer = "reviewer"
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
	terminalApply = []work.Status{"applied", "failed", "timeout", "rolled_back"}
)

// Statuses lists every run status, for validating a list filter.
func Statuses() []work.Status {
	return []work.Status{StatusPending, StatusRunning, StatusAwaitingReview, StatusApproved, StatusApplied,
		StatusRolledBack, StatusRejected, StatusSkipped, StatusFailed, StatusTimeout}
}
