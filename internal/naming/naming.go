package naming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// Store is what naming needs of the state port (store.Store has it all).
type Store interface {
	work.Reader
	session.Store
	settings.WorkspaceStore
	GetSettings(ctx context.Context) (settings.Settings, error)
}

// Deps are the service's dependencies.
type Deps struct {
	Store    Store
	Protocol *work.Protocol // on Store
	Queue    queue.Sender
	// Model names sessions unless naming.model names another.
	Model model.Model
	// Models returns the model naming.model names; nil: naming.model is
	// ignored and Model names every session.
	Models func(name string) (model.Model, error)
	Clock  molt.Clock
	Logger *slog.Logger
}

// Config tunes the worker. Zero fields take the defaults.
type Config struct {
	// Budget is how many naming jobs may run at once (default 4).
	Budget int
	// ClaimTimeout: a running job whose heartbeat is older is stale and the
	// tick takes it back (default 2 minutes; heartbeats every 30 s).
	ClaimTimeout time.Duration
	// MaxAttempts bounds the claims of one job (default 3); only crashes spend
	// them, as a failed job is not retried.
	MaxAttempts int
	// CommitMargin is kept free before the handler's deadline for the final
	// write (default 10 s).
	CommitMargin time.Duration
	// History bounds the messages (the newest up to the job's seq) a naming
	// request shows the model (default 12).
	History int
}

func (c Config) withDefaults() Config {
	if c.Budget <= 0 {
		c.Budget = 4
	}
	if c.ClaimTimeout <= 0 {
		c.ClaimTimeout = 2 * time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.CommitMargin <= 0 {
		c.CommitMargin = 10 * time.Second
	}
	if c.History <= 0 {
		c.History = 12
	}
	return c
}

// Service asks for naming jobs and runs them (Handle, the naming worker). It
// keeps no state of its own: every fact lives in the store.
type Service struct {
	store  Store
	proto  *work.Protocol
	queue  queue.Sender
	model  model.Model
	models func(string) (model.Model, error)
	clock  molt.Clock
	log    *slog.Logger
	cfg    Config
	exec   *work.Executor[settings.Naming]
}

var _ queue.Handler = (*Service)(nil)

// New returns a Service; Store, Protocol, Queue and Model are required.
func New(d Deps, cfg Config) *Service {
	s := &Service{store: d.Store, proto: d.Protocol, queue: d.Queue, model: d.Model, models: d.Models,
		clock: d.Clock, log: d.Logger, cfg: cfg.withDefaults()}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.exec = &work.Executor[settings.Naming]{Protocol: s.proto, Queue: s.queue, Logger: s.log, Kind: work.KindNaming,
		Policy: s.policy, Prepare: s.prepare, Next: s.next}
	return s
}

// Policy is the naming kind's claim policy (for the tick and the executor).
// AttemptTimeout is the largest naming.timeout_seconds: each attempt bounds
// itself by its workspace's effective timeout within it.
func (s *Service) Policy() work.Policy {
	return work.Policy{Kind: work.KindNaming, Budget: s.cfg.Budget, Timeout: s.cfg.ClaimTimeout,
		MaxAttempts: s.cfg.MaxAttempts, Expired: work.StatusTimeout,
		AttemptTimeout: settings.MaxNamingTimeout * time.Second, CommitMargin: s.cfg.CommitMargin}
}

func (s *Service) policy(ctx context.Context) (work.Policy, settings.Naming, error) {
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return work.Policy{}, settings.Naming{}, fmt.Errorf("read settings: %w", err)
	}
	return s.Policy(), st.Naming, nil
}

// effective returns the naming settings that apply to workspace ws: its
// overrides over the global ones. ENOTFOUND when ws does not exist.
func (s *Service) effective(ctx context.Context, ws string, global settings.Naming) (settings.Naming, error) {
	return settings.Effective(ctx, s.store, ws, global)
}

// Handle is the naming worker (queue.Handler for work.KindNaming wake-ups).
func (s *Service) Handle(ctx context.Context, m queue.Message) error { return s.exec.Handle(ctx, m) }

// HandleBatch handles wake-ups together (queue.BatchHandler): their claims in
// one store round trip, their final writes sharing one when ready together.
func (s *Service) HandleBatch(ctx context.Context, ms []queue.Message, rep queue.Report) {
	s.exec.HandleBatch(ctx, ms, rep)
}

