package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Reasons a run fails or is given back (the run's Reason; safe: they never quote
// session content or a provider's answer).
const (
	ReasonBadData         = "bad_run_data"     // the run's Data is not a run's
	ReasonSnapshotMissing = "snapshot_missing" // the frozen snapshot is gone or unreadable
	ReasonPatchInvalid    = "patch_invalid"    // "patch_invalid:<field>": the draft is not a valid patch
	ReasonPatchPaths      = "patch_paths"      // "patch_paths:<why>": the patch does not fit the surface
	ReasonModel           = "model"            // "model:<category>" (model.Reason*)
	ReasonInterrupted     = "interrupted"      // given back: the process stopped or the invocation ended
	ReasonDeadline        = "deadline"         // given back / timeout: the attempt hit its deadline
	ReasonStore           = "store"            // given back: the store or blob store failed
)

// Handle is the run worker (queue.Handler for work.KindRun wake-ups). A wake-up
// is only a hint: the run's state in the store decides.
//
//   - A run that is not pending (done, running elsewhere, gone) is left alone:
//     a duplicate or late wake-up is harmless.
//   - Claim with budget evolution.max_concurrent_run: "not_claimable" and
//     "budget_full" return nil (the message is dropped): a finishing run wakes the
//     oldest pending ones, and the tick re-sends wake-ups of pending runs. An
//     error would have SQS redeliver the message only after the queue's
//     visibility timeout and count it towards the dead-letter queue.
//
// The claimed run heartbeats every heartbeat_seconds on its own claim, and
// re-confirms the claim (a heartbeat) before each group of artifacts it writes;
// when the claim is lost every model call is cancelled and nothing more is
// written. The phases (draft, dry-run, score, gates) are in execute; the
// outcome is committed in the one conditional write that ends the claim.
func (s *Service) Handle(ctx context.Context, m queue.Message) error {
	return s.exec.Handle(ctx, m)
}

// HandleBatch handles wake-ups together (queue.BatchHandler): their claims in
// one store round trip, their final writes sharing one when ready together.
func (s *Service) HandleBatch(ctx context.Context, ms []queue.Message, rep queue.Report) {
	s.exec.HandleBatch(ctx, ms, rep)
}

// executor returns the run kind's attempt executor: the policy and the
// settings are read once per wake-up.
func (s *Service) executor() *work.Executor[settings.Settings] {
	return &work.Executor[settings.Settings]{Protocol: s.proto, Queue: s.queue, Logger: s.log, Kind: work.KindRun,
		Policy: func(ctx context.Context) (work.Policy, settings.Settings, error) {
			st, err := s.store.GetSettings(ctx)
			if err != nil {
				return work.Policy{}, st, fmt.Errorf("read settings: %w", err)
			}
			return s.attemptPolicy(st), st, nil
		},
		Prepare: func(ctx context.Context, it work.Item, _ work.Policy, st settings.Settings) (work.AttemptFunc, error) {
			return func(ctx context.Context, a *work.Attempt) work.Outcome {
				s.log.InfoContext(ctx, "run claimed", slog.Int("attempt", a.Claim.Attempts), slog.Int("used", a.Item.Used()))
				return s.attempt(ctx, a, st)
			}, nil
		}}
}

// attemptPolicy is Policy with what one attempt needs: the heartbeat
// (heartbeat_seconds, or Config.HeartbeatEvery), the attempt's deadline
// (run_timeout_minutes) and the commit margin.
func (s *Service) attemptPolicy(st settings.Settings) work.Policy {
	p := Policy(st)
	p.Heartbeat = s.cfg.HeartbeatEvery
	if p.Heartbeat <= 0 {
		p.Heartbeat = time.Duration(st.Evolution.HeartbeatSeconds) * time.Second
	}
	p.AttemptTimeout = time.Duration(st.Evolution.RunTimeoutMinutes) * time.Minute
	p.CommitMargin = s.cfg.CommitMargin
	p.WakeNext = max(st.Evolution.MaxConcurrentRun, 1)
	return p
}

// runFailure is a failure no retry of the same attempt can fix: the run fails
// with reason.
type runFailure struct {
	reason string
	err    error
}

func (f *runFailure) Error() string { return f.reason + ": " + f.err.Error() }
func (f *runFailure) Unwrap() error { return f.err }

func fail(reason string, format string, args ...any) error {
	return &runFailure{reason: reason, err: fmt.Errorf(format, args...)}
}

// modelFailure wraps an error of a model call.
type modelFailure struct{ err error }

func (f *modelFailure) Error() string { return "model: " + f.err.Error() }
func (f *modelFailure) Unwrap() error { return f.err }

// attempt is one claimed attempt of a run.
type attempt struct {
	w     *work.Attempt
	c     work.Claim
	it    work.Item
	data  Data
	st    settings.Settings
	start time.Time
	res   Result
	apply *work.Item // the pending apply an auto approval creates
	to    work.Status
	why   string // the run's Reason for to
}

func (a *attempt) log(s *Service, msg string) {
	a.data.log(s.clock.Now(), a.c.Attempts, msg)
}

// attempt runs one claimed attempt of a run and says how it ends.
func (s *Service) attempt(ctx context.Context, w *work.Attempt, st settings.Settings) work.Outcome {
	c, it := w.Claim, w.Item
	a := &attempt{w: w, c: c, it: it, st: st, start: w.Start, res: Result{Attempt: c.Attempts}}
	d, err := ParseData(it.Data)
	if err != nil {
		a.data = Data{Workspace: it.Workspace, Trigger: "unknown"}
		a.to, a.why = StatusFailed, ReasonBadData
		return s.finish(a)
	}
	a.data = d
	a.log(s, fmt.Sprintf("attempt %d started (%d of %d this round)", c.Attempts, it.Used(), st.Evolution.MaxAttempts))
	err = s.execute(ctx, a)
	if err == nil {
		return s.finish(a)
	}
	if molt.IsLostClaim(err) {
		return work.Leave(err)
	}
	var rf *runFailure
	var mf *modelFailure
	switch {
	case errors.As(err, &rf):
		s.log.WarnContext(ctx, "run failed", slog.String("reason", rf.reason), slog.String("error", err.Error()))
		a.log(s, "failed: "+rf.reason)
		a.to, a.why = StatusFailed, rf.reason
		return s.finish(a)
	case w.Interrupted():
		// Shutdown, or the invocation ended: give the run back for a later
		// attempt, or end it when this was the last.
		stopped := fmt.Errorf("run %s interrupted: %w", it.ID, context.Cause(ctx))
		if w.AttemptsLeft() {
			return s.giveBack(a, ReasonInterrupted, true).WithErr(stopped)
		}
		a.log(s, "interrupted with the attempts spent")
		a.to, a.why = StatusTimeout, "timeout: "+ReasonInterrupted
		return s.finish(a).WithErr(stopped)
	case w.DeadlineHit():
		if w.AttemptsLeft() {
			return s.giveBack(a, ReasonDeadline, true)
		}
		a.log(s, "attempt deadline reached with the attempts spent")
		a.to, a.why = StatusTimeout, "timeout: "+ReasonDeadline
		return s.finish(a)
	case errors.As(err, &mf):
		reason := ReasonModel + ":" + orUnknown(molt.ErrorReason(mf.err))
		if molt.ErrorCode(mf.err) == molt.EUNAVAILABLE && w.AttemptsLeft() {
			// No wake-up: the tick re-sends it after a minute, a natural backoff.
			return s.giveBack(a, reason, false)
		}
		s.log.WarnContext(ctx, "model failed; run fails", slog.String("reason", reason), slog.String("error", mf.err.Error()))
		a.log(s, "failed: "+reason)
		a.to, a.why = StatusFailed, reason
		return s.finish(a)
	default:
		// The store, the blob store, or something unexpected: give the run back
		// and let the wake-up be delivered again, or fail it on the last attempt.
		s.log.ErrorContext(ctx, "run attempt failed", slog.String("error", err.Error()))
		if w.AttemptsLeft() {
			return s.giveBack(a, ReasonStore, false).WithErr(fmt.Errorf("run %s: %w", it.ID, err))
		}
		a.log(s, "failed: "+ReasonStore)
		a.to, a.why = StatusFailed, ReasonStore
		return s.finish(a)
	}
}

// put writes artifacts of the attempt, under its own attempt's keys, after
// confirming the claim with a read (Attempt.Confirm: no write). Nothing reads
// them until the run's final write, conditional on the claim, records the
// attempt in its Result (Result.Attempt), so even a Put in flight when the
// claim is lost is never shown as the run's; the confirmation stops a stale
// worker at its next group of artifacts, before more model calls.
func (s *Service) put(ctx context.Context, a *attempt, files map[string]any) error {
	if err := a.w.Confirm(ctx); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		key := AttemptKey(a.it.ID, a.c.Attempts, name)
		var err error
		switch v := files[name].(type) {
		case string:
			err = s.blobs.Put(ctx, key, []byte(v))
		default:
			err = putJSON(ctx, s.blobs, key, v)
		}
		if err != nil {
			return fmt.Errorf("store %s: %w", key, err)
		}
	}
	return nil
}

