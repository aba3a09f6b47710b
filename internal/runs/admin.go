package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// Stable codes of the admin refusals (ECONFLICT, 409).
const (
	CodeNotReviewable = "run_not_reviewable" // approve/reject: not awaiting review
	CodeActive        = "run_active"         // retry: pending or running; delete: pending, running or approved
	CodeNotRetryable  = "run_not_retryable"  // retry: applied (roll back first), or approved with its apply not failed
	CodeHintRequired  = "hint_required"      // retry: no new hint
	CodeApplyInFlight = "apply_in_flight"    // delete: one of its applies is not finished
	CodeWorkspaceGone = "workspace_gone"     // approve: the run's workspace was deleted
)

// List filters.
const (
	FilterAuto        = "auto"        // the latest apply was approved automatically
	FilterObservation = "observation" // the draft has a Larger observation
)

// View is a run as the admin API lists it.
type View struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Attempts is attempts - attempts_base: this round's attempts.
	Attempts      int             `json:"attempts"`
	Workspace     string          `json:"workspace"`
	SourceSession string          `json:"source_session"`
	SourceTurn    string          `json:"source_turn,omitempty"`
	Agent         string          `json:"agent"`
	Trigger       string          `json:"trigger"`
	Hint          string          `json:"hint,omitempty"`
	ReviewerHint  string          `json:"reviewer_hint,omitempty"`
	SourceAccess  string          `json:"source_access"`
	Snapshot      SnapshotSummary `json:"snapshot"`

	Patch          *PatchSummary      `json:"patch,omitempty"`
	SkipReason     string             `json:"skip_reason,omitempty"`
	Score          *evolution.Score   `json:"score,omitempty"`
	Verdict        *evolution.Verdict `json:"verdict,omitempty"`
	Observation    string             `json:"observation,omitempty"`
	HasObservation bool               `json:"has_observation"`

	ApprovedBy  string     `json:"approved_by,omitempty"`
	LatestApply string     `json:"latest_apply,omitempty"`
	ArchivedAt  *time.Time `json:"archived_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// Detail is a run as the admin API shows it alone: its view, the current
// attempt's patch.md, its log and its applies.
type Detail struct {
	View
	// Attempt is the attempt whose results are shown (its artifacts' folder).
	Attempt int    `json:"attempt,omitempty"`
	PatchMD string `json:"patch_md,omitempty"`
	// DryRun is the patched agent's answer to the test scenario, when the
	// attempt got that far.
	DryRun  *DryRun     `json:"dry_run,omitempty"`
	Logs    []LogEntry  `json:"logs"`
	Applies []ApplyView `json:"applies"`
	// AutoApply is the auto-apply banner, shown at level L2 and above: the
	// level, score and the files the run's auto apply effectively changed, or
	// the reason it was not applied automatically.
	AutoApply *AutoApplyBanner `json:"auto_apply,omitempty"`
}

// AutoApplyBanner is the auto-apply outcome of a run, for the run's detail at
// L2+. Applied is true when an auto apply of the run published it (it may have
// been rolled back since: ApplyStatus says). Otherwise Reason is why not: the
// first failing gate of the verdict, or the auto apply's own failure (e.g.
// auto_recheck:level); empty while an auto apply is still in flight.
type AutoApplyBanner struct {
	Level       string           `json:"level"`
	Applied     bool             `json:"applied"`
	Apply       string           `json:"apply,omitempty"`
	ApplyStatus string           `json:"apply_status,omitempty"`
	Score       *evolution.Score `json:"score,omitempty"`
	Files       []string         `json:"files,omitempty"`
	Reason      string           `json:"reason,omitempty"`
}

// ApplyView is one apply of a run.
type ApplyView struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	ApprovedBy string `json:"approved_by,omitempty"`
	// Published lists the files the apply effectively changed (set once applied).
	Published []string  `json:"published,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func view(it work.Item, d Data) View {
	v := View{ID: it.ID, Status: string(it.Status), Reason: it.Reason, Attempts: it.Used(),
		Workspace: d.Workspace, SourceSession: d.SourceSession, SourceTurn: d.SourceTurn, Agent: d.Agent,
		Trigger: d.Trigger, Hint: d.Hint, ReviewerHint: d.ReviewerHint, SourceAccess: d.SourceAccess,
		Snapshot: d.Snapshot, ApprovedBy: d.ApprovedBy, LatestApply: d.LatestApply, ArchivedAt: d.ArchivedAt,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
	if r := d.Result; r != nil {
		v.Patch, v.SkipReason, v.Score, v.Verdict = r.Patch, r.SkipReason, r.Score, r.Verdict
		v.Observation, v.HasObservation = r.Observation, r.HasObservation
	}
	return v
}