// Replied asks for a naming job after a turn committed its reply (chat's
// RepliedHook). It never fails the turn: a failure is logged, and the next
// reply (or POST /api/sessions/{id}/name) asks again.
func (s *Service) Replied(ctx context.Context, sess session.Session, replySeq int) {
	if sess.Parent != "" {
		return // sub-sessions are not shown in the session list
	}
	if _, err := s.request(ctx, sess.ID, replySeq, false); err != nil {
		s.log.WarnContext(ctx, "naming not requested", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
}

// Reasons of a refused request by hand (ECONFLICT).
const (
	ReasonNamingDisabled = "naming_disabled" // naming.mode is disabled
	ReasonTitleManual    = "title_manual"    // a manual title is never replaced
	ReasonNoMessages     = "no_messages"     // nothing to name yet
)

// NameByHand asks for a new naming attempt of session id (POST
// /api/sessions/{id}/name) and returns the session's naming job. The caller
// needs a full token or a workspace token of the session's workspace.
// Errors: ENOTFOUND (no such session, or not visible to the caller);
// EFORBIDDEN for a caller that may only read; ECONFLICT with
// ReasonNamingDisabled, ReasonTitleManual or ReasonNoMessages.
func (s *Service) NameByHand(ctx context.Context, c auth.Caller, id string) (work.Item, error) {
	sess, err := s.store.GetSession(ctx, id)
	if code := molt.ErrorCode(err); code == molt.ENOTFOUND || code == molt.EINVALID || (err == nil && !c.CanRead(sess.Workspace)) {
		return work.Item{}, molt.NotFound("session %s not found", id)
	}
	if err != nil {
		return work.Item{}, fmt.Errorf("get session %s: %w", id, err)
	}
	if !c.CanChat(sess.Workspace) {
		return work.Item{}, &molt.Error{Code: molt.EFORBIDDEN, Message: fmt.Sprintf("a %s token cannot ask for a title", c.Token.Level)}
	}
	if sess.TitleSource == session.TitleManual {
		return work.Item{}, molt.Conflict(ReasonTitleManual, "session %s has a manual title; it is never replaced", id)
	}
	if sess.NextSeq <= 1 {
		return work.Item{}, molt.Conflict(ReasonNoMessages, "session %s has no messages to name it by", id)
	}
	it, err := s.request(ctx, id, sess.NextSeq-1, true)
	if molt.ErrorReason(err) == ReasonNamingDisabled {
		return work.Item{}, molt.Conflict(ReasonNamingDisabled, "naming is disabled for workspace %s", sess.Workspace)
	}
	return it, err
}

// request asks for a naming job of session id's messages up to seq: it
// creates the job and moves the session's NamingSeq in one write, then wakes
// it. Nothing is created (and the newest job is returned) when naming is
// disabled (ECONFLICT/ReasonNamingDisabled), for a duplicate request (a job for
// seq or a later one exists), in once mode when the session has a title or
// its newest job is still pending or running. A request by hand for the seq
// of the newest job, which has ended, retries that job (Protocol.UpdateSeen).
func (s *Service) request(ctx context.Context, id string, seq int, byHand bool) (work.Item, error) {
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return work.Item{}, fmt.Errorf("read settings: %w", err)
	}
	for try := 0; try < 3; try++ {
		sess, err := s.store.GetSession(ctx, id)
		if err != nil {
			return work.Item{}, err
		}
		n, err := s.effective(ctx, sess.Workspace, st.Naming)
		if err != nil {
			return work.Item{}, err
		}
		if n.Mode == settings.NamingDisabled {
			return work.Item{}, molt.Conflict(ReasonNamingDisabled, "naming is disabled")
		}
		var latest work.Item
		if sess.NamingSeq > 0 {
			latest, err = s.store.GetItem(ctx, work.KindNaming, JobID(sess.ID, sess.CreatedAt, sess.NamingSeq))
			if err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
				return work.Item{}, err
			}
		}
		inFlight := latest.ID != "" && (latest.Status == work.StatusPending || latest.Active)
		switch {
		case sess.TitleSource == session.TitleManual:
			return latest, nil
		case byHand && inFlight:
			return latest, nil
		case byHand && sess.NamingSeq >= seq && latest.ID != "":
			base := latest.Attempts
			d, derr := ParseData(latest.Data)
			if derr != nil {
				return work.Item{}, derr
			}
			d.ByHand, d.Title = true, ""
			it, err := s.proto.UpdateSeen(ctx, latest, work.Edit{To: work.StatusPending, AttemptsBase: &base,
				Data: d.encode(), Reason: work.Ptr("")})
			if molt.ErrorCode(err) == molt.ECONFLICT || molt.ErrorCode(err) == molt.ENOTFOUND {
				continue
			}
			if err != nil {
				return work.Item{}, err
			}
			s.wake(ctx, it.ID)
			return it, nil
		case !byHand && sess.NamingSeq >= seq:
			return latest, nil // a duplicate: the job for this sequence (or a later one) exists
		case !byHand && n.Mode == settings.NamingOnce && (sess.TitleSource != session.TitleNone || inFlight):
			return latest, nil // once: named, or the job in flight runs to completion
		}
		seq = max(seq, sess.NamingSeq+1)
		d := Data{SessionID: sess.ID, Created: sess.CreatedAt, Seq: seq, ByHand: byHand}
		it := work.Item{Kind: work.KindNaming, ID: JobID(sess.ID, sess.CreatedAt, seq), Workspace: sess.Workspace,
			LockKey: LockKey(sess.ID), Data: d.encode()}
		created, err := s.proto.Create(ctx, it, session.RequestNaming{SessionID: sess.ID, Created: sess.CreatedAt, Seq: seq})
		if r := molt.ErrorReason(err); r == work.ReasonAlsoFailed || r == work.ReasonExists {
			continue // another request came first, or the session changed: look again
		}
		if err != nil {
			return work.Item{}, fmt.Errorf("request naming of session %s: %w", sess.ID, err)
		}
		s.wake(ctx, created.ID)
		return created, nil
	}
	return work.Item{}, molt.Unavailable(nil, "session %s: naming requests kept racing", id)
}