// execute runs the phases of one attempt: draft, sandbox, dry-run, score, gates.
// It sets a.to (and a.res, a.apply) for finish, and writes only artifacts of
// this attempt. Errors: *runFailure, *modelFailure, ELOSTCLAIM, or others
// (store, blobs).
func (s *Service) execute(ctx context.Context, a *attempt) error {
	id := a.it.ID
	var meta Meta
	var msgs []session.Message
	var sc SurfaceContext
	for _, x := range []struct {
		name string
		v    any
	}{{ArtifactMeta, &meta}, {ArtifactMessages, &msgs}, {ArtifactSurface, &sc}} {
		if err := getJSON(ctx, s.blobs, SnapshotKey(id, x.name), x.v); err != nil {
			if code := molt.ErrorCode(err); code == molt.ENOTFOUND || code == molt.EINTERNAL {
				return fail(ReasonSnapshotMissing, "snapshot %s: %v", x.name, err)
			}
			return err
		}
	}
	flow, err := s.blobs.Get(ctx, SnapshotKey(id, ArtifactToolFlow))
	if err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
		return err
	}
	global, own, live, err := s.surface(ctx, a.data.Workspace)
	if err != nil {
		return err
	}
	lang := a.st.General.Language
	tr := transcript(msgs, s.cfg.MaxTranscript)

	// Draft.
	resp, err := s.model.Generate(ctx, evolution.DraftPrompt(evolution.DraftInput{
		RunID: id, Workspace: a.data.Workspace, Agent: a.data.Agent, SourceSession: a.data.SourceSession,
		Trigger: a.data.Trigger, Hint: a.data.Hint, Language: lang, Created: a.data.CreatedAt,
		Transcript: tr, ToolFlow: string(flow), SystemPrompt: sc.SystemPrompt, Surface: live,
		Timeout: s.cfg.ModelTimeout}))
	if err != nil {
		return &modelFailure{err}
	}
	patch, err := evolution.ParsePatch(resp.Text)
	if err != nil {
		field := ""
		var me *molt.Error
		if errors.As(err, &me) && me.Field != "" {
			field = ":" + me.Field
		}
		return fail(ReasonPatchInvalid+field, "parse patch: %w", err)
	}
	liveText := map[string]string{}
	for _, f := range live {
		liveText[f.Path] = string(f.Content)
	}
	md := evolution.RenderPatchMD(patch, liveText)
	a.res.Observation, a.res.HasObservation = patch.Observation, patch.HasObservation
	if patch.Skipped() {
		a.log(s, "draft skipped: "+clip(patch.SkipReason, 200))
		if err := s.put(ctx, a, map[string]any{ArtifactPatch: patch, ArtifactPatchMD: md}); err != nil {
			return err
		}
		a.res.SkipReason = patch.SkipReason
		a.to, a.why = StatusSkipped, "skipped"
		return nil
	}
	a.res.Patch = summarizePatch(patch)
	a.log(s, fmt.Sprintf("draft: %d file(s) written, %d deleted", len(patch.Files), len(patch.Deletes)))

	// Validate paths and build the sandbox: the workspace's files with the patch
	// applied, as a publish would leave them (with the copies that keep a new
	// workspace folder from hiding the rest of the lower folder).
	sandboxOwn, err := applyPatch(a.data.Workspace, own, live, patch, s.clock.Now())
	if err != nil {
		return err
	}
	sandbox := chat.Surface(chat.Builtin(), global, sandboxOwn)
	inSandbox := patchInSandbox(sandbox, patch)
	if err := s.put(ctx, a, map[string]any{ArtifactPatch: patch, ArtifactPatchMD: md}); err != nil {
		return err
	}

	// Dry-run: the source agent answers the test message on the sandbox surface.
	dr, err := s.dryRun(ctx, sandbox, a.data.Agent, patch.TestScenario.Message)
	if err != nil {
		return err
	}
	if dr.Error != "" {
		a.log(s, "dry-run: the patched agent could not run")
	} else {
		a.log(s, fmt.Sprintf("dry-run: %d step(s), %d bytes", dr.Steps, len(dr.Reply)))
	}
	if err := s.put(ctx, a, map[string]any{ArtifactDryRun: dr}); err != nil {
		return err
	}

	// Score.
	reply := dr.Reply
	if dr.Error != "" {
		reply = "(the patched agent could not run: " + dr.Error + ")"
	}
	sresp, err := s.model.Generate(ctx, evolution.ScorePrompt(evolution.ScoreInput{
		RunID: id, Workspace: a.data.Workspace, Agent: a.data.Agent, Mode: evolution.ScoreModeRun,
		Hint: a.data.Hint, Language: lang, Transcript: tr, PatchMD: md, Scenario: patch.TestScenario,
		DryRun: reply, Timeout: s.cfg.ModelTimeout}))
	if err != nil {
		return &modelFailure{err}
	}
	var score *evolution.Score
	var scoreArtifact any
	if parsed, perr := evolution.ParseScore(sresp.Text); perr == nil {
		parsed.Checks.PatchInSandbox = inSandbox
		score, scoreArtifact = &parsed, parsed
		a.log(s, fmt.Sprintf("score: avg %d (lint %d, behavior %d, scope %d, confidence %s)",
			parsed.Avg, parsed.Lint, parsed.Behavior, parsed.Scope, parsed.Confidence))
	} else {
		scoreArtifact = map[string]string{"error": clip(perr.Error(), 500)}
		a.log(s, "score: missing or malformed")
	}
	a.res.Score = score

	// Gates, against the live surface and the level as it is now.
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	files, cat := evolution.Classify(live, lower(global), patch.Sandbox(), patch.Deletes)
	v := evolution.Decide(st.Evolution.Level, st.Evolution.AutoApplyThreshold, a.data.SourceAccess, files, cat, score)
	v.Observation = patch.Observation
	a.res.Verdict = &v
	if err := s.put(ctx, a, map[string]any{ArtifactScore: scoreArtifact, ArtifactVerdict: v}); err != nil {
		return err
	}
	if v.Passed {
		a.log(s, "gates passed at "+st.Evolution.Level+": approved automatically")
		a.to, a.why = StatusApproved, ""
		ap, err := s.newApply(id, a.data, ApprovedByAuto, "")
		if err != nil {
			return err
		}
		a.apply = &ap
		return nil
	}
	a.log(s, "not applied automatically: "+v.Reason)
	a.to, a.why = StatusAwaitingReview, v.Reason
	return nil
}

