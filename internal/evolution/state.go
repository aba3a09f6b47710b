package evolution

import "github.com/molt-dev/molt/internal/work"

// This file is the one home of the evolution state vocabulary: the kinds of
// work, every status of runs, applies and rollbacks with who moves an item into
// and out of it, the lock that keeps one apply per workspace, who approved a
// run, and the run → apply handoff. internal/runs and internal/applies name
// these constants (their Status* are aliases of them); nothing else spells
// them. docs/architecture.md ("State machines") draws the same tables.

// Kinds of evolution work.
const (
	// KindRun is an evolution run (internal/runs).
	KindRun = work.KindRun
	// KindApply is an evolution apply (internal/applies).
	KindApply = work.KindApply
	// KindRollback is a rollback's own work item: created already claimed by
	// the rollback request (work.Protocol.CreateClaimed), it holds the
	// workspace's apply lock while it runs; its Data names the apply.
	KindRollback work.Kind = "apply_rollback"
	// KindNotice is the pending notice of an auto apply that was applied: the
	// tick's notice pass sends its one system line and deletes it.
	KindNotice work.Kind = "apply_notice"
)

// Statuses of an evolution run (KindRun).
const (
	// RunPending: created by enqueue (/evo, pre-compact), or returned by the
	// tick (stale claim with attempts left), by the worker (an attempt it gave
	// back: shutdown, deadline, the model unavailable) or by a retry. Left by a
	// claim (the run worker on a wake-up).
	RunPending = work.StatusPending
	// RunRunning: claimed by the worker (a run slot taken), which heartbeats
	// it. Left by the worker's final write (awaiting review, skipped, failed,
	// approved, timeout) or give-back, or by the tick (pending or timeout) when
	// its heartbeat is stale.
	RunRunning = work.StatusRunning
	// RunAwaitingReview: scored, and the gates did not pass (or the level is
	// below L2). Left by a reviewer (approve, reject, retry). An auto apply that
	// failed brings its run back here (ApplyFailureSendsRunBack).
	RunAwaitingReview work.Status = "awaiting_review"
	// RunApproved: a reviewer approved it, or the worker auto-approved it at
	// L2/L3; either way its pending apply was created in the same write
	// (ApplyRequest). Left by its apply (applied; an auto apply's failure →
	// awaiting_review) or by a retry when its latest apply failed or timed out.
	RunApproved work.Status = "approved"
	// RunApplied: its apply published it, in the apply's final write. Left by
	// a rollback.
	RunApplied work.Status = "applied"
	// RunRolledBack: its apply was rolled back, in the rollback's final write.
	// Left by a retry.
	RunRolledBack work.Status = "rolled_back"
	// RunRejected: a reviewer rejected it. Left by a retry.
	RunRejected work.Status = "rejected"
	// RunSkipped: the draft proposed no change. Left by a retry.
	RunSkipped work.Status = "skipped"
	// RunFailed: the worker gave up (invalid patch, the model refused or stayed
	// unavailable, snapshot missing, …) with a safe reason. Left by a retry.
	RunFailed work.Status = "failed"
	// RunTimeout: the tick found its claim stale with its attempts spent, or
	// the worker hit its own deadline on the last attempt. Left by a retry.
	RunTimeout = work.StatusTimeout
)

// Statuses of an apply (KindApply).
const (
	// ApplyPending: created by a run's approval (reviewer or auto, in the same
	// write as the run's approved status), returned by the tick when a claim
	// went stale before the checkpoint with attempts left, or given back by the
	// worker (the model unavailable). Left by the worker's claim, which takes a
	// slot and the workspace's apply lock (ApplyLockKey) in one write.
	ApplyPending = work.StatusPending
	// ApplyRunning: claimed, in the model phases (merge, regress, preflight,
	// auto re-check). Left by the checkpoint (syncing), a failure (failed), a
	// give-back (pending), or the tick (pending, timeout).
	ApplyRunning = work.StatusRunning
	// ApplySyncing: checkpointed: the snapshot is written and publishing may
	// have started. It keeps slot and lock until it is terminal; a stale one is
	// taken over in place (work.Protocol.Takeover) and resumed at publish,
	// without any model call. Left by the final write (applied), or by the tick
	// when its retries are spent (failed).
	ApplySyncing work.Status = "syncing"
	// ApplyApplied: published; its source runs became applied in the same
	// write. Left by a rollback.
	ApplyApplied work.Status = "applied"
	// ApplyFailed: merge, regress, auto re-check or publish failed (the reason
	// in the item's Reason). Terminal.
	ApplyFailed work.Status = "failed"
	// ApplyTimeout: the tick found it stale in running with its attempts
	// spent. Terminal.
	ApplyTimeout = work.StatusTimeout
	// ApplyRolledBack: rolled back, with its source runs, in one write.
	// Terminal.
	ApplyRolledBack work.Status = "rolled_back"
)

// Statuses of a rollback item (KindRollback). It is created running
// (claimed) and ends in one of the other two, releasing the apply lock.
const (
	// RollbackRunning: created claimed by the rollback request. Left by its
	// final write (done, failed) or by the tick when its request died
	// (failed: its heartbeat went stale).
	RollbackRunning = work.StatusRunning
	// RollbackDone: the apply was rolled back. Terminal.
	RollbackDone work.Status = "done"
	// RollbackFailed: refused (its reason), or its request died. Terminal.
	RollbackFailed work.Status = "failed"
)

// Who approved a run (a run's approved_by and its apply's).
const (
	ApprovedByAuto     = "auto"
	ApprovedByReviewer = "reviewer"
)

// ApplyLockKey is the lock every apply and rollback of workspace ws holds
// while claimed: at most one of them runs (or syncs) per workspace.
func ApplyLockKey(ws string) string { return "apply/" + ws }

// ApplyRequest is the run → apply handoff: the Data of the pending apply a
// run's approval creates, in the same write that makes the run approved
// (internal/runs writes it; internal/applies reads the same keys into its
// Data and adds the rest).
type ApplyRequest struct {
	Workspace    string   `json:"workspace"`
	Runs         []string `json:"runs"`
	ApprovedBy   string   `json:"approved_by"`
	ReviewerHint string   `json:"reviewer_hint,omitempty"`
}

// ApplyFailureSendsRunBack reports where a failed apply leaves its
// still-approved source runs, decided once here: any failure of an auto apply
// (merge, regress, re-check, timeout, or a resume whose retries are spent)
// sends them back to awaiting_review in the same write, since no person
// approved them; a reviewer's apply keeps them approved (a retry is allowed).
func ApplyFailureSendsRunBack(approvedBy string) (work.Status, bool) {
	if approvedBy == ApprovedByAuto {
		return RunAwaitingReview, true
	}
	return "", false
}