func (s *Service) wake(ctx context.Context, id string) {
	if err := s.queue.Send(ctx, queue.Message{Kind: string(work.KindNaming), ID: id}); err != nil {
		s.log.WarnContext(ctx, "naming wake-up not sent; the tick re-sends it", slog.String("naming_id", id),
			slog.String("error", err.Error()))
	}
}

// State is a session's naming state as GET /api/sessions/{id} shows it.
type State struct {
	Status string    `json:"status"` // none, pending, running, done, failed, timeout
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// StateOf returns the state of sess's newest naming job ("none" without one).
func (s *Service) StateOf(ctx context.Context, sess session.Session) (State, error) {
	if sess.NamingSeq == 0 {
		return State{Status: "none"}, nil
	}
	it, err := s.store.GetItem(ctx, work.KindNaming, JobID(sess.ID, sess.CreatedAt, sess.NamingSeq))
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return State{Status: "none"}, nil
	}
	if err != nil {
		return State{}, err
	}
	return State{Status: string(it.Status), Reason: it.Reason, At: it.UpdatedAt}, nil
}

// prepare checks that a pending job can still name its session and returns
// its attempt; a job that cannot (the session gone or re-created, a manual
// title, disabled, superseded, once mode with a title) is ended here, failed
// with its reason.
func (s *Service) prepare(ctx context.Context, it work.Item, _ work.Policy, global settings.Naming) (work.AttemptFunc, error) {
	d, err := ParseData(it.Data)
	if err != nil {
		s.end(ctx, it, ReasonStale)
		return nil, nil
	}
	ctx = obs.With(ctx, slog.String("session_id", d.SessionID))
	sess, err := s.store.GetSession(ctx, d.SessionID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		s.end(ctx, it, ReasonStale)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", d.SessionID, err)
	}
	n, err := s.effective(ctx, sess.Workspace, global)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		s.end(ctx, it, ReasonStale) // the workspace, and so the session, is being deleted
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if reason := refusal(sess, d, n); reason != "" {
		s.end(ctx, it, reason)
		return nil, nil
	}
	msgs, err := s.history(ctx, sess, d.Seq)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		s.end(ctx, it, ReasonStale)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, a *work.Attempt) work.Outcome {
		return s.attempt(obs.With(ctx, slog.String("session_id", d.SessionID)), a, d, sess, n, msgs)
	}, nil
}

// refusal is why job d may not name sess under settings n, or "".
func refusal(sess session.Session, d Data, n settings.Naming) string {
	switch {
	case !sess.CreatedAt.Equal(d.Created):
		return ReasonStale // deleted and created again under the same id
	case n.Mode == settings.NamingDisabled:
		return ReasonDisabled
	case sess.TitleSource == session.TitleManual:
		return ReasonStale
	case sess.NamingSeq > d.Seq && (n.Mode == settings.NamingAlways || d.ByHand):
		return ReasonSuperseded
	case n.Mode == settings.NamingOnce && !d.ByHand && sess.TitleSource != session.TitleNone:
		return ReasonStale
	}
	return ""
}

// end fails a pending job that can never run.
func (s *Service) end(ctx context.Context, it work.Item, reason string) {
	_, err := s.proto.Update(ctx, work.KindNaming, it.ID, work.Change{From: []work.Status{work.StatusPending},
		Attempts: it.Attempts, To: StatusFailed, Reason: &reason})
	if err != nil && molt.ErrorCode(err) != molt.ECONFLICT && molt.ErrorCode(err) != molt.ENOTFOUND {
		s.log.WarnContext(ctx, "could not end naming job", slog.String("reason", reason), slog.String("error", err.Error()))
		return
	}
	s.log.InfoContext(ctx, "naming job ended before it ran", slog.String("reason", reason))
}