// ListQuery selects runs for List.
type ListQuery struct {
	Status   work.Status // "" for every status
	Archived bool        // view=archived: only archived runs (otherwise only those not archived)
	Filter   string      // "", FilterAuto or FilterObservation
	Page     page.Query
}

// maxScanPages bounds the store pages one List reads looking for matches.
const maxScanPages = 10

// List lists runs newest first. Filters that the store cannot apply (archived,
// auto, observation) are applied to what it returns, reading at most
// maxScanPages pages; the cursor continues where the scan stopped, so a page
// may hold fewer than the limit while Next is not empty. EINVALID for an unknown
// status or filter, a bad limit or cursor.
func (s *Service) List(ctx context.Context, q ListQuery) (page.Page[View], error) {
	if q.Status != "" && !slices.Contains(Statuses(), q.Status) {
		return page.Page[View]{}, molt.Invalid("status", "unknown run status %q", q.Status)
	}
	switch q.Filter {
	case "", FilterAuto, FilterObservation:
	default:
		return page.Page[View]{}, molt.Invalid("filter", "filter must be %s or %s", FilterAuto, FilterObservation)
	}
	limit, _, err := q.Page.Normalize()
	if err != nil {
		return page.Page[View]{}, err
	}
	out := page.Page[View]{Items: []View{}}
	cursor := q.Page.Cursor
	for range maxScanPages {
		pg, err := s.store.ListItems(ctx, work.ListQuery{Kind: work.KindRun, Status: q.Status,
			Page: page.Query{Cursor: cursor, Limit: page.MaxLimit}})
		if err != nil {
			return page.Page[View]{}, fmt.Errorf("list runs: %w", err)
		}
		for i, it := range pg.Items {
			d, err := ParseData(it.Data)
			if err != nil || !matches(d, q) {
				continue
			}
			out.Items = append(out.Items, view(it, d))
			if len(out.Items) == limit {
				if i < len(pg.Items)-1 || pg.Next != "" {
					out.Next = page.Cursor(it.ID)
				}
				return out, nil
			}
		}
		if pg.Next == "" {
			return out, nil
		}
		cursor = pg.Next
	}
	out.Next = cursor
	return out, nil
}

func matches(d Data, q ListQuery) bool {
	if (d.ArchivedAt != nil) != q.Archived {
		return false
	}
	switch q.Filter {
	case FilterAuto:
		return d.ApprovedBy == ApprovedByAuto
	case FilterObservation:
		return d.Result != nil && d.Result.HasObservation
	}
	return true
}

// Get returns a run's detail. ENOTFOUND when absent.
func (s *Service) Get(ctx context.Context, id string) (Detail, error) {
	it, d, err := s.get(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	det := Detail{View: view(it, d), Logs: d.Logs, Applies: []ApplyView{}}
	if det.Logs == nil {
		det.Logs = []LogEntry{}
	}
	if r := d.Result; r != nil && (r.Patch != nil || r.SkipReason != "") && d.ArchivedAt == nil {
		det.Attempt = r.Attempt
		md, err := s.blobs.Get(ctx, AttemptKey(id, r.Attempt, ArtifactPatchMD))
		switch {
		case err == nil:
			det.PatchMD = string(md)
		case molt.ErrorCode(err) != molt.ENOTFOUND:
			return Detail{}, fmt.Errorf("read patch.md of run %s: %w", id, err)
		}
		if b, err := s.blobs.Get(ctx, AttemptKey(id, r.Attempt, ArtifactDryRun)); err == nil {
			var dr DryRun
			if json.Unmarshal(b, &dr) == nil {
				det.DryRun = &dr
			}
		} else if molt.ErrorCode(err) != molt.ENOTFOUND {
			return Detail{}, fmt.Errorf("read dryrun.json of run %s: %w", id, err)
		}
	}
	for i := len(d.Applies) - 1; i >= 0; i-- {
		ap, err := s.store.GetItem(ctx, work.KindApply, d.Applies[i])
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			continue
		}
		if err != nil {
			return Detail{}, fmt.Errorf("read apply %s: %w", d.Applies[i], err)
		}
		var ad appliedData
		_ = json.Unmarshal(ap.Data, &ad)
		det.Applies = append(det.Applies, ApplyView{ID: ap.ID, Status: string(ap.Status), Reason: ap.Reason,
			ApprovedBy: ad.ApprovedBy, Published: ad.Published, CreatedAt: ap.CreatedAt, UpdatedAt: ap.UpdatedAt})
	}
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return Detail{}, fmt.Errorf("read settings: %w", err)
	}
	det.AutoApply = banner(st.Evolution.Level, d, det.Applies)
	return det, nil
}

