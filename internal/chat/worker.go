package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Handle is the turn worker (queue.Handler for work.KindTurn wake-ups). A wake-up
// is only a hint: the turn's state in the store decides.
//
//   - A turn that is not pending (done, running elsewhere, gone) is left alone:
//     a duplicate or late wake-up is harmless.
//   - A turn waits (nil, message dropped) while the session's previous turn is
//     pending or running; that turn wakes it when it ends. Turns of a session so
//     run one at a time, in the order their messages were posted.
//   - Claim: "locked", "not_claimable" and "budget_full" return nil (the message
//     is dropped). A full budget is not the message's fault: returning an error
//     would have SQS redeliver it only after the queue's visibility timeout and
//     count it towards the dead-letter queue. The tick re-sends the wake-up of a
//     turn still pending after a minute.
//
// The claimed turn heartbeats every Timeout/4; when the claim is lost every model
// call is cancelled and nothing more is written. The reply (with any tool call and
// result messages, the summary of a compaction, and the turn's data) is committed
// in the one conditional write that makes the turn done, so a turn never appends
// its reply twice. A retryable model failure with attempts left returns the turn
// to pending and wakes it again; otherwise the turn fails with one system message
// in the same write.
func (s *Service) Handle(ctx context.Context, m queue.Message) error {
	return s.exec.Handle(ctx, m)
}

// HandleBatch handles wake-ups together (queue.BatchHandler): their claims in
// one store round trip, their final writes sharing one when ready together.
func (s *Service) HandleBatch(ctx context.Context, ms []queue.Message, rep queue.Report) {
	s.exec.HandleBatch(ctx, ms, rep)
}

// executor returns the turn kind's attempt executor.
func (s *Service) executor() *work.Executor[struct{}] {
	return &work.Executor[struct{}]{Protocol: s.proto, Queue: s.queue, Logger: s.log, Kind: work.KindTurn,
		Policy: func(context.Context) (work.Policy, struct{}, error) {
			p := s.Policy()
			p.Heartbeat, p.CommitMargin = s.cfg.HeartbeatEvery, s.cfg.CommitMargin
			return p, struct{}{}, nil
		},
		Prepare: s.prepare}
}

// prepare reads what a pending turn's attempt needs (its session and
// messages) and returns the attempt; nil when the turn must wait for the
// session's previous turn, or can never run (it is then ended here).
func (s *Service) prepare(ctx context.Context, it work.Item, _ work.Policy, _ struct{}) (work.AttemptFunc, error) {
	d, err := ParseTurnData(it.Data)
	if err != nil {
		s.abandon(ctx, it, "bad_turn_data")
		return nil, nil
	}
	ctx = obs.With(ctx, slog.String("session_id", d.SessionID))
	sess, err := s.store.GetSession(ctx, d.SessionID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		s.abandon(ctx, it, ReasonSessionDeleted)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", d.SessionID, err)
	}
	msgs, err := s.loadMessages(ctx, sess.ID, sess.SummarySeq)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		s.abandon(ctx, it, ReasonSessionDeleted)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if prev := previousTurn(msgs, d.UserSeq, it.ID); prev != "" && !writtenBy(msgs, prev) {
		p, err := s.store.GetItem(ctx, work.KindTurn, prev)
		switch {
		case err == nil && (p.Status == work.StatusPending || p.Active):
			s.log.DebugContext(ctx, "turn waits for the session's previous turn", slog.String("previous_turn_id", prev))
			return nil, nil
		case err != nil && molt.ErrorCode(err) != molt.ENOTFOUND:
			return nil, fmt.Errorf("read previous turn %s: %w", prev, err)
		}
	}
	return func(ctx context.Context, a *work.Attempt) work.Outcome {
		ctx, done := s.running.track(ctx, it.ID)
		defer done()
		return s.attempt(obs.With(ctx, slog.String("session_id", d.SessionID)), a, d, sess, msgs)
	}, nil
}

