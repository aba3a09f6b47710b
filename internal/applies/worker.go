package applies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Handle is the apply worker (queue.Handler for work.KindApply wake-ups). A
// wake-up is only a hint; the apply's state in the store decides:
//
//   - pending: claim it (ClaimSeen: one slot of max_concurrent_apply and the
//     workspace's apply lock in one write) and run every phase. When the lock is
//     held (another apply or a rollback of the workspace), the budget is full, or
//     the apply changed meanwhile, the wake-up is dropped (nil): the apply
//     holding the lock or slot wakes the next pending applies when it ends, and
//     the tick re-sends wake-ups of pending applies.
//   - syncing with a stale heartbeat and attempts left: take it over in place
//     (Protocol.Takeover, keeping slot and lock) and resume at publish, with no
//     model call.
//   - anything else: nothing to do.
//
// Handle returns an error only when the store could not be read or written; the
// wake-up is then delivered again.
func (s *Service) Handle(ctx context.Context, m queue.Message) error {
	if m.Kind != string(work.KindApply) || work.ValidateKey(work.KindApply, m.ID) != nil {
		s.log.WarnContext(ctx, "not an apply wake-up; dropped", slog.String("kind", m.Kind))
		return nil
	}
	ctx = obs.With(ctx, slog.String("apply_id", m.ID))
	it, err := s.store.GetItem(ctx, work.KindApply, m.ID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read apply %s: %w", m.ID, err)
	}
	set, err := s.store.GetSettings(ctx)
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	switch {
	case it.Status == StatusPending && !it.Active:
		c, claimed, err := s.proto.ClaimSeen(ctx, it, set.Evolution.MaxConcurrentApply)
		if err != nil {
			switch molt.ErrorReason(err) {
			case work.ReasonLocked, work.ReasonBudgetFull, work.ReasonNotClaimable:
				s.log.DebugContext(ctx, "apply not claimed", slog.String("reason", molt.ErrorReason(err)))
				return nil
			}
			return fmt.Errorf("claim apply %s: %w", it.ID, err)
		}
		return s.run(ctx, c, claimed, set, false)
	case it.Status == StatusSyncing && it.Active:
		pol := s.Policy(set)
		staleBefore := s.now().Add(-pol.Timeout)
		if !it.HeartbeatAt.Before(staleBefore) || it.Used() >= pol.MaxAttempts {
			return nil // its worker is alive, or the tick fails it
		}
		c, claimed, err := s.proto.Takeover(ctx, it, staleBefore)
		if molt.ErrorCode(err) == molt.ECONFLICT {
			return nil
		}
		if err != nil {
			return fmt.Errorf("take over apply %s: %w", it.ID, err)
		}
		s.log.InfoContext(ctx, "resuming a checkpointed apply at publish", slog.Int("attempt", c.Attempts))
		return s.run(ctx, c, claimed, set, true)
	}
	return nil
}

// job is one claim of an apply.
type job struct {
	s    *Service
	c    work.Claim
	it   work.Item
	d    Data
	set  settings.Settings
	lost *atomic.Bool
	// stopHB stops the heartbeat (before a terminal write).
	stopHB func()
}

// failure ends the apply with a stable reason.
type failure struct{ reason string }

func (f *failure) Error() string { return f.reason }

func fail(format string, args ...any) error {
	return &failure{reason: clip(fmt.Sprintf(format, args...), 1900)}
}

func (s *Service) run(ctx context.Context, c work.Claim, it work.Item, set settings.Settings, resume bool) error {
	ctx = obs.With(ctx, slog.Int("attempt", c.Attempts))
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	j := &job{s: s, c: c, it: it, set: set, lost: &lost}
	var once sync.Once
	stop := s.heartbeat(hctx, c, set, &lost, cancel)
	j.stopHB = func() { once.Do(stop) }
	defer j.stopHB()

	d, err := ParseData(it.Data)
	if err != nil {
		j.stopHB()
		return j.failRunning(ctx, ReasonBadData+": "+errText(err))
	}
	j.d = d
	ctx = obs.With(ctx, slog.String("workspace", d.Workspace))
	if resume {
		err = j.resume(hctx)
	} else {
		err = j.fresh(hctx)
	}
	return j.settle(ctx, err, resume)
}