// appliedData is the part of an apply's Data (internal/applies) the run's
// detail shows.
type appliedData struct {
	ApprovedBy string   `json:"approved_by"`
	Published  []string `json:"published"`
}

// banner is the auto-apply banner of a run at level L2 or L3 (nil below, or
// before the run has a verdict).
func banner(level string, d Data, applies []ApplyView) *AutoApplyBanner {
	if level != settings.L2 && level != settings.L3 {
		return nil
	}
	b := &AutoApplyBanner{Level: level}
	if d.Result != nil {
		b.Score = d.Result.Score
	}
	for _, ap := range applies { // newest first
		if ap.ApprovedBy != ApprovedByAuto {
			continue
		}
		b.Apply, b.ApplyStatus = ap.ID, ap.Status
		switch ap.Status {
		case "applied", "rolled_back":
			b.Applied, b.Files = true, ap.Published
		case "failed", "timeout":
			b.Reason = ap.Reason
		}
		return b
	}
	if d.Result == nil || d.Result.Verdict == nil {
		return nil
	}
	b.Reason = d.Result.Verdict.Reason
	return b
}

// Approve is a reviewer's approval: awaiting_review → approved and a pending
// apply (approved_by reviewer, with the optional reviewer hint) in one write,
// then the apply's wake-up. Errors: ENOTFOUND; ECONFLICT CodeNotReviewable;
// EINVALID for a hint over MaxHint characters.
func (s *Service) Approve(ctx context.Context, id, reviewerHint string) (View, error) {
	reviewerHint = strings.TrimSpace(reviewerHint)
	if utf8.RuneCountInString(reviewerHint) > MaxHint {
		return View{}, molt.Invalid("reviewer_hint", "reviewer_hint is over %d characters", MaxHint)
	}
	it, d, err := s.get(ctx, id)
	if err != nil {
		return View{}, err
	}
	if it.Status != StatusAwaitingReview || it.Active {
		return View{}, molt.Conflict(CodeNotReviewable, "run %s is %s; only a run awaiting review can be approved", id, it.Status)
	}
	// An apply of a workspace that is gone could only fail: refuse it here.
	if _, err := s.store.GetWorkspace(ctx, d.Workspace); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return View{}, molt.Conflict(CodeWorkspaceGone, "workspace %s of run %s no longer exists", d.Workspace, id)
		}
		return View{}, fmt.Errorf("read workspace %s: %w", d.Workspace, err)
	}
	ap, err := s.newApply(id, d, ApprovedByReviewer, reviewerHint)
	if err != nil {
		return View{}, err
	}
	d.ReviewerHint = reviewerHint
	d.addApply(ap.ID, ApprovedByReviewer)
	d.log(s.clock.Now(), 0, "approved by a reviewer; apply "+ap.ID+" queued")
	reason := ""
	got, err := s.proto.Update(ctx, work.KindRun, id, work.Change{From: reviewable, Attempts: it.Attempts,
		To: StatusApproved, Data: d.Encode(), Reason: &reason}, work.CreateItem{Item: ap})
	if err != nil {
		return View{}, s.refusal(ctx, id, err, CodeNotReviewable, "approved")
	}
	s.wake(ctx, work.KindApply, ap.ID)
	s.log.InfoContext(ctx, "run approved", slog.String("run_id", id), slog.String("apply_id", ap.ID))
	return view(got, d), nil
}

// Reject is a reviewer's rejection: awaiting_review → rejected. Errors:
// ENOTFOUND; ECONFLICT CodeNotReviewable.
func (s *Service) Reject(ctx context.Context, id string) (View, error) {
	it, d, err := s.get(ctx, id)
	if err != nil {
		return View{}, err
	}
	if it.Status != StatusAwaitingReview || it.Active {
		return View{}, molt.Conflict(CodeNotReviewable, "run %s is %s; only a run awaiting review can be rejected", id, it.Status)
	}
	d.log(s.clock.Now(), 0, "rejected by a reviewer")
	reason := "rejected"
	got, err := s.proto.Update(ctx, work.KindRun, id, work.Change{From: reviewable, Attempts: it.Attempts,
		To: StatusRejected, Data: d.Encode(), Reason: &reason})
	if err != nil {
		return View{}, s.refusal(ctx, id, err, CodeNotReviewable, "rejected")
	}
	return view(got, d), nil
}