// abandon ends a pending turn that can never run (its session is gone).
func (s *Service) abandon(ctx context.Context, it work.Item, reason string) {
	_, err := s.proto.Update(ctx, work.KindTurn, it.ID, work.Change{From: []work.Status{work.StatusPending},
		Attempts: it.Attempts, To: StatusFailed, Reason: &reason})
	if err != nil && molt.ErrorCode(err) != molt.ECONFLICT {
		s.log.WarnContext(ctx, "could not end turn", slog.String("reason", reason), slog.String("error", err.Error()))
		return
	}
	s.log.InfoContext(ctx, "turn abandoned", slog.String("reason", reason))
}

// loadMessages reads every message of a session after seq after.
func (s *Service) loadMessages(ctx context.Context, id string, after int) ([]session.Message, error) {
	const pageSize = 500
	var out []session.Message
	for {
		page, err := s.store.ListMessages(ctx, id, after, pageSize)
		if err != nil {
			return nil, fmt.Errorf("list messages of session %s: %w", id, err)
		}
		out = append(out, page...)
		if len(page) == 0 {
			return out, nil
		}
		after = page[len(page)-1].Seq
		if len(page) < pageSize {
			return out, nil
		}
	}
}

// previousTurn is the turn of the last user message before userSeq (not self).
func previousTurn(msgs []session.Message, userSeq int, self string) string {
	prev := ""
	for _, m := range msgs {
		if m.Seq >= userSeq {
			break
		}
		if m.Role == session.RoleUser && m.TurnID != "" && m.TurnID != self {
			prev = m.TurnID
		}
	}
	return prev
}

// writtenBy reports whether the log holds a message the turn wrote: a turn
// writes its messages only in the write that ends it, so it has ended.
func writtenBy(msgs []session.Message, turnID string) bool {
	for _, m := range msgs {
		if m.Role != session.RoleUser && m.TurnID == turnID {
			return true
		}
	}
	return false
}

// nextTurn is the turn of the first user message after userSeq.
func nextTurn(msgs []session.Message, userSeq int) string {
	for _, m := range msgs {
		if m.Seq > userSeq && m.Role == session.RoleUser && m.TurnID != "" {
			return m.TurnID
		}
	}
	return ""
}

// outcome is what a turn will commit.
type outcome struct {
	added  []model.Message // the reply: assistant and tool messages
	notice string          // a system message (a compact-only turn's result, a failure)

	compacted bool
	summary   string
	upToSeq   int
	ifSummary int
	steps     int
	usage     model.Usage
	stepLimit bool

	// cross are messages the final write appends to other sessions: the
	// delegated message to a sub-session (with the turn that answers it).
	cross []crossMessage
	// external marks the session external in the same write (a remote's
	// answer came in).
	external bool
}

// crossMessage is a message a turn's final write appends to another session
// than its own.
type crossMessage struct {
	sessionID string
	role      string
	text      string
	// turnID, when set, is the turn created in the same write to answer the
	// (user) message; reportAs is who it answers as, to the turn's session.
	turnID, reportAs string
}

// turnFailure is a failure no retry can fix: the turn fails with notice.
type turnFailure struct {
	reason, notice string
	err            error
}

func (f *turnFailure) Error() string { return f.reason + ": " + f.err.Error() }
func (f *turnFailure) Unwrap() error { return f.err }

// modelFailure wraps an error of a model call.
type modelFailure struct{ err error }

func (f *modelFailure) Error() string { return "model: " + f.err.Error() }
func (f *modelFailure) Unwrap() error { return f.err }

