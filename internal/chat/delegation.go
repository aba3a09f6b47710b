package chat

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/a2aclient"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Reasons of delegated turns.
const (
	ReasonRemote     = "remote"      // prefix: "remote:<safe reason>", a dispatch to a remote failed
	ReasonSubSession = "sub_session" // the sub-session of a dispatch could not be opened
)

// MaxReportText bounds the answer a delegated turn appends to its parent
// session (the whole answer stays in the sub-session, or the remote task).
const MaxReportText = 4000

// sessionAccess is a session's recorded access as the gate reads it.
type sessionAccess string

func (a sessionAccess) CanChat(string) bool { return accessRank(string(a)) >= auth.Workspace.Rank() }
func (a sessionAccess) IsFull() bool        { return accessRank(string(a)) >= auth.Full.Rank() }

// route runs the resolver on the message a turn answers, when the session's
// agent has delegation: true and the session is a root session (a
// sub-session never delegates again). d gets the decision; a dispatch is
// returned only when delegate.Prepare, the one gate, allowed it against the
// live registry and the session's access.
func (s *Service) route(ctx context.Context, d *TurnData, sess session.Session, msgs []session.Message,
	surface []workspace.EffectiveFile) (*delegate.Route, error) {
	if sess.Parent != "" || d.CompactOnly {
		return nil, nil
	}
	ag, ok := agentOf(surface, sess.Agent)
	if !ok || !ag.Delegation {
		return nil, nil // not delegating (a broken agent.yaml fails in answer)
	}
	text, ok := userText(msgs, d.UserSeq)
	if !ok {
		return nil, nil
	}
	reg, err := delegate.LiveRegistry(ctx, s.store, sess.Workspace, surface)
	if err != nil {
		return nil, err
	}
	res := delegate.Resolve(text, reg)
	if res.Decision == delegate.Dispatch && res.Kind == delegate.KindAgent && res.Target == sess.Agent {
		res.Decision, res.Reason = delegate.Local, "self" // the agent was asked for itself
	}
	var rt *delegate.Route
	if res.Decision == delegate.Dispatch {
		r, checked, err := delegate.Prepare(res, reg, sess.Workspace, sessionAccess(sess.Access))
		res = checked
		if err == nil {
			rt = &r
		}
	}
	d.Decision, d.Target, d.TargetKind, d.Method, d.DecisionReason = res.Decision, res.Target, res.Kind, res.Method, res.Reason
	s.log.InfoContext(ctx, "delegation decided", slog.String("decision", res.Decision), slog.String("target", res.Target),
		slog.String("kind", res.Kind), slog.String("method", res.Method), slog.String("reason", res.Reason))
	return rt, nil
}

// agentOf parses agents/<id>/agent.yaml of surface (ok false when absent or
// malformed).
func agentOf(surface []workspace.EffectiveFile, id string) (Agent, bool) {
	for _, f := range surface {
		if f.Path == "agents/"+id+"/agent.yaml" {
			a, err := ParseAgent(f.Path, f.Content)
			return a, err == nil
		}
	}
	return Agent{}, false
}

func userText(msgs []session.Message, seq int) (string, bool) {
	for _, m := range msgs {
		if m.Seq == seq && m.Role == session.RoleUser {
			return m.Text, true
		}
	}
	return "", false
}

// subSessionID is the sub-session a turn's dispatch opens, and subTurnID the
// turn that answers there: derived from the turn, so every attempt of it
// opens the same one.
func subSessionID(turnID string) string { return turnID + ".sub" }
func subTurnID(turnID string) string    { return turnID + ".sub" }