// settle turns a phase's error into the apply's next state.
func (j *job) settle(ctx context.Context, err error, resume bool) error {
	s := j.s
	var f *failure
	var mf *modelFailure
	switch {
	case err == nil:
		return nil
	case isCrash(err):
		return err
	case j.lost.Load() || molt.IsLostClaim(err):
		s.log.WarnContext(ctx, "apply claim lost; stopped", slog.String("error", err.Error()))
		return nil
	case j.checkpointed():
		// Past the checkpoint nothing goes back: release for the tick to resume.
		reason := err.Error()
		if errors.As(err, &f) {
			reason = f.reason
		}
		if resume {
			reason = ReasonResumeFailed + ": " + reason
		}
		j.release(ctx, reason)
		if errors.As(err, &f) {
			return nil
		}
		return err
	case errors.As(err, &f):
		j.stopHB()
		return j.failRunning(ctx, f.reason)
	case errors.As(err, &mf):
		j.stopHB()
		if !mf.transient() || j.it.Used() >= s.Policy(j.set).MaxAttempts {
			return j.failRunning(ctx, mf.reason())
		}
		return j.giveBack(ctx, mf.reason())
	default:
		// The store failed: leave the claim; the tick requeues it when stale.
		return err
	}
}

// checkpointed reports whether this claim moved the apply to syncing.
func (j *job) checkpointed() bool { return j.it.Status == StatusSyncing }

// fresh runs every phase of a new claim: merge, regress, preflight, auto
// re-check, checkpoint, publish, finalize.
func (j *job) fresh(ctx context.Context) error {
	s, d, id := j.s, &j.d, j.it.ID
	if err := s.crash("claim", j.it.ID); err != nil {
		return err
	}
	srcs := make([]sourceRun, 0, len(d.Runs))
	for _, rid := range d.Runs {
		src, err := s.loadRun(ctx, rid)
		if molt.ErrorReason(err) == ReasonRunMissing {
			return fail("%s: %s", ReasonRunMissing, errText(err))
		}
		if err != nil {
			return err
		}
		if src.item.Status != runApproved {
			return fail("%s: run %s is %s, not approved", ReasonRunMissing, rid, src.item.Status)
		}
		srcs = append(srcs, src)
	}
	lang := j.set.General.Language
	sf, err := s.readSurface(ctx, d.Workspace)
	if err != nil {
		return err
	}
	merged, sum, deletes, err := s.merge(ctx, d.Workspace, lang, sf, srcs)
	if err != nil {
		var me *molt.Error
		if errors.As(err, &me) && me.Reason == ReasonMergeFailed {
			return fail("%s", me.Message)
		}
		return err
	}
	d.Attempt, d.Merge, d.SkippedDeletes = j.c.Attempts, &sum, deletes
	if d.Auto() && len(srcs) > 0 && srcs[0].data.Result != nil {
		d.Score, d.Observation = srcs[0].data.Result.Score, clip(srcs[0].data.Result.Observation, 600)
	}
	if err := s.putJSON(ctx, attemptPrefix(id, j.c.Attempts)+"merge.json", sum); err != nil {
		return err
	}
	if err := s.crash("merge", j.it.ID); err != nil {
		return err
	}

	sandbox := make(map[string][]byte, len(sf.wsMap)+len(merged))
	for p, c := range sf.wsMap {
		sandbox[p] = c
	}
	for p, c := range withFolderCopies(merged, sf) {
		sandbox[p] = c
	}
	d.Regress = nil
	for _, src := range srcs {
		r, err := s.regress(ctx, d.Workspace, lang, sf, sandbox, src)
		if err != nil {
			return err
		}
		if err := s.saveRegress(ctx, id, j.c.Attempts, r); err != nil {
			return err
		}
		d.Regress = append(d.Regress, r.entry)
		if !r.entry.Passed {
			return fail("%s", r.entry.Reason)
		}
	}
	if err := s.crash("regress", j.it.ID); err != nil {
		return err
	}

	changes, m, err := j.preflight(ctx, merged, srcs)
	if err != nil {
		return err
	}
	if err := s.crash("preflight", j.it.ID); err != nil {
		return err
	}
	if d.Auto() {
		if err := j.recheck(ctx, changes); err != nil {
			return err
		}
	}
	// Checkpoint: from here a crash resumes at publish.
	it, err := s.proto.Transition(ctx, j.c, work.Transition{To: StatusSyncing, Keep: true,
		Data: d.Encode(), Reason: work.Ptr("")})
	if err != nil {
		return err
	}
	j.it.Status, j.it.OpID = it.Status, it.OpID
	s.log.InfoContext(ctx, "apply checkpointed", slog.Int("files", len(m.Files)))
	if err := s.crash("checkpoint", j.it.ID); err != nil {
		return err
	}
	return j.publish(ctx, changes, nil)
}