// attempt answers a claimed turn and says how it ends.
func (s *Service) attempt(ctx context.Context, a *work.Attempt, d TurnData, sess session.Session, msgs []session.Message) work.Outcome {
	it := a.Item
	surface, err := s.surface(ctx, sess.Workspace)
	if err != nil {
		return work.GiveBack("error", false, nil).WithErr(fmt.Errorf("turn %s: %w", it.ID, err))
	}
	rt, err := s.route(ctx, &d, sess, msgs, surface)
	if err != nil {
		return work.GiveBack("error", false, nil).WithErr(fmt.Errorf("turn %s: delegation: %w", it.ID, err))
	}
	switch {
	case rt != nil && rt.Target.Kind == delegate.KindAgent:
		return s.dispatchAgent(ctx, a, d, sess, msgs, *rt)
	case rt != nil:
		return s.dispatchRemote(ctx, a, d, sess, msgs, *rt)
	}
	out, err := s.answer(ctx, d, sess, msgs, surface)
	if err == nil {
		if s.cfg.BeforeFinish != nil {
			if herr := s.cfg.BeforeFinish(TurnContext{Turn: it, Claim: a.Claim, Reply: replyText(out)}); herr != nil {
				return work.Leave(fmt.Errorf("turn %s abandoned before commit: %w", it.ID, herr))
			}
		}
		return s.finish(ctx, it, d, sess, msgs, out, StatusDone, "")
	}
	var tf *turnFailure
	var mf *modelFailure
	switch {
	case errors.As(err, &tf):
		s.log.WarnContext(ctx, "turn failed", slog.String("reason", tf.reason), slog.String("error", err.Error()))
		return s.finish(ctx, it, d, sess, msgs, outcome{notice: tf.notice}, StatusFailed, tf.reason)
	case a.Interrupted():
		// Shutdown or the invocation ended: give the turn back for a later attempt.
		return work.GiveBack("interrupted", true, nil).WithErr(fmt.Errorf("turn %s interrupted: %w", it.ID, context.Cause(ctx)))
	case errors.As(err, &mf):
		reason := modelReason(mf.err)
		if molt.ErrorCode(mf.err) == molt.EUNAVAILABLE && a.AttemptsLeft() {
			s.log.WarnContext(ctx, "model unavailable; turn will be retried", slog.String("reason", reason),
				slog.Int("attempt", it.Used()), slog.Int("max_attempts", s.cfg.MaxAttempts))
			return work.GiveBack(reason, true, nil)
		}
		s.log.WarnContext(ctx, "model failed; turn fails", slog.String("reason", reason), slog.String("error", mf.err.Error()),
			slog.Int("attempt", it.Used()), slog.Duration("elapsed", s.clock.Now().Sub(a.Start)))
		return s.finish(ctx, it, d, sess, msgs, outcome{notice: modelNotice(mf.err)}, StatusFailed, reason)
	default:
		// The store or something unexpected: give the turn back and let the
		// wake-up be delivered again.
		return work.GiveBack("error", false, nil).WithErr(fmt.Errorf("turn %s: %w", it.ID, err))
	}
}

func replyText(out outcome) string {
	if len(out.added) > 0 {
		return out.added[len(out.added)-1].Text
	}
	return out.notice
}