// dispatchAgent hands the message to a workspace agent: it opens the
// sub-session (idempotent: its id is the turn's), then ends the turn with one
// "delegated" line, the sub-session's user message and the turn that
// answers it, all in the final write.
func (s *Service) dispatchAgent(ctx context.Context, a *work.Attempt, d TurnData, sess session.Session,
	msgs []session.Message, rt delegate.Route) work.Outcome {
	it := a.Item
	sub := session.Session{ID: subSessionID(it.ID), Workspace: sess.Workspace, Agent: rt.Target.Name,
		Access: sess.Access, Parent: sess.ID, External: sess.External}
	_, err := s.store.CreateSession(ctx, sub)
	if molt.ErrorCode(err) == molt.ECONFLICT {
		// An earlier attempt opened it: the same one, or refuse.
		cur, gerr := s.store.GetSession(ctx, sub.ID)
		switch {
		case gerr != nil:
			err = gerr
		case cur.Parent != sess.ID || cur.Agent != sub.Agent:
			err = fmt.Errorf("session %s exists and is not this dispatch's", sub.ID)
		default:
			err = nil
		}
	}
	if err != nil {
		if molt.ErrorCode(err) == molt.EUNAVAILABLE || molt.ErrorCode(err) == molt.EINTERNAL {
			return work.GiveBack("error", false, nil).WithErr(fmt.Errorf("turn %s: open sub-session: %w", it.ID, err))
		}
		s.log.WarnContext(ctx, "sub-session not opened", slog.String("error", err.Error()))
		return s.finish(ctx, it, d, sess, msgs, outcome{notice: "Could not hand this message to " + rt.Target.Name + "."},
			StatusFailed, ReasonSubSession)
	}
	d.SubSession, d.SubTurn = sub.ID, subTurnID(it.ID)
	out := outcome{notice: fmt.Sprintf("Delegated to %s (%s); its answer will appear here.", rt.Target.Name, d.Method),
		cross: []crossMessage{{sessionID: sub.ID, role: session.RoleUser, text: rt.Message,
			turnID: d.SubTurn, reportAs: rt.Target.Name}}}
	if s.cfg.BeforeFinish != nil {
		if herr := s.cfg.BeforeFinish(TurnContext{Turn: it, Claim: a.Claim, Reply: out.notice}); herr != nil {
			return work.Leave(fmt.Errorf("turn %s abandoned before commit: %w", it.ID, herr))
		}
	}
	return s.finish(ctx, it, d, sess, msgs, out, StatusDone, "")
}

// otherSessions reads the sessions a final write appends to besides the
// turn's own: those of out.cross, and the parent of a delegated turn. One
// that is gone is left out.
func (s *Service) otherSessions(ctx context.Context, d TurnData, out outcome) (map[string]session.Session, error) {
	others := map[string]session.Session{}
	ids := []string{}
	if d.ReportTo != "" {
		ids = append(ids, d.ReportTo)
	}
	for _, c := range out.cross {
		ids = append(ids, c.sessionID)
	}
	for _, id := range ids {
		cur, err := s.store.GetSession(ctx, id)
		switch {
		case molt.ErrorCode(err) == molt.ENOTFOUND:
		case err != nil:
			return nil, fmt.Errorf("read session %s: %w", id, err)
		default:
			others[id] = cur
		}
	}
	return others, nil
}

// crossOps are the final write's ops on other sessions: out.cross (with the
// turns they create), and a delegated turn's answer line to its parent.
func (s *Service) crossOps(turnID string, d TurnData, sess session.Session, out outcome, status work.Status,
	others map[string]session.Session) []work.Op {
	if sess.ID == "" {
		return nil
	}
	now := s.clock.Now().UTC()
	var ops []work.Op
	seq := map[string]int{}
	add := func(sessionID, role, text, msgTurn string) (session.Session, int, bool) {
		cs, ok := others[sessionID]
		if !ok {
			return cs, 0, false
		}
		n := cs.NextSeq + seq[sessionID]
		seq[sessionID]++
		ops = append(ops, session.AppendMessage{Message: session.Message{SessionID: cs.ID, Seq: n, Role: role,
			Text: storedText(text), TurnID: msgTurn, CreatedAt: now}})
		return cs, n, true
	}
	for _, c := range out.cross {
		msgTurn := turnID
		if c.turnID != "" {
			msgTurn = c.turnID
		}
		cs, n, ok := add(c.sessionID, c.role, c.text, msgTurn)
		if !ok || c.turnID == "" {
			continue
		}
		td := TurnData{SessionID: cs.ID, UserSeq: n, ReportTo: sess.ID, ReportAs: c.reportAs}
		ops = append(ops, work.CreateItem{Item: work.Item{Kind: work.KindTurn, ID: c.turnID, Workspace: cs.Workspace,
			Status: work.StatusPending, LockKey: LockKey(cs.ID), Data: td.encode(), CreatedAt: now, UpdatedAt: now,
			OpID: s.ids.NewID()}})
	}
	if d.ReportTo != "" {
		add(d.ReportTo, session.RoleSystem, reportLine(d.ReportAs, status, replyText(out)), turnID)
	}
	return ops
}

// reportLine is the one line a delegated answer appears as in the session
// that asked for it.
func reportLine(who string, status work.Status, text string) string {
	text = clip(strings.TrimSpace(text), MaxReportText)
	if status != StatusDone {
		return who + " could not answer: " + text
	}
	return who + " answered: " + text
}