// history reads the newest messages up to seq (at most Config.History) with
// text, the conversation the title is made from.
func (s *Service) history(ctx context.Context, sess session.Session, seq int) ([]session.Message, error) {
	after := max(sess.SummarySeq, seq-4*s.cfg.History)
	var out []session.Message
	for after < seq {
		page, err := s.store.ListMessages(ctx, sess.ID, after, 100)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if m.Seq <= seq && m.Text != "" && (m.Role == session.RoleUser || m.Role == session.RoleAssistant) {
				out = append(out, m)
			}
		}
		after = page[len(page)-1].Seq
	}
	if len(out) > s.cfg.History {
		out = out[len(out)-s.cfg.History:]
	}
	return out, nil
}

// errTimeout is the cause of an attempt's context when the workspace's naming
// timeout ran out.
var errTimeout = errors.New("naming timeout")

// systemPrompt is a naming request's system prompt.
const systemPrompt = model.NameMarker + `
Give this conversation a short title: at most eight words, one line, no quotes,
no Markdown, no trailing punctuation. Answer with the title only.`

// attempt asks the model for a title and saves it with the job's end.
func (s *Service) attempt(ctx context.Context, a *work.Attempt, d Data, sess session.Session, n settings.Naming, msgs []session.Message) work.Outcome {
	timeout := time.Duration(n.TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	m := s.model
	if n.Model != "" && s.models != nil {
		var err error
		if m, err = s.models(n.Model); err != nil {
			s.log.WarnContext(ctx, "naming model not available", slog.String("model", n.Model), slog.String("error", err.Error()))
			return s.fail(ReasonProviderError)
		}
	}
	req := model.Request{System: systemPrompt, MaxTokens: 64, Timeout: timeout}
	for _, msg := range msgs {
		role := model.RoleUser
		if msg.Role == session.RoleAssistant {
			role = model.RoleAssistant
		}
		req.Messages = append(req.Messages, model.Message{Role: role, Text: clip(msg.Text, 2000)})
	}
	req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: "Title for the conversation above:"})
	resp, err := m.Generate(ctx, req)
	switch {
	case err != nil && a.Interrupted():
		return work.GiveBack("interrupted", true, nil)
	case err != nil && (errors.Is(context.Cause(ctx), errTimeout) || a.DeadlineHit() || molt.ErrorReason(err) == model.ReasonTimeout):
		s.log.WarnContext(ctx, "naming timed out", slog.Duration("timeout", timeout))
		return s.fail(ReasonTimeout)
	case err != nil:
		s.log.WarnContext(ctx, "naming model failed", slog.String("reason", molt.ErrorReason(err)))
		return s.fail(ReasonProviderError)
	}
	title := CleanTitle(resp.Text)
	if title == "" {
		return s.fail(ReasonInvalidOutput)
	}
	always := n.Mode == settings.NamingAlways || d.ByHand
	build := func(ctx context.Context, failed work.Op) (work.Transition, []work.Op, error) {
		if failed != nil {
			// The save's condition failed: say why, keep the title as it is.
			reason := ReasonStale
			cur, err := s.store.GetSession(ctx, d.SessionID)
			switch {
			case err != nil && molt.ErrorCode(err) != molt.ENOTFOUND:
				return work.Transition{}, nil, err
			case err == nil && cur.CreatedAt.Equal(d.Created) && cur.NamingSeq != d.Seq && always:
				reason = ReasonSuperseded
			}
			return work.Transition{To: StatusFailed, Reason: &reason}, nil, nil
		}
		op := session.SaveTitle{SessionID: sess.ID, Created: sess.CreatedAt, Title: title, IfTitleRev: sess.TitleRev,
			OnlyUnset: !always}
		if always {
			op.IfNamingSeq = d.Seq
		}
		nd := d
		nd.Title = title
		return work.Transition{To: StatusDone, Data: nd.encode(), Reason: work.Ptr("")}, []work.Op{op}, nil
	}
	return work.EndWith(build, 1)
}

func (s *Service) fail(reason string) work.Outcome { return work.End(StatusFailed, reason, nil) }

// next wakes the session's newest job after one of its jobs ended: it waited
// for the session's naming lock.
func (s *Service) next(ctx context.Context, ended work.Item, _ work.Policy) ([]string, error) {
	d, err := ParseData(ended.Data)
	if err != nil {
		return nil, nil
	}
	sess, err := s.store.GetSession(ctx, d.SessionID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !sess.CreatedAt.Equal(d.Created) || sess.NamingSeq == d.Seq || sess.NamingSeq == 0 {
		return nil, nil
	}
	return []string{JobID(sess.ID, sess.CreatedAt, sess.NamingSeq)}, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !strings.HasSuffix(s, " ") && len(s) > n-8 {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}