// preflight diffs the merged files against the live workspace, checks the
// surface's limits, re-confirms the claim with a heartbeat and writes the
// rollback snapshot from scratch (this claim never reached syncing, so the
// workspace is still pre-apply: whatever an earlier attempt left is stale).
func (j *job) preflight(ctx context.Context, merged map[string][]byte, srcs []sourceRun) ([]change, Manifest, error) {
	s, d, id := j.s, &j.d, j.it.ID
	live, err := s.readSurface(ctx, d.Workspace)
	if err != nil {
		return nil, Manifest{}, err
	}
	changes, dirs := diff(withFolderCopies(merged, live), live.wsMap, live.lowMap)
	newFiles := 0
	for _, c := range changes {
		if err := workspace.ValidatePath(c.Rel); err != nil {
			return nil, Manifest{}, fail("%s: %s", ReasonPreflight, errText(err))
		}
		if len(c.content) > workspace.MaxFileSize {
			return nil, Manifest{}, fail("%s: %s is over %d bytes", ReasonPreflight, c.Rel, workspace.MaxFileSize)
		}
		if c.Kind == KindNew {
			newFiles++
		}
	}
	if len(live.ws)+newFiles > workspace.MaxFiles {
		return nil, Manifest{}, fail("%s: the workspace would have %d files, at most %d allowed", ReasonPreflight,
			len(live.ws)+newFiles, workspace.MaxFiles)
	}
	// A fresh claim re-confirms it still owns the apply before writing anything.
	if err := s.proto.Heartbeat(ctx, j.c); err != nil {
		return nil, Manifest{}, err
	}
	m := Manifest{ApplyID: id, Workspace: d.Workspace, SourceRunIDs: d.Runs, Attempt: j.c.Attempts,
		CapturedAt: s.now(), Files: make([]ManifestFile, 0, len(changes)), CreatedDirs: dirs}
	if m.CreatedDirs == nil {
		m.CreatedDirs = []string{}
	}
	for _, c := range changes {
		m.Files = append(m.Files, c.ManifestFile)
	}
	b, err := writeSnapshot(ctx, s.blobs, m, changes, live.wsMap)
	if err != nil {
		return nil, Manifest{}, err
	}
	d.Snapshot = &SnapshotRef{Attempt: j.c.Attempts, ManifestSHA256: Hash(b), CapturedAt: m.CapturedAt,
		Files: len(m.Files), CreatedDirs: m.CreatedDirs}
	return changes, m, nil
}

// withFolderCopies returns the merged files with the copies that keep each
// workspace folder they create from hiding the rest of the lower folder it
// replaces (evolution.FolderCopies on sf's effective surface): byte-equal
// copies of the global (or built-in) files, which the manifest marks unchanged
// and a rollback removes with the folder.
func withFolderCopies(merged map[string][]byte, sf surface) map[string][]byte {
	written := make([]string, 0, len(merged))
	for p := range merged {
		written = append(written, p)
	}
	out := evolution.FolderCopies(sf.effective(), written)
	for p, c := range merged {
		out[p] = c
	}
	return out
}

// recheck gates an auto apply again before anything is published: the files
// about to be published are classified against the live surface, with the level
// read again (it may have been lowered). The score gate is not repeated: the
// regression held the merge to its floor.
func (j *job) recheck(ctx context.Context, changes []change) error {
	s, d := j.s, &j.d
	set, err := s.store.GetSettings(ctx)
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	live, err := s.readSurface(ctx, d.Workspace)
	if err != nil {
		return err
	}
	sandbox := make(map[string][]byte, len(changes))
	for _, c := range changes {
		sandbox[c.Rel] = c.content
	}
	files, cat := evolution.Classify(live.effective(), live.lower, sandbox, nil)
	pass := evolution.Score{Lint: 100, Behavior: 100, Scope: 100, Avg: 100, Confidence: evolution.ConfidenceHigh,
		Checks: evolution.Checks{PatchInSandbox: true, UsedInDryRun: true, Probe: true, ProbeLanguage: true}}
	d.Level = set.Evolution.Level
	v := evolution.Decide(set.Evolution.Level, 0, evolution.SourceFull, files, cat, &pass)
	if !v.Passed {
		return fail("%s:%s", ReasonAutoRecheck, v.Reason)
	}
	return nil
}

