package applies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	return s.exec.Handle(ctx, m)
}

// HandleBatch handles wake-ups together (queue.BatchHandler): their claims in
// one store round trip, their final writes sharing one when ready together.
func (s *Service) HandleBatch(ctx context.Context, ms []queue.Message, rep queue.Report) {
	s.exec.HandleBatch(ctx, ms, rep)
}

// executor returns the apply kind's attempt executor: the policy and the
// settings are read once per wake-up; a syncing apply whose claim went stale
// is taken over in place (Policy.Resume); the next applies woken are chosen
// by nextApplies (the workspace's lock first).
func (s *Service) executor() *work.Executor[settings.Settings] {
	return &work.Executor[settings.Settings]{Protocol: s.proto, Queue: s.queue, Logger: s.log, Kind: work.KindApply,
		Policy: func(ctx context.Context) (work.Policy, settings.Settings, error) {
			set, err := s.store.GetSettings(ctx)
			if err != nil {
				return work.Policy{}, set, fmt.Errorf("read settings: %w", err)
			}
			p := s.Policy(set)
			p.Heartbeat = time.Duration(set.Evolution.HeartbeatSeconds) * time.Second
			return p, set, nil
		},
		Prepare: func(_ context.Context, _ work.Item, _ work.Policy, set settings.Settings) (work.AttemptFunc, error) {
			return func(ctx context.Context, a *work.Attempt) work.Outcome { return s.attempt(ctx, a, set) }, nil
		},
		Next: func(ctx context.Context, ended work.Item, _ work.Policy) ([]string, error) {
			return s.nextApplies(ctx, ended.Workspace, ended.ID)
		}}
}

// job is one claim of an apply.
type job struct {
	s   *Service
	w   *work.Attempt
	c   work.Claim
	it  work.Item
	d   Data
	set settings.Settings
}

// failure ends the apply with a stable reason.
type failure struct{ reason string }

func (f *failure) Error() string { return f.reason }

func fail(format string, args ...any) error {
	return &failure{reason: clip(fmt.Sprintf(format, args...), 1900)}
}

// attempt runs one claim of an apply (a fresh one, or the takeover of a
// checkpointed one, resumed at publish) and says how it ends.
func (s *Service) attempt(ctx context.Context, w *work.Attempt, set settings.Settings) work.Outcome {
	j := &job{s: s, w: w, c: w.Claim, it: w.Item, set: set}
	if w.Resumed {
		s.log.InfoContext(ctx, "resuming a checkpointed apply at publish", slog.Int("attempt", w.Claim.Attempts))
	}
	d, err := ParseData(j.it.Data)
	if err != nil {
		return j.failRunning(ReasonBadData + ": " + errText(err))
	}
	j.d = d
	ctx = obs.With(ctx, slog.String("workspace", d.Workspace))
	if w.Resumed {
		err = j.resume(ctx)
	} else {
		err = j.fresh(ctx)
	}
	return j.settle(ctx, err, w.Resumed)
}

// settle turns a phase's error into the apply's next state.
func (j *job) settle(ctx context.Context, err error, resume bool) work.Outcome {
	s := j.s
	var f *failure
	var mf *modelFailure
	switch {
	case err == nil:
		return j.finalize()
	case isCrash(err):
		return work.Leave(err)
	case molt.IsLostClaim(err):
		s.log.WarnContext(ctx, "apply claim lost; stopped", slog.String("error", err.Error()))
		return work.Leave(err)
	case j.checkpointed():
		// Past the checkpoint nothing goes back: release for the tick to resume.
		reason := err.Error()
		if errors.As(err, &f) {
			reason = f.reason
		}
		if resume {
			reason = ReasonResumeFailed + ": " + reason
		}
		reason = clip(reason, 1900)
		j.d.FailureReason = reason
		s.log.WarnContext(ctx, "apply publish failed; released for the tick to resume", slog.String("reason", reason))
		o := work.Release(reason, j.d.Encode())
		if errors.As(err, &f) {
			return o
		}
		return o.WithErr(err)
	case errors.As(err, &f):
		return j.failRunning(f.reason)
	case errors.As(err, &mf):
		if !mf.transient() || !j.w.AttemptsLeft() {
			return j.failRunning(mf.reason())
		}
		// The model is unavailable; the attempt counts. No wake-up of its own:
		// the tick's re-send, a minute later, is the backoff (waking it now
		// would spend its attempts at once).
		return work.GiveBack(mf.reason(), false, nil)
	default:
		// The store failed: leave the claim; the tick requeues it when stale.
		return work.Leave(err)
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
	if err := j.w.Checkpoint(ctx, StatusSyncing, d.Encode()); err != nil {
		return err
	}
	j.it = j.w.Item
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
		if errors.Is(context.Cause(ctx), work.ErrClaimLost) {
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
	return nil
}

// finalize makes the apply applied, with every still-approved source run
// applied and, for an auto apply, its pending notice, in one write that also
// releases slot and lock (the runs are read again when one moved meanwhile).
func (j *job) finalize() work.Outcome {
	s, d := j.s, &j.d
	now := s.now()
	d.AppliedAt, d.FailureReason = &now, ""
	build := func(ctx context.Context, _ work.Op) (work.Transition, []work.Op, error) {
		ops, err := s.runOps(ctx, d.Runs, runApproved, runApplied, nil)
		if err != nil {
			return work.Transition{}, nil, err
		}
		if d.Auto() {
			ops = append(ops, work.CreateItem{Item: work.Item{Kind: KindNotice, ID: j.it.ID, Workspace: d.Workspace,
				Status: work.StatusPending, Data: []byte(`{"apply":"` + j.it.ID + `"}`),
				CreatedAt: now, UpdatedAt: now, OpID: s.ids.NewID()}})
		}
		return work.Transition{To: StatusApplied, Data: d.Encode(), Reason: work.Ptr("")}, ops, nil
	}
	return work.EndWith(build, 3).Then(func(ctx context.Context, _ work.Item) {
		s.log.InfoContext(ctx, "apply applied", slog.Int("published", len(d.Published)), slog.Int("unchanged", len(d.Unchanged)))
	})
}

// failRunning fails a claimed apply that never reached syncing, moving its
// still-approved runs in the same write as failureOps says.
func (j *job) failRunning(reason string) work.Outcome {
	s, d := j.s, &j.d
	d.FailureReason = reason
	build := func(ctx context.Context, _ work.Op) (work.Transition, []work.Op, error) {
		ops, err := s.failureOps(ctx, *d)
		if err != nil {
			return work.Transition{}, nil, err
		}
		data := d.Encode()
		if d.Workspace == "" {
			data = nil // unreadable data stays as it was
		}
		return work.Transition{To: StatusFailed, Data: data, Reason: &reason}, ops, nil
	}
	return work.EndWith(build, 3).Then(func(ctx context.Context, _ work.Item) {
		s.log.InfoContext(ctx, "apply failed", slog.String("reason", reason))
	})
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
