package runs

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// EvoCommand is the chat command that queues a run.
const EvoCommand = "/evo"

// QueuedNotice is the one system line a run's enqueue adds to its session.
const QueuedNotice = "Queued for evaluation (evolution run %s)."

// Reasons of the refusals of /evo (EFORBIDDEN).
const (
	ReasonEvoForbidden  = "evo_forbidden"   // not a full-access session or caller
	ReasonEvoSubSession = "evo_sub_session" // sub-sessions never trigger runs
)

// maxSeqRaces bounds the re-reads of a session whose next seq moved under the
// enqueue's write.
const maxSeqRaces = 8

// Evo is the /evo [hint] chat command: from a root session opened with full
// access, by a caller with a full token, it queues a run (see Enqueue) and
// returns it. Errors: EFORBIDDEN with ReasonEvoForbidden or ReasonEvoSubSession;
// EINVALID for a hint over MaxHint characters.
func (s *Service) Evo(ctx context.Context, _ *chat.Service, req chat.CommandRequest) (work.Item, error) {
	sess := req.Session
	switch {
	case sess.Parent != "":
		return work.Item{}, &molt.Error{Code: molt.EFORBIDDEN, Reason: ReasonEvoSubSession,
			Message: "/evo works in root sessions only; this is a sub-session"}
	case req.Caller.Token.Level != auth.Full:
		return work.Item{}, &molt.Error{Code: molt.EFORBIDDEN, Reason: ReasonEvoForbidden,
			Message: "/evo needs a full-access token"}
	case sess.Access != session.AccessFull:
		return work.Item{}, &molt.Error{Code: molt.EFORBIDDEN, Reason: ReasonEvoForbidden,
			Message: "/evo needs a session opened with full access; this one has " + orUnknown(sess.Access) + " access"}
	}
	if utf8.RuneCountInString(req.Args) > MaxHint {
		return work.Item{}, molt.Invalid("text", "the /evo hint is over %d characters", MaxHint)
	}
	return s.Enqueue(ctx, sess, TriggerEvo, req.Args)
}

// Enqueue queues a run of sess, synchronously: it stores the frozen snapshot
// (the session's messages, the tool-flow view, metadata and the prompt surface
// as the session sees it), then creates the run pending and appends exactly one
// system line (QueuedNotice) to the session in one write, and sends the run's
// wake-up. It does no access check (Evo does).
func (s *Service) Enqueue(ctx context.Context, sess session.Session, trigger, hint string) (work.Item, error) {
	id := s.ids.NewID()
	msgs, err := s.loadMessages(ctx, sess.ID)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return work.Item{}, molt.NotFound("session %s not found", sess.ID)
		}
		return work.Item{}, err
	}
	now := s.clock.Now().UTC()
	d, err := s.snapshot(ctx, id, sess, trigger, strings.TrimSpace(hint), "", msgs, now)
	if err != nil {
		return work.Item{}, err
	}
	it := work.Item{Kind: work.KindRun, ID: id, Workspace: sess.Workspace, Data: d.Encode()}
	for try := 0; try < maxSeqRaces; try++ {
		msg := session.Message{SessionID: sess.ID, Seq: sess.NextSeq, Role: session.RoleSystem,
			Text: fmt.Sprintf(QueuedNotice, id), CreatedAt: now}
		created, err := s.proto.Create(ctx, it, session.AppendMessage{Message: msg})
		if molt.ErrorReason(err) == work.ReasonAlsoFailed {
			// A message took the seq (or the session is gone): read it again.
			sid := sess.ID
			if sess, err = s.store.GetSession(ctx, sid); err != nil {
				if molt.ErrorCode(err) == molt.ENOTFOUND {
					return work.Item{}, molt.NotFound("session %s not found", sid)
				}
				return work.Item{}, fmt.Errorf("reread session %s: %w", sid, err)
			}
			continue
		}
		if err != nil {
			return work.Item{}, fmt.Errorf("enqueue run of session %s: %w", sess.ID, err)
		}
		s.wake(ctx, work.KindRun, created.ID)
		return created, nil
	}
	return work.Item{}, molt.Unavailable(nil, "session %s: messages kept arriving; try again", sess.ID)
}