// resume continues a checkpointed apply at publish: the snapshot its checkpoint
// recorded is read back (the manifest must hash as recorded; each staged file as
// its manifest entry), never rewritten.
func (j *job) resume(ctx context.Context) error {
	s, d, id := j.s, &j.d, j.it.ID
	if err := s.crash("takeover", j.it.ID); err != nil {
		return err
	}
	if d.Snapshot == nil {
		return fail("%s: the checkpoint recorded no snapshot", ReasonSnapshotGone)
	}
	m, err := readManifest(ctx, s.blobs, id, d.Snapshot.ManifestSHA256)
	if molt.ErrorReason(err) == CodeNoSnapshot {
		return fail("%s: %s", ReasonSnapshotGone, errText(err))
	}
	if err != nil {
		return err
	}
	changes := make([]change, 0, len(m.Files))
	for _, f := range m.Files {
		b, err := s.blobs.Get(ctx, afterKey(id, f.Rel))
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return fail("%s: the staged content of %s is gone", ReasonSnapshotGone, f.Rel)
		}
		if err != nil {
			return fmt.Errorf("read staged %s: %w", f.Rel, err)
		}
		if Hash(b) != f.After {
			return fail("%s: the staged content of %s does not match the manifest", ReasonSnapshotGone, f.Rel)
		}
		changes = append(changes, change{ManifestFile: f, content: b})
	}
	files, err := s.store.ListFiles(ctx, d.Workspace)
	if err != nil {
		return fmt.Errorf("list files of %s: %w", d.Workspace, err)
	}
	cur := make(map[string]string, len(files))
	for _, f := range files {
		cur[f.Path] = f.SHA256
	}
	return j.publish(ctx, changes, cur)
}

// publish writes each changed file to the workspace (idempotent; never deletes)
// and finalizes. cur, when set, holds the workspace's current hashes: files
// already published (by a crashed attempt) are not written again.
func (j *job) publish(ctx context.Context, changes []change, cur map[string]string) error {
	s, d := j.s, &j.d
	for k, c := range changes {
		if j.lost.Load() {
			return lostClaim(j.c)
		}
		if cur == nil || cur[c.Rel] != c.After {
			if _, err := s.store.PutFile(ctx, workspace.NewFile(d.Workspace, c.Rel, c.content, s.now())); err != nil {
				return fail("%s: %s: %s", ReasonPublish, c.Rel, errText(err))
			}
		}
		if err := s.crash(fmt.Sprintf("publish:%d", k+1), j.it.ID); err != nil {
			return err
		}
	}
	if err := s.crash("published", j.it.ID); err != nil {
		return err
	}
	d.Published, d.Unchanged = nil, nil
	for _, c := range changes {
		if c.Unchanged {
			d.Unchanged = append(d.Unchanged, c.Rel)
		} else {
			d.Published = append(d.Published, c.Rel)
		}
	}
	return j.finalize(ctx)
}

// finalize makes the apply applied, with every still-approved source run
// applied and, for an auto apply, its pending notice, in one write that also
// releases slot and lock.
func (j *job) finalize(ctx context.Context) error {
	s, d := j.s, &j.d
	j.stopHB()
	now := s.now()
	d.AppliedAt, d.FailureReason = &now, ""
	for try := 0; ; try++ {
		ops, err := s.runOps(ctx, d.Runs, runApproved, runApplied, nil)
		if err != nil {
			return err
		}
		if d.Auto() {
			ops = append(ops, work.CreateItem{Item: work.Item{Kind: KindNotice, ID: j.it.ID, Workspace: d.Workspace,
				Status: work.StatusPending, Data: []byte(`{"apply":"` + j.it.ID + `"}`),
				CreatedAt: now, UpdatedAt: now, OpID: s.ids.NewID()}})
		}
		_, err = s.proto.Transition(ctx, j.c, work.Transition{To: StatusApplied, Data: d.Encode(), Reason: work.Ptr("")}, ops...)
		if molt.ErrorReason(err) == work.ReasonAlsoFailed && try < 3 {
			continue // a run moved since it was read: read again
		}
		if err != nil {
			return err
		}
		break
	}
	s.log.InfoContext(ctx, "apply applied", slog.Int("published", len(d.Published)), slog.Int("unchanged", len(d.Unchanged)))
	s.wakeNext(ctx, d.Workspace)
	return nil
}