// answer prepares what the turn commits: the compaction if one is due, then the
// reply (the tool loop), or a compact-only turn's notice. It writes nothing.
func (s *Service) answer(ctx context.Context, d TurnData, sess session.Session, msgs []session.Message,
	surface []workspace.EffectiveFile) (outcome, error) {
	var out outcome
	prompt, err := Assemble(PromptInput{Surface: surface, Agent: sess.Agent, Root: sess.Parent == ""})
	if err != nil {
		var me *molt.Error
		if errors.As(err, &me) && (me.Reason == ReasonAgentNotFound || me.Reason == ReasonAgentConfig) {
			return out, &turnFailure{reason: me.Reason, err: err,
				notice: "The agent could not run: " + clip(me.Message, 500)}
		}
		return out, err
	}
	maxTokens := s.cfg.MaxTokens
	if prompt.Agent.Model.MaxTokens > 0 {
		maxTokens = prompt.Agent.Model.MaxTokens
	}
	entries := Transcript(msgs, d.UserSeq, s.IsCommand)
	summary := sess.Summary
	if d.CompactOnly || EstimateTokens(withSummary(prompt.System, summary), entries) > s.cfg.CompactTokens {
		cut, ok := CutPoint(entries, s.cfg.KeepTail)
		if !ok && !d.CompactOnly {
			cut, ok = CutPoint(entries, 1) // over budget: keep at least the message being answered
		}
		if ok {
			req := SummaryRequest(summary, entries[:cut], maxTokens)
			req.Timeout = s.cfg.ModelTimeout
			resp, err := s.model.Generate(ctx, req)
			if err != nil {
				return out, &modelFailure{err}
			}
			text := strings.TrimSpace(strings.ToValidUTF8(resp.Text, "\uFFFD"))
			if text == "" {
				return out, &modelFailure{model.Fail(model.ReasonMalformedResponse, "summary is empty", nil)}
			}
			upTo := 0
			for _, e := range entries[:cut] {
				upTo = max(upTo, e.Msg.Seq)
			}
			out.compacted, out.summary, out.upToSeq, out.ifSummary = true, clip(text, session.MaxSummary), upTo, sess.SummarySeq
			out.usage.InputTokens += resp.Usage.InputTokens
			out.usage.OutputTokens += resp.Usage.OutputTokens
			summary, entries = out.summary, entries[cut:]
		}
	}
	if d.CompactOnly {
		if out.compacted {
			out.notice = fmt.Sprintf("Compacted the conversation up to message %d into a summary.", out.upToSeq)
		} else {
			out.notice = "Nothing to compact yet: the conversation is not longer than the part that is always kept."
		}
		return out, nil
	}
	tools, unknown := s.tools.Select(prompt.Agent.Tools)
	if len(unknown) > 0 {
		s.log.DebugContext(ctx, "agent lists tools this runtime does not have", slog.Any("tools", unknown))
	}
	tools = s.gateTools(ctx, sess, tools)
	res, err := Loop{Model: s.model, System: withSummary(prompt.System, summary), Messages: ModelMessages(entries),
		Tools: tools, MaxSteps: s.cfg.MaxSteps, MaxTokens: maxTokens, Timeout: s.cfg.ModelTimeout}.Run(ctx)
	if err != nil {
		return out, &modelFailure{err}
	}
	out.added, out.steps, out.stepLimit = res.Added, res.Steps, res.StepLimit
	out.usage.InputTokens += res.Usage.InputTokens
	out.usage.OutputTokens += res.Usage.OutputTokens
	return out, nil
}

// withSummary adds a session's summary to the system prompt.
func withSummary(system, summary string) string {
	if summary == "" {
		return system
	}
	return system + "\n\n=== conversation summary (earlier messages) ===\n" + summary
}

// finish is the turn's terminal write: the status, its data, and every
// message and the summary in the same transaction. When a message was appended
// meanwhile (the seq moved) the session is read again and the write retried
// (nothing was written). After the write it wakes the session's next turn.
func (s *Service) finish(ctx context.Context, it work.Item, d TurnData, sess session.Session,
	msgs []session.Message, out outcome, status work.Status, reason string) work.Outcome {
	raced := false
	var after func(context.Context)
	var nd TurnData
	// others are the other sessions the write appends to, as last read: the
	// parent session a delegated turn reports to, the sub-session a dispatch
	// hands the message to. One that is gone is dropped (nothing appended).
	var others map[string]session.Session
	build := func(ctx context.Context, failed work.Op) (work.Transition, []work.Op, error) {
		if others == nil {
			var err error
			if others, err = s.otherSessions(ctx, d, out); err != nil {
				return work.Transition{}, nil, err
			}
		}
		if am, ok := failed.(session.AppendMessage); ok && am.Message.SessionID != sess.ID {
			raced = true
			id := am.Message.SessionID
			cur, gerr := s.store.GetSession(ctx, id)
			switch {
			case molt.ErrorCode(gerr) == molt.ENOTFOUND:
				delete(others, id)
			case gerr != nil:
				return work.Transition{}, nil, fmt.Errorf("reread session %s: %w", id, gerr)
			default:
				others[id] = cur
			}
		} else if failed != nil {
			raced = true
			cur, gerr := s.store.GetSession(ctx, sess.ID)
			switch {
			case molt.ErrorCode(gerr) == molt.ENOTFOUND:
				out, status, reason = outcome{}, StatusFailed, ReasonSessionDeleted
				sess.ID = "" // no ops: nothing to append to
			case gerr != nil:
				return work.Transition{}, nil, fmt.Errorf("reread session %s: %w", sess.ID, gerr)
			default:
				if out.compacted && cur.SummarySeq != out.ifSummary {
					out.compacted = false // someone else compacted: keep theirs
				}
				sess = cur
			}
		}
		var ops []work.Op
		ops, nd = s.finalOps(it.ID, d, sess, out)
		ops = append(ops, s.crossOps(it.ID, d, sess, out, status, others)...)
		after = nil
		if out.compacted && status == StatusDone {
			ops, after = s.compactedEffect(ctx, it, sess, ops)
		}
		return work.Transition{To: status, Data: nd.encode(), Reason: &reason}, ops, nil
	}
	o := work.EndWith(build, maxSeqRaces).Then(func(ctx context.Context, _ work.Item) {
		if after != nil {
			after(ctx)
		}
		s.log.InfoContext(ctx, "turn "+string(status), slog.String("reason", reason),
			slog.Int("steps", nd.Steps), slog.Bool("compacted", nd.Compacted), slog.Int("reply_seq", nd.ReplySeq),
			slog.Int("input_tokens", nd.InputTokens), slog.Int("output_tokens", nd.OutputTokens),
			slog.Bool("step_limit", out.stepLimit))
		s.wakeNext(ctx, sess.ID, d.UserSeq, msgs, raced)
		if status == StatusDone && !d.CompactOnly {
			s.replied(ctx, sess, nd.ReplySeq)
		}
	})
	o.RacedReason = ReasonTooManyRetries
	for _, c := range out.cross {
		if c.turnID != "" {
			o.Wake = append(o.Wake, queue.Message{Kind: string(work.KindTurn), ID: c.turnID})
		}
	}
	return o
}