// dispatchRemote hands the message to a remote A2A agent: a non-blocking
// SendMessage (skipped when an earlier attempt already sent and
// checkpointed the task), then GetTask every RemotePoll until the task ends
// or RemoteWait has passed (the turn is then given back, and a later attempt
// reads on). The answer, or the failure with a safe reason, is the turn's
// one system line; the session is marked external in the same write.
func (s *Service) dispatchRemote(ctx context.Context, a *work.Attempt, d TurnData, sess session.Session,
	msgs []session.Message, rt delegate.Route) work.Outcome {
	it := a.Item
	name := rt.Target.Name
	sent := d.RemoteTask != ""
	fail := func(reason string) work.Outcome {
		s.log.WarnContext(ctx, "remote dispatch failed", slog.String("target", name), slog.String("reason", reason))
		return s.finishRemote(ctx, a, d, sess, msgs, outcome{notice: fmt.Sprintf("%s could not answer (%s).", name, reason),
			external: sent}, StatusFailed, ReasonRemote+":"+reason)
	}
	rm, err := delegate.LookupRemote(ctx, s.store, sess.Workspace, name)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return fail(delegate.ReasonGone)
	}
	if err != nil {
		return work.GiveBack("error", false, nil).WithErr(fmt.Errorf("turn %s: %w", it.ID, err))
	}
	token, err := s.token(ctx, rm.TokenRef)
	if err != nil {
		r := molt.ErrorReason(err)
		if r == "" {
			r = "token"
		}
		return fail(r)
	}
	if d.RemoteTask == "" {
		if err := a.Confirm(ctx); err != nil {
			return work.Leave(err) // not ours any more: send nothing
		}
		endpoint, err := s.a2a.Endpoint(ctx, rm.CardURL)
		if err != nil {
			return fail(a2aclient.Reason(err))
		}
		sent = true // it may have arrived even when the answer did not
		t, err := s.a2a.Send(ctx, endpoint, token, it.ID, rt.Message)
		if err != nil {
			return fail(a2aclient.Reason(err))
		}
		if t.ID == "" || a2aclient.Terminal(t.State) {
			return s.remoteEnded(ctx, a, d, sess, msgs, name, t)
		}
		d.RemoteTask, d.RemoteURL = t.ID, endpoint
		if err := a.Checkpoint(ctx, work.StatusRunning, d.encode()); err != nil {
			return work.Leave(fmt.Errorf("turn %s: record remote task: %w", it.ID, err))
		}
	}
	poll := time.NewTicker(s.cfg.RemotePoll)
	defer poll.Stop()
	for polls := int(s.cfg.RemoteWait / s.cfg.RemotePoll); polls >= 0; polls-- {
		t, err := s.a2a.Get(ctx, d.RemoteURL, token, d.RemoteTask)
		switch {
		case err != nil && ctx.Err() == nil && strings.HasPrefix(a2aclient.Reason(err), "rpc_"):
			return fail(a2aclient.Reason(err)) // the remote refused: reading again will not help
		case err == nil && a2aclient.Terminal(t.State):
			return s.remoteEnded(ctx, a, d, sess, msgs, name, t)
		}
		select {
		case <-ctx.Done():
			polls = -1
		case <-poll.C:
		}
	}
	if a.Interrupted() || a.AttemptsLeft() {
		return work.GiveBack("remote_working", a.Interrupted(), nil)
	}
	return fail("timeout")
}

// remoteEnded ends a remote dispatch whose task ended.
func (s *Service) remoteEnded(ctx context.Context, a *work.Attempt, d TurnData, sess session.Session,
	msgs []session.Message, name string, t a2aclient.Task) work.Outcome {
	if t.State != a2aclient.StateCompleted {
		st := strings.ToLower(strings.TrimPrefix(t.State, "TASK_STATE_"))
		if st == "" {
			st = "unknown"
		}
		return s.finishRemote(ctx, a, d, sess, msgs, outcome{notice: fmt.Sprintf("%s could not answer (task %s).", name, st),
			external: true}, StatusFailed, ReasonRemote+":"+st)
	}
	return s.finishRemote(ctx, a, d, sess, msgs, outcome{notice: reportLine(name, StatusDone, t.Text), external: true}, StatusDone, "")
}

func (s *Service) finishRemote(ctx context.Context, a *work.Attempt, d TurnData, sess session.Session,
	msgs []session.Message, out outcome, status work.Status, reason string) work.Outcome {
	if s.cfg.BeforeFinish != nil {
		if herr := s.cfg.BeforeFinish(TurnContext{Turn: a.Item, Claim: a.Claim, Reply: out.notice}); herr != nil {
			return work.Leave(fmt.Errorf("turn %s abandoned before commit: %w", a.Item.ID, herr))
		}
	}
	return s.finish(ctx, a.Item, d, sess, msgs, out, status, reason)
}