// failRunning fails a claimed apply that never reached syncing: an auto apply's
// still-approved runs go back to awaiting_review in the same write; a reviewer
// apply's runs stay approved (a retry is allowed).
func (j *job) failRunning(ctx context.Context, reason string) error {
	s, d := j.s, &j.d
	ctx = context.WithoutCancel(ctx)
	d.FailureReason = reason
	for try := 0; ; try++ {
		var ops []work.Op
		if d.Auto() {
			var err error
			if ops, err = s.runOps(ctx, d.Runs, runApproved, runAwaitingReview, nil); err != nil {
				return err
			}
		}
		data := d.Encode()
		if d.Workspace == "" {
			data = nil // unreadable data stays as it was
		}
		_, err := s.proto.Transition(ctx, j.c, work.Transition{To: StatusFailed, Data: data, Reason: &reason}, ops...)
		if molt.ErrorReason(err) == work.ReasonAlsoFailed && try < 3 {
			continue
		}
		if molt.IsLostClaim(err) {
			return nil
		}
		if err != nil {
			return err
		}
		break
	}
	s.log.InfoContext(ctx, "apply failed", slog.String("reason", reason))
	if d.Workspace != "" {
		s.wakeNext(ctx, d.Workspace)
	}
	return nil
}

// giveBack returns a claimed apply to pending (the model is unavailable; the
// attempt counts), for the tick to wake it again (its re-send of pending
// wake-ups, a minute later): waking it now would spend its attempts at once.
func (j *job) giveBack(ctx context.Context, reason string) error {
	s := j.s
	ctx = context.WithoutCancel(ctx)
	_, err := s.proto.Transition(ctx, j.c, work.Transition{To: StatusPending, Reason: &reason})
	if molt.IsLostClaim(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "apply given back", slog.String("reason", reason))
	s.wakeNext(ctx, j.d.Workspace, j.it.ID)
	return nil
}

// release lets go of a checkpointed apply whose publish (or resume) failed: it
// stays syncing with its slot and lock, its heartbeat cleared so the tick finds
// it stale at once and resumes it (or fails it when retries are spent), with the
// failure in its reason.
func (j *job) release(ctx context.Context, reason string) {
	s, d := j.s, &j.d
	ctx = context.WithoutCancel(ctx)
	j.stopHB()
	reason = clip(reason, 1900)
	d.FailureReason = reason
	op := work.UpdateItem{Kind: work.KindApply, ID: j.it.ID,
		If: work.Cond{Attempts: work.Ptr(j.c.Attempts), Token: j.c.Token, Active: work.Ptr(true)},
		Set: work.Set{HeartbeatAt: work.Ptr(time.Time{}), Reason: &reason, Data: d.Encode(),
			UpdatedAt: s.now(), OpID: s.ids.NewID()}}
	if err := s.store.Commit(ctx, op); err != nil {
		s.log.WarnContext(ctx, "could not release the syncing apply; the tick resumes it when stale",
			slog.String("error", err.Error()))
		return
	}
	s.log.WarnContext(ctx, "apply publish failed; released for the tick to resume", slog.String("reason", reason))
}

// heartbeat keeps the claim alive every heartbeat_seconds (work.KeepAlive).
func (s *Service) heartbeat(ctx context.Context, c work.Claim, set settings.Settings, lost *atomic.Bool, cancel context.CancelFunc) func() {
	every := time.Duration(set.Evolution.HeartbeatSeconds) * time.Second
	return s.proto.KeepAlive(ctx, c, every, lost, cancel, s.log)
}

func lostClaim(c work.Claim) error {
	return &molt.Error{Code: molt.ELOSTCLAIM, Reason: "lost_claim",
		Message: fmt.Sprintf("apply %s: claim at attempt %d is no longer held", c.ID, c.Attempts)}
}

// putJSON stores v as indented JSON at key.
func (s *Service) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if err := s.blobs.Put(ctx, key, b); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}