// Retry sends a finished run back to pending with a new hint: attempts_base =
// attempts (a new round of max_attempts; attempts is never reset), the previous
// results cleared (a retry never reads an older attempt's artifacts), then its
// wake-up. Refused (ECONFLICT): CodeHintRequired without a hint; CodeActive on
// pending and running; CodeNotRetryable on applied (roll back first) and on
// approved unless its latest apply failed or timed out. ENOTFOUND; EINVALID for
// a hint over MaxHint characters.
func (s *Service) Retry(ctx context.Context, id, hint string) (View, error) {
	hint = strings.TrimSpace(hint)
	it, d, err := s.get(ctx, id)
	if err != nil {
		return View{}, err
	}
	if hint == "" {
		return View{}, molt.Conflict(CodeHintRequired, "a retry needs a new hint")
	}
	if utf8.RuneCountInString(hint) > MaxHint {
		return View{}, molt.Invalid("hint", "hint is over %d characters", MaxHint)
	}
	if err := s.retryable(ctx, it, d); err != nil {
		return View{}, err
	}
	d.Hint, d.Result = hint, nil
	d.log(s.clock.Now(), 0, "retried with a new hint (was "+string(it.Status)+")")
	reason := ""
	// Conditional on the run being exactly as read (its op id), not only on its
	// status: retention may archive a finished run (its snapshot zipped away,
	// archived_at and a TTL set) between the read and this write, and the
	// retry must not bring it back to pending then.
	got, err := s.proto.UpdateSeen(ctx, it, work.Edit{To: StatusPending, AttemptsBase: work.Ptr(it.Attempts),
		Data: d.Encode(), Reason: &reason})
	if molt.ErrorReason(err) == work.ReasonChanged {
		if cur, cd, gerr := s.get(ctx, id); gerr == nil {
			if rerr := s.retryable(ctx, cur, cd); rerr != nil {
				return View{}, rerr
			}
		}
	}
	if err != nil {
		return View{}, s.refusal(ctx, id, err, CodeActive, "retried")
	}
	s.wake(ctx, work.KindRun, id)
	return view(got, d), nil
}

// retryable refuses a retry the run table does not allow.
func (s *Service) retryable(ctx context.Context, it work.Item, d Data) error {
	switch {
	case it.Active || it.Status == StatusPending || it.Status == StatusRunning:
		return molt.Conflict(CodeActive, "run %s is %s; it cannot be retried until it ends", it.ID, it.Status)
	case it.Status == StatusApplied:
		return molt.Conflict(CodeNotRetryable, "run %s is applied; roll its apply back before retrying", it.ID)
	case d.ArchivedAt != nil:
		// Retention zipped its artifacts, the session snapshot included: a new
		// attempt would find nothing to draft from.
		return molt.Conflict(CodeNotRetryable, "run %s is archived; start a new run with /evo", it.ID)
	case it.Status == StatusApproved:
		if d.LatestApply == "" {
			return molt.Conflict(CodeNotRetryable, "run %s is approved and has no apply to judge", it.ID)
		}
		ap, err := s.store.GetItem(ctx, work.KindApply, d.LatestApply)
		switch {
		case molt.ErrorCode(err) == molt.ENOTFOUND:
			// The apply was created with the approval, in the same write, and
			// only retention removes an apply on its own: 30 days after it
			// was archived, terminal. Nothing is in flight: an approved run
			// whose apply failed and was purged since stays retryable (it
			// could otherwise never be retried nor deleted).
		case err != nil:
			return fmt.Errorf("read apply %s: %w", d.LatestApply, err)
		case (ap.Status != ApplyFailed && ap.Status != ApplyTimeout) || ap.Active:
			return molt.Conflict(CodeNotRetryable, "run %s is approved and its apply has not failed", it.ID)
		}
	case !slices.Contains(retryable, it.Status):
		return molt.Conflict(CodeNotRetryable, "run %s is %s and cannot be retried", it.ID, it.Status)
	}
	return nil
}