// finalOps builds the terminal write's extra ops (sess.ID "" means none) and the
// turn's final data.
func (s *Service) finalOps(turnID string, d TurnData, sess session.Session, out outcome) ([]work.Op, TurnData) {
	nd := d
	nd.Steps, nd.InputTokens, nd.OutputTokens = out.steps, out.usage.InputTokens, out.usage.OutputTokens
	if sess.ID == "" {
		return nil, nd
	}
	var ops []work.Op
	if out.compacted {
		ops = append(ops, session.SetSummary{SessionID: sess.ID, Summary: out.summary, UpToSeq: out.upToSeq, IfSummarySeq: out.ifSummary})
		nd.Compacted, nd.SummarySeq = true, out.upToSeq
	}
	now := s.clock.Now().UTC()
	seq := sess.NextSeq
	add := func(m session.Message) {
		m.SessionID, m.Seq, m.TurnID, m.CreatedAt = sess.ID, seq, turnID, now
		ops = append(ops, session.AppendMessage{Message: m})
		nd.ReplySeq = seq
		seq++
	}
	for _, m := range out.added {
		switch m.Role {
		case model.RoleAssistant:
			add(session.Message{Role: session.RoleAssistant, Text: storedText(m.Text), ToolCalls: encodeCalls(m.ToolCalls)})
		case model.RoleTool:
			add(session.Message{Role: session.RoleTool, Text: storedText(m.Text), ToolResults: encodeResults(m.ToolResults)})
		}
	}
	if out.notice != "" {
		add(session.Message{Role: session.RoleSystem, Text: storedText(out.notice)})
	}
	if out.external {
		ops = append(ops, session.MarkExternal{SessionID: sess.ID})
	}
	return ops, nd
}

func storedText(s string) string {
	return clip(strings.ToValidUTF8(s, "\uFFFD"), session.MaxMessageText)
}

// wakeNext wakes the turn of the session's next user message after userSeq, which
// waited for this one. msgs is the log as read before the claim: unless a write
// raced a new message, the next turn (if any) is in it.
func (s *Service) wakeNext(ctx context.Context, sessionID string, userSeq int, msgs []session.Message, raced bool) {
	if sessionID == "" {
		return
	}
	if raced {
		var err error
		if msgs, err = s.loadMessages(ctx, sessionID, userSeq); err != nil {
			// The next turn's own wake-up or the tick's re-send picks it up.
			s.log.WarnContext(ctx, "could not look for the next turn", slog.String("error", err.Error()))
			return
		}
	}
	if next := nextTurn(msgs, userSeq); next != "" {
		s.wake(ctx, next)
	}
}
