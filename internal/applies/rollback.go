package applies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Stable codes of a refused rollback (molt.Error.Reason of an ECONFLICT; the
// API's problem code).
const (
	CodeNotApplied     = "not_applied"     // the apply is not applied
	CodeApplyInFlight  = "apply_in_flight" // an apply (or rollback) of the workspace is pending, running or syncing
	CodeNoSnapshot     = "no_snapshot"     // the manifest is unreadable, a path escapes the surface, a backup is missing
	CodeConflict       = "conflict"        // files changed since the apply (Details: {"conflicts": [{rel, reason}]})
	CodeBackupMismatch = "backup_mismatch" // a backup does not hash to its before (Details: {"files": [...]})
)

// Per-file states of a rollback.
const (
	StateClean      = "clean"      // hash = after: rolled back
	StateReverted   = "reverted"   // hash = before, or a new file already gone: skipped
	StateModified   = "modified"   // changed since the apply: needs force
	StateMissing    = "missing"    // an overwritten file is gone: needs force
	StateUnverified = "unverified" // the manifest has no hashes: needs force
)

// Actions a rollback took on a file.
const (
	ActionRestored = "restored"
	ActionRemoved  = "removed"
	ActionSkipped  = "skipped"
)

// RollbackResult is what a rollback did. The API replies with OK, Restored,
// Removed, RemovedDirs and KeptDirs; ROLLBACK.json and the apply's data keep it
// all.
type RollbackResult struct {
	OK          bool           `json:"ok"`
	Restored    []string       `json:"restored"`
	Removed     []string       `json:"removed"`
	RemovedDirs []string       `json:"removedDirs"`
	KeptDirs    []string       `json:"keptDirs"`
	ApplyID     string         `json:"applyId,omitempty"`
	RollbackID  string         `json:"rollbackId,omitempty"`
	At          time.Time      `json:"at"`
	Force       bool           `json:"force"`
	Files       []RollbackFile `json:"files,omitempty"`
}

// RollbackFile is one manifest file's state when the rollback ran and what it did.
type RollbackFile struct {
	Rel    string `json:"rel"`
	Kind   string `json:"kind"`
	State  string `json:"state"`
	Action string `json:"action"`
}

// Conflict is one file that needs force.
type Conflict struct {
	Rel    string `json:"rel"`
	Reason string `json:"reason"`
}

// rollbackData is a rollback item's Data.
type rollbackData struct {
	Apply   string          `json:"apply"`
	Force   bool            `json:"force"`
	Result  *RollbackResult `json:"result,omitempty"`
	Refused string          `json:"refused,omitempty"`
}

func refuse(code string, details any, format string, args ...any) error {
	return &molt.Error{Code: molt.ECONFLICT, Reason: code, Message: fmt.Sprintf(format, args...), Details: details}
}

// Rollback rolls back an applied apply (its states: docs/architecture.md, "State machines"). It holds the workspace's
// apply lock throughout (a rollback item created already claimed, see the
// package documentation), so no apply of the workspace can run meanwhile. It
// returns ENOTFOUND, or ECONFLICT with one of the Code* reasons and nothing
// written to the surface: not_applied, apply_in_flight, no_snapshot, conflict
// (without force; Details {"conflicts": [{rel, reason}]}), backup_mismatch
// (even with force; Details {"files": [...]}).
func (s *Service) Rollback(ctx context.Context, id string, force bool) (RollbackResult, error) {
	it, d, err := s.Get(ctx, id)
	if err != nil {
		return RollbackResult{}, err
	}
	if it.Status != StatusApplied {
		return RollbackResult{}, refuse(CodeNotApplied, nil, "apply %s is %s, not applied", id, it.Status)
	}
	if err := s.checkInFlight(ctx, d.Workspace, ""); err != nil {
		return RollbackResult{}, err
	}
	rc, claimed, err := s.claimRollback(ctx, it, d.Workspace, force)
	if err != nil {
		return RollbackResult{}, err
	}
	// From here the executor finishes or ends the rollback item, whatever
	// becomes of the request.
	var res RollbackResult
	err = s.rollbacks.Run(context.WithoutCancel(ctx), rc, claimed, func(ctx context.Context, a *work.Attempt) work.Outcome {
		var o work.Outcome
		res, o = s.rollback(ctx, a, id, force)
		return o
	})
	if err != nil {
		return RollbackResult{}, err
	}
	return res, nil
}

// rollbackExecutor returns the rollback kind's executor: rollbacks are
// claimed as they are created (claimRollback) and run in the request
// (Executor.Run), with the same keep-alive, deadline and final write as every
// other kind; when one ends, the applies its lock held back are woken.
func (s *Service) rollbackExecutor() *work.Executor[struct{}] {
	return &work.Executor[struct{}]{Protocol: s.proto, Queue: s.queue, Logger: s.log, Kind: KindRollback,
		Policy: func(context.Context) (work.Policy, struct{}, error) {
			p := s.RollbackPolicy(settings.Settings{})
			p.Heartbeat, p.AttemptTimeout = s.cfg.RollbackTimeout/4, s.cfg.RollbackTimeout
			return p, struct{}{}, nil
		},
		Prepare: func(context.Context, work.Item, work.Policy, struct{}) (work.AttemptFunc, error) {
			return nil, nil // rollbacks are never claimed from a wake-up
		},
		Next: func(ctx context.Context, ended work.Item, _ work.Policy) ([]string, error) {
			return s.nextApplies(ctx, ended.Workspace)
		}}
}

// checkInFlight refuses while an apply of ws is pending, running or syncing, or
// anything but holder holds its lock.
func (s *Service) checkInFlight(ctx context.Context, ws, holder string) error {
	for _, st := range []work.Status{StatusPending, StatusRunning, StatusSyncing} {
		q := work.ListQuery{Kind: work.KindApply, Status: st, Page: page.Query{Limit: 100}}
		for pages := 0; pages < 20; pages++ {
			pg, err := s.store.ListItems(ctx, q)
			if err != nil {
				return fmt.Errorf("list %s applies: %w", st, err)
			}
			for _, it := range pg.Items {
				if it.LockKey == LockKey(ws) || it.Workspace == ws {
					return refuse(CodeApplyInFlight, nil, "apply %s of workspace %s is %s", it.ID, ws, it.Status)
				}
			}
			if pg.Next == "" {
				break
			}
			q.Page.Cursor = pg.Next
		}
	}
	h, err := s.store.LockHolder(ctx, LockKey(ws))
	if err != nil {
		return fmt.Errorf("read lock of %s: %w", ws, err)
	}
	if h != "" && h != holder {
		return refuse(CodeApplyInFlight, nil, "%s holds the apply lock of workspace %s", h, ws)
	}
	return nil
}

// claimRollback creates the rollback's item already claimed
// (Protocol.CreateClaimed): in one write the item, a slot of its kind, the
// workspace's apply lock, and a touch of the apply (seen, as read: still
// applied and unchanged; its op id renewed, nothing else) so that a writer
// conditional on the apply as it read it before (deleting its run) fails. A
// held lock is apply_in_flight; an apply that moved is read again (no longer
// applied: not_applied).
func (s *Service) claimRollback(ctx context.Context, seen work.Item, ws string, force bool) (work.Claim, work.Item, error) {
	for try := 0; ; try++ {
		data, _ := json.Marshal(rollbackData{Apply: seen.ID, Force: force})
		it := work.Item{Kind: KindRollback, Workspace: ws, LockKey: LockKey(ws), Data: data}
		// The touch keeps the apply's updated_at: it is not a change of its state.
		touch := s.proto.UpdateSeenOp(seen, work.Edit{KeepUpdatedAt: true})
		c, claimed, err := s.proto.CreateClaimed(ctx, it, 0, touch)
		if err == nil {
			return c, claimed, nil
		}
		_, applyMoved := work.FailedOp(err).(work.UpdateItem)
		switch {
		case molt.ErrorReason(err) == work.ReasonLocked:
			return work.Claim{}, work.Item{}, refuse(CodeApplyInFlight, nil, "an apply or rollback of workspace %s holds its lock", ws)
		case applyMoved && try < 3:
			// The apply moved since it was read (a notice stamp, retention,
			// another rollback): read it again.
			cur, _, gerr := s.Get(ctx, seen.ID)
			if gerr != nil {
				return work.Claim{}, work.Item{}, gerr
			}
			if cur.Status != StatusApplied {
				return work.Claim{}, work.Item{}, refuse(CodeNotApplied, nil, "apply %s is %s, not applied", seen.ID, cur.Status)
			}
			seen = cur
			continue
		case molt.ErrorCode(err) == molt.ECONFLICT:
			return work.Claim{}, work.Item{}, molt.Conflict("changed", "the rollback of apply %s could not be created", seen.ID)
		}
		return work.Claim{}, work.Item{}, fmt.Errorf("rollback of apply %s: %w", seen.ID, err)
	}
}

// plan is a manifest file's state and the backup it would restore.
type plan struct {
	f      ManifestFile
	state  string
	backup []byte
	exists bool // a workspace file is there now
	cur    []byte
}

// rollback runs a claimed rollback and says how its item ends: done with the
// apply and its runs rolled back in the same write, or failed with the
// refusal (returned to the caller too).
func (s *Service) rollback(ctx context.Context, a *work.Attempt, id string, force bool) (RollbackResult, work.Outcome) {
	res, err := s.restore(ctx, a, id, force)
	if isCrash(err) {
		return RollbackResult{}, work.Leave(err)
	}
	if err != nil {
		reason := molt.ErrorReason(err)
		if reason == "" {
			reason = molt.ErrorCode(err)
		}
		b, _ := json.Marshal(rollbackData{Apply: id, Force: force, Refused: reason})
		return RollbackResult{}, work.End(rollbackFailed, reason, b).WithErr(err)
	}
	// One write: the apply and its applied runs rolled_back, the rollback
	// item done (the lock released); read again when one moved meanwhile (the
	// notice stamp, a run).
	build := func(ctx context.Context, _ work.Op) (work.Transition, []work.Op, error) {
		cur, err := s.store.GetItem(ctx, work.KindApply, id)
		if err != nil {
			return work.Transition{}, nil, err
		}
		cd, err := ParseData(cur.Data)
		if err != nil {
			return work.Transition{}, nil, err
		}
		cd.Rollback = &res
		ops := []work.Op{s.proto.UpdateSeenOp(cur, work.Edit{To: StatusRolledBack, Data: cd.Encode(), Reason: work.Ptr("rolled back")})}
		runOps, err := s.runOps(ctx, cd.Runs, runApplied, runRolledBack, nil)
		if err != nil {
			return work.Transition{}, nil, err
		}
		b, _ := json.Marshal(rollbackData{Apply: id, Force: force, Result: &res})
		return work.Transition{To: rollbackDone, Data: b, Reason: work.Ptr("rolled back apply " + id)}, append(ops, runOps...), nil
	}
	return res, work.EndWith(build, 5).Then(func(ctx context.Context, _ work.Item) {
		s.log.InfoContext(ctx, "apply rolled back", slog.String("apply_id", id), slog.Int("restored", len(res.Restored)),
			slog.Int("removed", len(res.Removed)), slog.Int("kept_dirs", len(res.KeptDirs)))
	})
}

// restore restores the files of a claimed rollback and writes ROLLBACK.json;
// the item's final write is rollback's.
func (s *Service) restore(ctx context.Context, a *work.Attempt, id string, force bool) (RollbackResult, error) {
	rc := a.Claim
	if err := s.crash("rollback:claimed", id); err != nil {
		return RollbackResult{}, err
	}
	// Under the lock: check again, then nothing can change the apply's state.
	it, d, err := s.Get(ctx, id)
	if err != nil {
		return RollbackResult{}, err
	}
	if it.Status != StatusApplied {
		return RollbackResult{}, refuse(CodeNotApplied, nil, "apply %s is %s, not applied", id, it.Status)
	}
	if err := s.checkInFlight(ctx, d.Workspace, work.Holder(KindRollback, rc.ID)); err != nil {
		return RollbackResult{}, err
	}
	want := ""
	if d.Snapshot != nil {
		want = d.Snapshot.ManifestSHA256
	}
	m, err := readManifest(ctx, s.blobs, id, want)
	if err != nil {
		return RollbackResult{}, err
	}
	if m.Workspace != "" && m.Workspace != d.Workspace {
		return RollbackResult{}, noSnapshot("the manifest names workspace %q", m.Workspace)
	}
	files, err := s.store.ListFiles(ctx, d.Workspace)
	if err != nil {
		return RollbackResult{}, fmt.Errorf("list files of %s: %w", d.Workspace, err)
	}
	live := make(map[string]workspace.File, len(files))
	for _, f := range files {
		live[f.Path] = f
	}

	// 1. Every overwrite backup must be there.
	plans := make([]plan, 0, len(m.Files))
	for _, f := range m.Files {
		p := plan{f: f}
		if cur, ok := live[f.Rel]; ok {
			p.exists, p.cur = true, cur.Content
		}
		if f.Kind == KindOverwrite {
			b, err := s.blobs.Get(ctx, beforeKey(id, f.Rel))
			if molt.ErrorCode(err) == molt.ENOTFOUND {
				return RollbackResult{}, noSnapshot("the backup of %s is missing", f.Rel)
			}
			if err != nil {
				return RollbackResult{}, fmt.Errorf("read backup of %s: %w", f.Rel, err)
			}
			p.backup = b
		}
		p.state = fileState(f, p.exists, live[f.Rel].SHA256)
		plans = append(plans, p)
	}
	// 2. Conflicts need force.
	var conflicts []Conflict
	for _, p := range plans {
		switch p.state {
		case StateModified, StateMissing, StateUnverified:
			conflicts = append(conflicts, Conflict{Rel: p.f.Rel, Reason: p.state})
		}
	}
	if len(conflicts) > 0 && !force {
		return RollbackResult{}, refuse(CodeConflict, map[string]any{"conflicts": conflicts},
			"%d file(s) changed since the apply: %s; roll back with force to overwrite them", len(conflicts), conflictList(conflicts))
	}
	// 3. A backup that is not what was there before is never restored.
	var mismatched []string
	for _, p := range plans {
		if p.f.Kind == KindOverwrite && p.f.Before != nil && Hash(p.backup) != *p.f.Before {
			mismatched = append(mismatched, p.f.Rel)
		}
	}
	if len(mismatched) > 0 {
		return RollbackResult{}, refuse(CodeBackupMismatch, map[string]any{"files": mismatched},
			"the backup of %s does not match the content before the apply", strings.Join(mismatched, ", "))
	}

	// 4. Writes: first what is about to be overwritten or removed.
	res := RollbackResult{OK: true, Restored: []string{}, Removed: []string{}, RemovedDirs: []string{},
		KeptDirs: []string{}, ApplyID: id, RollbackID: rc.ID, Force: force}
	// Nothing is written before the claim is confirmed; from here the
	// executor's keep-alive stops the writes (their context) if it is lost.
	if err := a.Confirm(ctx); err != nil {
		return RollbackResult{}, err
	}
	for _, p := range plans {
		if p.state != StateReverted && p.exists {
			if err := s.blobs.Put(ctx, rollbackPreKey(id, p.f.Rel), p.cur); err != nil {
				return RollbackResult{}, fmt.Errorf("save %s before the rollback: %w", p.f.Rel, err)
			}
		}
	}
	for k, p := range plans {
		if err := s.crash(fmt.Sprintf("rollback:file:%d", k), id); err != nil {
			return RollbackResult{}, err
		}
		rf := RollbackFile{Rel: p.f.Rel, Kind: p.f.Kind, State: p.state, Action: ActionSkipped}
		if p.state != StateReverted {
			if err := context.Cause(ctx); errors.Is(err, work.ErrClaimLost) {
				return RollbackResult{}, lostClaim(rc)
			}
			switch p.f.Kind {
			case KindOverwrite:
				if _, err := s.store.PutFile(ctx, workspace.NewFile(d.Workspace, p.f.Rel, p.backup, s.now())); err != nil {
					return RollbackResult{}, fmt.Errorf("restore %s: %w", p.f.Rel, err)
				}
				rf.Action = ActionRestored
				res.Restored = append(res.Restored, p.f.Rel)
			case KindNew:
				if p.exists {
					if err := s.store.DeleteFile(ctx, d.Workspace, p.f.Rel); err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
						return RollbackResult{}, fmt.Errorf("remove %s: %w", p.f.Rel, err)
					}
					rf.Action = ActionRemoved
					res.Removed = append(res.Removed, p.f.Rel)
				}
			}
		}
		res.Files = append(res.Files, rf)
	}
	// Created folders, deepest first: gone when no workspace file is left in them
	// (in this store a folder is its files); kept, and reported, otherwise: it
	// still overrides the global folder of that name.
	after, err := s.store.ListFiles(ctx, d.Workspace)
	if err != nil {
		return RollbackResult{}, fmt.Errorf("list files of %s: %w", d.Workspace, err)
	}
	dirs := append([]string(nil), m.CreatedDirs...)
	sortDeepestFirst(dirs)
	for _, dir := range dirs {
		if hasFileUnder(after, dir) {
			res.KeptDirs = append(res.KeptDirs, dir)
		} else {
			res.RemovedDirs = append(res.RemovedDirs, dir)
		}
	}
	res.At = s.now()

	// 5. ROLLBACK.json; the write that ends the rollback follows (rollback).
	if err := s.putJSON(ctx, rollbackKey(id), res); err != nil {
		return RollbackResult{}, err
	}
	return res, nil
}

// fileState is a manifest file's state given the workspace now.
func fileState(f ManifestFile, exists bool, sha string) string {
	if f.After == "" || (f.Kind == KindOverwrite && f.Before == nil) {
		if f.Kind == KindNew && !exists {
			return StateReverted
		}
		return StateUnverified
	}
	switch f.Kind {
	case KindOverwrite:
		switch {
		case !exists:
			return StateMissing
		case sha == f.After:
			return StateClean
		case sha == *f.Before:
			return StateReverted
		}
		return StateModified
	default:
		switch {
		case !exists:
			return StateReverted
		case sha == f.After:
			return StateClean
		}
		return StateModified
	}
}

func hasFileUnder(files []workspace.File, dir string) bool {
	for _, f := range files {
		if strings.HasPrefix(f.Path, dir+"/") {
			return true
		}
	}
	return false
}

func conflictList(cs []Conflict) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, c.Rel+" ("+c.Reason+")")
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