// Delete removes a run, its applies (rows and artifacts, rollback snapshots
// included) and its artifacts. The rows go first, in one write; then the blobs
// (a crash between leaves only unreachable artifacts, never a run without its
// own). Refused (ECONFLICT): CodeActive on pending, running and approved runs;
// CodeApplyInFlight when one of its applies has not finished, is being rolled
// back, or changed meanwhile. ENOTFOUND.
func (s *Service) Delete(ctx context.Context, id string) error {
	it, d, err := s.get(ctx, id)
	if err != nil {
		return err
	}
	if it.Active || !slices.Contains(deletable, it.Status) {
		return molt.Conflict(CodeActive, "run %s is %s; it cannot be deleted now", id, it.Status)
	}
	var also []work.Op
	var applies []string
	rollbackable := false
	for _, apID := range d.Applies {
		ap, err := s.store.GetItem(ctx, work.KindApply, apID)
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			continue
		}
		if err != nil {
			return fmt.Errorf("read apply %s: %w", apID, err)
		}
		if ap.Active || !slices.Contains(terminalApply, ap.Status) {
			return molt.Conflict(CodeApplyInFlight, "apply %s of run %s is %s", apID, id, ap.Status)
		}
		rollbackable = rollbackable || ap.Status == applyApplied
		applies = append(applies, apID)
		// Conditional on the apply as read: a rollback claiming it after this
		// read renews its op id, and the delete then refuses.
		also = append(also, work.DeleteItem{Kind: work.KindApply, ID: apID,
			If: work.Cond{Statuses: terminalApply, Active: work.Ptr(false), OpID: ap.OpID}})
	}
	if rollbackable {
		// A rollback of one of its applies that claimed before those reads
		// holds the workspace's apply lock until it ends.
		if err := s.rollingBack(ctx, d.Workspace, applies); err != nil {
			return err
		}
	}
	if err := s.proto.Delete(ctx, work.KindRun, id, deletable, it.Attempts, also...); err != nil {
		if molt.ErrorReason(err) == work.ReasonAlsoFailed {
			return molt.Conflict(CodeApplyInFlight, "an apply of run %s changed meanwhile", id)
		}
		return s.refusal(ctx, id, err, CodeActive, "deleted")
	}
	prefixes := []string{Prefix(id)}
	keys := []string{ArchiveKey("run", id)}
	for _, apID := range applies {
		prefixes = append(prefixes, ApplyPrefix(apID))
		keys = append(keys, ArchiveKey("apply", apID))
	}
	for _, p := range prefixes {
		ks, err := s.blobs.List(ctx, p)
		if err != nil {
			return fmt.Errorf("list artifacts %s: %w", p, err)
		}
		keys = append(keys, ks...)
	}
	for _, k := range keys {
		if err := s.blobs.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete artifact %s: %w", k, err)
		}
	}
	s.log.InfoContext(ctx, "run deleted", slog.String("run_id", id), slog.Int("applies", len(applies)),
		slog.Int("artifacts", len(keys)))
	return nil
}

// rollingBack refuses (CodeApplyInFlight) while a rollback of one of applies
// holds ws's apply lock: its rows and snapshot must not go from under it. The
// holder is "apply_rollback/<id>", a work item (internal/applies) whose Data
// names the apply it rolls back; one that cannot be read counts as rolling
// back.
func (s *Service) rollingBack(ctx context.Context, ws string, applies []string) error {
	h, err := s.store.LockHolder(ctx, ApplyLockKey(ws))
	if err != nil {
		return fmt.Errorf("read the apply lock of %s: %w", ws, err)
	}
	rid, ok := strings.CutPrefix(h, string(KindRollback)+"/")
	if !ok {
		return nil
	}
	var rd struct {
		Apply string `json:"apply"`
	}
	rb, err := s.store.GetItem(ctx, KindRollback, rid)
	if molt.ErrorCode(err) == molt.ENOTFOUND || (err == nil && !rb.Active) {
		return nil // ended meanwhile
	}
	if err != nil || json.Unmarshal(rb.Data, &rd) != nil || slices.Contains(applies, rd.Apply) {
		return molt.Conflict(CodeApplyInFlight, "a rollback of an apply of this run is in progress")
	}
	return nil
}

// ArchiveKey is the blob key of a run's or apply's archive (kind "run" or
// "apply"), written by retention (issue 5) and removed by Delete.
func ArchiveKey(kind, id string) string { return "archive/" + kind + "-" + id + ".zip" }

// refusal turns a failed conditional write into the caller's answer: the run
// changed between the read and the write.
func (s *Service) refusal(ctx context.Context, id string, err error, code, what string) error {
	switch {
	case molt.ErrorCode(err) == molt.ENOTFOUND:
		return molt.NotFound("run %s not found", id)
	case molt.ErrorReason(err) == work.ReasonChanged:
		cur, gerr := s.store.GetItem(ctx, work.KindRun, id)
		if molt.ErrorCode(gerr) == molt.ENOTFOUND {
			return molt.NotFound("run %s not found", id) // deleted meanwhile
		}
		if gerr != nil {
			return molt.Conflict(code, "run %s changed meanwhile and cannot be %s", id, what)
		}
		return molt.Conflict(code, "run %s is now %s and cannot be %s", id, cur.Status, what)
	}
	return fmt.Errorf("run %s not %s: %w", id, what, err)
}