// lower is what a workspace file can be a byte-equal copy of: the global files,
// and the built-in ones no global file replaces.
func lower(global []workspace.File) []workspace.File {
	out := append([]workspace.File(nil), global...)
	have := map[string]bool{}
	for _, f := range global {
		have[f.Path] = true
	}
	for _, f := range chat.Builtin() {
		if !have[f.Path] {
			out = append(out, f)
		}
	}
	return out
}

// applyPatch returns the workspace's files with the patch applied: files
// written (path validated, size bounded), each folder they create completed
// with the other files of the lower folder it replaces (evolution.FolderCopies
// on live, the effective surface: what the apply publishes too), and files
// deleted, within the surface's file limit. A *runFailure (ReasonPatchPaths)
// when the patch does not fit.
func applyPatch(ws string, own []workspace.File, live []workspace.EffectiveFile, p evolution.Patch, now time.Time) ([]workspace.File, error) {
	byPath := map[string]workspace.File{}
	for _, f := range own {
		byPath[f.Path] = f
	}
	for _, f := range p.Files {
		if err := workspace.ValidatePath(f.Path); err != nil {
			return nil, fail(ReasonPatchPaths+":invalid_path", "patch path %q: %v", f.Path, err)
		}
		if len(f.Content) > workspace.MaxFileSize {
			return nil, fail(ReasonPatchPaths+":too_large", "patch file %q over %d bytes", f.Path, workspace.MaxFileSize)
		}
		byPath[f.Path] = workspace.NewFile(ws, f.Path, []byte(f.Content), now)
	}
	written := make([]string, 0, len(p.Files))
	for _, f := range p.Files {
		written = append(written, f.Path)
	}
	for path, content := range evolution.FolderCopies(live, written) {
		byPath[path] = workspace.NewFile(ws, path, content, now)
	}
	for _, path := range p.Deletes {
		if err := workspace.ValidatePath(path); err != nil {
			return nil, fail(ReasonPatchPaths+":invalid_path", "patch delete %q: %v", path, err)
		}
		delete(byPath, path)
	}
	if len(byPath) > workspace.MaxFiles {
		return nil, fail(ReasonPatchPaths+":too_many_files", "the sandbox would hold %d files, over %d", len(byPath), workspace.MaxFiles)
	}
	out := make([]workspace.File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// patchInSandbox is the score's patchInSandbox check, computed here: every file
// the patch writes is on the sandbox surface with exactly its new bytes.
func patchInSandbox(sandbox []workspace.EffectiveFile, p evolution.Patch) bool {
	byPath := map[string][]byte{}
	for _, f := range sandbox {
		byPath[f.Path] = f.Content
	}
	for _, f := range p.Files {
		got, ok := byPath[f.Path]
		if !ok || !bytes.Equal(got, []byte(f.Content)) {
			return false
		}
	}
	return true
}

// dryRun has the source agent answer message on the sandbox surface, as a root
// session with workspace access only. It offers the agent no tools: the tools
// the runtime has act on the live workspace, not on the sandbox, and the egress
// ones are never offered at workspace access (evolution.IsEgressTool), so the
// dry-run is one model call. An agent the patch broke (agent.yaml malformed,
// agent gone) is reported in DryRun.Error for the scorer, not as a failure.
func (s *Service) dryRun(ctx context.Context, sandbox []workspace.EffectiveFile, agent, message string) (DryRun, error) {
	dr := DryRun{Message: message}
	p, err := chat.Assemble(chat.PromptInput{Surface: sandbox, Agent: agent, Root: true})
	if err != nil {
		dr.Error = clip(err.Error(), 500)
		return dr, nil
	}
	maxTokens := s.cfg.DryRunMaxTokens
	if p.Agent.Model.MaxTokens > 0 {
		maxTokens = p.Agent.Model.MaxTokens
	}
	res, err := chat.Loop{Model: s.model, System: p.System,
		Messages: []model.Message{{Role: model.RoleUser, Text: message}},
		MaxSteps: 1, MaxTokens: maxTokens, Timeout: s.cfg.ModelTimeout}.Run(ctx)
	if err != nil {
		return DryRun{}, &modelFailure{err}
	}
	dr.Reply, dr.Steps = res.Reply(), res.Steps
	return dr, nil
}

// newApply returns the pending apply of run id's approval (approvedBy auto or
// reviewer), ready for a CreateItem op: the workspace's apply lock named, Data
// ApplyData.
func (s *Service) newApply(id string, d Data, approvedBy, reviewerHint string) (work.Item, error) {
	now := s.clock.Now().UTC()
	ad, err := json.Marshal(ApplyData{Workspace: d.Workspace, Runs: []string{id}, ApprovedBy: approvedBy,
		ReviewerHint: reviewerHint})
	if err != nil {
		return work.Item{}, fmt.Errorf("encode apply data: %w", err)
	}
	it := work.Item{Kind: work.KindApply, ID: s.ids.NewID(), Workspace: d.Workspace, LockKey: ApplyLockKey(d.Workspace),
		Status: ApplyPending, Data: ad, CreatedAt: now, UpdatedAt: now, OpID: s.ids.NewID()}
	if err := it.Validate(); err != nil {
		return work.Item{}, err
	}
	return it, nil
}

// finish is the attempt's terminal write: a.to with the results and log, and
// for an auto approval the pending apply in the same transaction, then its
// wake-up (the executor wakes the next pending runs: a slot is free).
func (s *Service) finish(a *attempt) work.Outcome {
	d := a.data
	res := a.res
	d.Result = &res
	if a.apply != nil {
		d.addApply(a.apply.ID, ApprovedByAuto)
	}
	d.log(s.clock.Now(), a.c.Attempts, "ended "+string(a.to))
	o := work.End(a.to, a.why, d.Encode())
	if a.apply != nil {
		o = o.With(work.CreateItem{Item: *a.apply}).Waking(queue.Message{Kind: string(work.KindApply), ID: a.apply.ID})
	}
	return o
}

// giveBack returns the claimed run to pending with reason, writing its log and
// nothing else; wake sends its wake-up at once (otherwise the tick re-sends it).
func (s *Service) giveBack(a *attempt, reason string, wake bool) work.Outcome {
	d := a.data
	d.log(s.clock.Now(), a.c.Attempts, "attempt given back: "+reason)
	return work.GiveBack(reason, wake, d.Encode())
}