// PreCompactID is the id of the pre-compact run of a compacting turn: derived
// from the turn's, so however often the turn's final write is tried, it creates
// at most one run (and it sorts right after the turn).
func PreCompactID(turnID string) string { return turnID + ".pc" }

// PreCompact is the chat runtime's compaction hook (chat.HandleCompacted): at
// level L1 or above with triggers.pre_compact on, the turn that compacted a root
// session creates one pre-compact run in its own final write, with the queued
// notice, and wakes it once that write landed. The snapshot is the session's
// messages as the turn leaves them (the turn's reply included).
func (s *Service) PreCompact(ctx context.Context, t chat.CompactedTurn) (chat.CompactedEffect, error) {
	if t.Session.Parent != "" {
		return chat.CompactedEffect{}, nil
	}
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return chat.CompactedEffect{}, fmt.Errorf("read settings: %w", err)
	}
	if !levelAtLeast(st.Evolution.Level, settings.L1) || !st.Evolution.Triggers.PreCompact {
		return chat.CompactedEffect{}, nil
	}
	id := PreCompactID(t.Turn.ID)
	msgs, err := s.loadMessages(ctx, t.Session.ID)
	if err != nil {
		return chat.CompactedEffect{}, err
	}
	msgs = append(msgs, t.Appended...)
	now := t.Now
	if now.IsZero() {
		now = s.clock.Now().UTC()
	}
	d, err := s.snapshot(ctx, id, t.Session, TriggerPreCompact, "", t.Turn.ID, msgs, now)
	if err != nil {
		return chat.CompactedEffect{}, err
	}
	it := work.Item{Kind: work.KindRun, ID: id, Workspace: t.Session.Workspace, Status: StatusPending,
		Data: d.Encode(), CreatedAt: now, UpdatedAt: now, OpID: s.ids.NewID()}
	if err := it.Validate(); err != nil {
		return chat.CompactedEffect{}, err
	}
	return chat.CompactedEffect{
		Ops:    []work.Op{work.CreateItem{Item: it}},
		Notice: fmt.Sprintf(QueuedNotice, id),
		After:  func(ctx context.Context) { s.wake(ctx, work.KindRun, id) },
	}, nil
}

// snapshot stores the run's frozen snapshot and returns its Data.
func (s *Service) snapshot(ctx context.Context, id string, sess session.Session, trigger, hint, turn string,
	msgs []session.Message, now time.Time) (Data, error) {
	_, _, eff, err := s.surface(ctx, sess.Workspace)
	if err != nil {
		return Data{}, err
	}
	access := orUnknown(sess.Access)
	if sess.External {
		access = evolution.SourceExternal
	}
	meta := Meta{ID: id, Trigger: trigger, SourceSession: sess.ID, SourceTurn: turn, Hint: hint,
		Workspace: sess.Workspace, Agent: sess.Agent, SourceAccess: access, Created: now,
		SessionSummary: sess.Summary, SummarySeq: sess.SummarySeq}
	if msgs == nil {
		msgs = []session.Message{}
	}
	puts := []struct {
		name string
		v    any
	}{
		{ArtifactMessages, msgs},
		{ArtifactMeta, meta},
		{ArtifactSurface, surfaceContext(eff, sess.Agent, sess.Parent == "")},
	}
	for _, p := range puts {
		if err := putJSON(ctx, s.blobs, SnapshotKey(id, p.name), p.v); err != nil {
			return Data{}, fmt.Errorf("store snapshot of run %s: %w", id, err)
		}
	}
	if err := s.blobs.Put(ctx, SnapshotKey(id, ArtifactToolFlow), []byte(toolFlow(msgs))); err != nil {
		return Data{}, fmt.Errorf("store snapshot of run %s: %w", id, err)
	}
	d := Data{Workspace: sess.Workspace, SourceSession: sess.ID, SourceTurn: turn, Agent: sess.Agent,
		Trigger: trigger, Hint: hint, SourceAccess: access, Snapshot: summarize(msgs), CreatedAt: now}
	d.log(now, 0, "queued ("+trigger+")")
	return d, nil
}

func orUnknown(access string) string {
	if access == "" {
		return "unknown"
	}
	return access
}
