package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/a2aclient"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Store is what the runtime needs of the state port (store.Store has it all).
type Store interface {
	work.Reader
	session.Store
	workspace.SurfaceStore
}

// Deps are the runtime's dependencies.
type Deps struct {
	Store    Store
	Protocol *work.Protocol // on Store
	Queue    queue.Sender
	Model    model.Model
	Tools    *Tools // nil: no tools
	Clock    molt.Clock
	IDs      molt.IDs
	Logger   *slog.Logger
	// A2A sends delegated messages to remote agents (nil: a default client).
	A2A *a2aclient.Client
	// Token reads the bearer token a remote's token_ref names (nil:
	// delegate.EnvToken).
	Token func(ctx context.Context, ref string) (string, error)
}

// Service is the chat runtime: sessions, posting messages (which creates turns),
// and the turn worker (Handle). It holds no state of its own beyond its
// configuration: every fact lives in the store.
type Service struct {
	store Store
	proto *work.Protocol
	queue queue.Sender
	model model.Model
	tools *Tools
	clock molt.Clock
	ids   molt.IDs
	log   *slog.Logger
	cfg   Config
	a2a   *a2aclient.Client
	token func(ctx context.Context, ref string) (string, error)

	exec     *work.Executor[struct{}] // the turn kind's lifecycle (Handle)
	surfaces *workspace.Surfaces

	running attempts // this process's running attempts, for CancelTurn

	mu          sync.RWMutex
	commands    map[string]Command
	onCompacted CompactedHook
	onReplied   RepliedHook
	toolGate    ToolGate
	postGuard   PostGuard
}

var _ queue.Handler = (*Service)(nil)

// New returns a Service. Store, Protocol, Queue and Model are required.
func New(d Deps, cfg Config) *Service {
	s := &Service{store: d.Store, proto: d.Protocol, queue: d.Queue, model: d.Model, tools: d.Tools,
		clock: d.Clock, ids: d.IDs, log: d.Logger, cfg: cfg.withDefaults(), commands: map[string]Command{},
		a2a: d.A2A, token: d.Token}
	if s.token == nil {
		s.token = delegate.EnvToken
	}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	if s.ids == nil {
		s.ids = &molt.SortableIDs{Clock: s.clock}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.tools == nil {
		s.tools = NewTools()
	}
	s.HandleCommand("/compact", compactCommand)
	s.exec = s.executor()
	s.surfaces = &workspace.Surfaces{Store: d.Store, Builtin: Builtin()}
	return s
}

// Config returns the runtime's configuration, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// Policy is the turn kind's claim policy for the tick. A turn the tick times out
// (its workers kept dying) gets one system line in the same write, so the session
// says why no reply came.
func (s *Service) Policy() work.Policy {
	p := s.cfg.Policy()
	p.OnExpire = s.expireOps
	return p
}

// TimeoutNotice is the system line of a turn the tick timed out.
const TimeoutNotice = "No reply: the turn's workers stopped answering and its attempts are spent. Please try again."

// expireOps appends the timeout notice to the turn's session, and for a
// delegated turn a report line to the session that asked; nothing for a
// session that is gone (the turn still ends).
func (s *Service) expireOps(ctx context.Context, it work.Item) ([]work.Op, error) {
	d, err := ParseTurnData(it.Data)
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
	now := s.clock.Now()
	ops := []work.Op{session.AppendMessage{Message: session.Message{SessionID: sess.ID, Seq: sess.NextSeq,
		Role: session.RoleSystem, Text: TimeoutNotice, TurnID: it.ID, CreatedAt: now}}}
	if d.ReportTo != "" && d.ReportTo != sess.ID {
		// A delegated turn: the session that asked is told it gets no answer.
		parent, err := s.store.GetSession(ctx, d.ReportTo)
		switch {
		case molt.ErrorCode(err) == molt.ENOTFOUND:
		case err != nil:
			return nil, err
		default:
			ops = append(ops, session.AppendMessage{Message: session.Message{SessionID: parent.ID, Seq: parent.NextSeq,
				Role: session.RoleSystem, Text: reportLine(d.ReportAs, work.StatusTimeout, "its turn timed out"), TurnID: it.ID, CreatedAt: now}})
		}
	}
	return ops, nil
}

// Tools returns the tool registry; register tools before the first turn runs.
func (s *Service) Tools() *Tools { return s.tools }

// Command handles a chat command: a posted text whose first word is the command's
// name. It returns the work item it created (for /compact, a compact-only turn).
type Command func(ctx context.Context, s *Service, req CommandRequest) (work.Item, error)

// CommandRequest is a command as posted.
type CommandRequest struct {
	Caller  auth.Caller
	Session session.Session
	Name    string // e.g. "/compact"
	Args    string // the rest of the text, trimmed
	Text    string // the whole text as posted
}

// HandleCommand registers (or replaces) the command name, e.g. "/evo" (the
// evolution issue registers it). Register commands before serving: a text whose
// first word is a registered command is never sent to the model. Texts starting
// with an unregistered "/word" are ordinary messages.
func (s *Service) HandleCommand(name string, fn Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands[name] = fn
}

// command returns the command text invokes, if any.
func (s *Service) command(text string) (name, args string, fn Command) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "/") {
		return "", "", nil
	}
	name, args, _ = strings.Cut(t, " ")
	if i := strings.IndexFunc(name, unicode.IsSpace); i >= 0 {
		name, args = name[:i], name[i:]+" "+args
	}
	s.mu.RLock()
	fn = s.commands[name]
	s.mu.RUnlock()
	return name, strings.TrimSpace(args), fn
}

// IsCommand reports whether text invokes a registered command.
func (s *Service) IsCommand(text string) bool {
	_, _, fn := s.command(text)
	return fn != nil
}

// compactCommand queues a compact-only turn.
func compactCommand(ctx context.Context, s *Service, req CommandRequest) (work.Item, error) {
	return s.CreateTurn(ctx, req.Session, req.Text, true)
}

// access checks what caller may do with workspace ws: ENOTFOUND when it may not
// even read it (nothing about its existence is revealed), EFORBIDDEN when write is
// asked and it may only read.
func access(c auth.Caller, ws string, write bool) error {
	if !c.CanRead(ws) {
		return molt.NotFound("not found")
	}
	if write && !c.CanChat(ws) {
		return &molt.Error{Code: molt.EFORBIDDEN, Message: fmt.Sprintf("a %s token cannot chat", c.Token.Level)}
	}
	return nil
}

func sessionNotFound(id string) error { return molt.NotFound("session %s not found", id) }

// session reads a session the caller may see (write: may chat in). A write
// also needs a token at least as privileged as the one that opened the session
// (its recorded Access): /evo and the auto-apply source gate trust that record,
// so a workspace token may read a session opened with full access but never
// put its text into it.
func (s *Service) session(ctx context.Context, c auth.Caller, id string, write bool) (session.Session, error) {
	sess, err := s.store.GetSession(ctx, id)
	if err != nil {
		if code := molt.ErrorCode(err); code == molt.ENOTFOUND || code == molt.EINVALID {
			return session.Session{}, sessionNotFound(id)
		}
		return session.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	if err := access(c, sess.Workspace, write); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return session.Session{}, sessionNotFound(id)
		}
		return session.Session{}, err
	}
	if write && c.Token.Level.Rank() < accessRank(sess.Access) {
		return session.Session{}, &molt.Error{Code: molt.EFORBIDDEN, Reason: ReasonSessionAccess,
			Message: fmt.Sprintf("this session was opened with %s access; a %s token can read it but not write to it",
				sess.Access, c.Token.Level)}
	}
	return sess, nil
}

// ReasonSessionAccess refuses a write to a session opened with more access than
// the caller's token has.
const ReasonSessionAccess = "session_access"

// accessRank orders a session's recorded access like token levels; an unknown
// or missing record counts as full, so nothing below full writes to it.
func accessRank(a string) int {
	if r := auth.Level(a).Rank(); r > 0 {
		return r
	}
	return auth.Full.Rank()
}

// NewSession is a session to open.
type NewSession struct {
	Workspace string
	Agent     string // "" means DefaultAgent
	Title     string // optional; a given title has source manual
	Parent    string // a sub-session's parent session, same workspace
	External  bool   // input comes from outside (A2A, webhook)
}

// CreateSession opens a session for caller, recording the caller's access level.
// Errors: ENOTFOUND when the caller may not see the workspace or it does not
// exist; EFORBIDDEN for a readonly caller, or a parent the caller may not write
// to (ReasonSessionAccess); EINVALID naming the field for a bad agent id or
// title, an agent that is not on the workspace's surface (field "agent"), or a
// parent that is not a session of the workspace (field "parent").
func (s *Service) CreateSession(ctx context.Context, c auth.Caller, in NewSession) (session.Session, error) {
	if err := workspace.ValidateName(in.Workspace); err != nil {
		return session.Session{}, err
	}
	if err := access(c, in.Workspace, true); err != nil {
		return session.Session{}, err
	}
	if in.Agent == "" {
		in.Agent = DefaultAgent
	}
	if err := session.ValidateAgent(in.Agent); err != nil {
		return session.Session{}, err
	}
	title, err := cleanTitle(in.Title, true)
	if err != nil {
		return session.Session{}, err
	}
	if in.Parent != "" {
		// A sub-session hangs under a session of the same workspace the caller
		// may write to; one elsewhere reads exactly like a missing one.
		parent, err := s.session(ctx, c, in.Parent, true)
		if molt.ErrorCode(err) == molt.ENOTFOUND || (err == nil && parent.Workspace != in.Workspace) {
			return session.Session{}, molt.Invalid("parent", "parent session %s is not a session of workspace %s", in.Parent, in.Workspace)
		}
		if err != nil {
			return session.Session{}, err
		}
	}
	surface, err := s.surface(ctx, in.Workspace)
	if err != nil {
		return session.Session{}, err
	}
	if !hasAgent(surface, in.Agent) {
		return session.Session{}, molt.Invalid("agent", "agent %q is not on the surface of workspace %s", in.Agent, in.Workspace)
	}
	ss := session.Session{Workspace: in.Workspace, Agent: in.Agent, Access: string(c.Token.Level),
		Parent: in.Parent, External: in.External}
	if title != "" {
		ss.Title, ss.TitleSource = title, session.TitleManual
	}
	out, err := s.store.CreateSession(ctx, ss)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return session.Session{}, molt.NotFound("workspace %s not found", in.Workspace)
		}
		return session.Session{}, err
	}
	return out, nil
}

func hasAgent(surface []workspace.EffectiveFile, agent string) bool {
	dir := "agents/" + agent + "/"
	for _, f := range surface {
		if strings.HasPrefix(f.Path, dir) {
			return true
		}
	}
	return false
}

// cleanTitle trims a title and checks it: at most session.MaxTitle characters,
// no control characters; empty only when allowEmpty.
func cleanTitle(title string, allowEmpty bool) (string, error) {
	t := strings.TrimSpace(title)
	switch {
	case !utf8.ValidString(t):
		return "", molt.Invalid("title", "title is not valid UTF-8")
	case t == "" && !allowEmpty:
		return "", molt.Invalid("title", "title is empty")
	case utf8.RuneCountInString(t) > session.MaxTitle:
		return "", molt.Invalid("title", "title over %d characters", session.MaxTitle)
	case strings.IndexFunc(t, unicode.IsControl) >= 0:
		return "", molt.Invalid("title", "title contains a control character")
	}
	return t, nil
}

// GetSession returns a session the caller may read (ENOTFOUND otherwise).
func (s *Service) GetSession(ctx context.Context, c auth.Caller, id string) (session.Session, error) {
	return s.session(ctx, c, id, false)
}

// MaxSessionsPage bounds a page of ListSessions.
const MaxSessionsPage = 100

// ListSessions lists a workspace's sessions, newest first. ENOTFOUND when the
// caller may not read ws; EINVALID for a limit over MaxSessionsPage or a bad
// cursor.
func (s *Service) ListSessions(ctx context.Context, c auth.Caller, ws string, q page.Query) (page.Page[session.Session], error) {
	if err := workspace.ValidateName(ws); err != nil {
		return page.Page[session.Session]{}, err
	}
	if err := access(c, ws, false); err != nil {
		return page.Page[session.Session]{}, err
	}
	if q.Limit < 0 || q.Limit > MaxSessionsPage {
		return page.Page[session.Session]{}, molt.Invalid("limit", "limit must be between 1 and %d", MaxSessionsPage)
	}
	if _, _, err := q.Normalize(); err != nil {
		return page.Page[session.Session]{}, err
	}
	return s.store.ListSessions(ctx, ws, q)
}

// Rename sets a session's title (source manual, revision bumped): the caller's
// title wins over any concurrent automatic title.
func (s *Service) Rename(ctx context.Context, c auth.Caller, id, title string) (session.Session, error) {
	t, err := cleanTitle(title, false)
	if err != nil {
		return session.Session{}, err
	}
	for try := 0; ; try++ {
		sess, err := s.session(ctx, c, id, true)
		if err != nil {
			return session.Session{}, err
		}
		out, err := s.store.SetTitle(ctx, id, t, session.TitleManual, sess.TitleRev)
		if molt.ErrorCode(err) == molt.ECONFLICT && try < 3 {
			continue // an automatic title landed meanwhile: the manual one still wins
		}
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return session.Session{}, sessionNotFound(id)
		}
		return out, err
	}
}

// DeleteSession deletes a session and its messages. Its pending turns end as
// failed (session_deleted) when a worker next looks at them; a running turn's
// reply fails its append and writes nothing.
func (s *Service) DeleteSession(ctx context.Context, c auth.Caller, id string) error {
	if _, err := s.session(ctx, c, id, true); err != nil {
		return err
	}
	if err := s.store.DeleteSession(ctx, id); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return sessionNotFound(id)
		}
		return err
	}
	return nil
}

// Messages returns up to limit messages with seq > after, in seq order.
func (s *Service) Messages(ctx context.Context, c auth.Caller, id string, after, limit int) ([]session.Message, error) {
	if after < 0 {
		return nil, molt.Invalid("after", "after must not be negative")
	}
	if _, err := s.session(ctx, c, id, false); err != nil {
		return nil, err
	}
	msgs, err := s.store.ListMessages(ctx, id, after, limit)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return nil, sessionNotFound(id)
	}
	return msgs, err
}

// Turn returns a turn the caller may read, with its data.
func (s *Service) Turn(ctx context.Context, c auth.Caller, id string) (work.Item, TurnData, error) {
	notFound := molt.NotFound("turn %s not found", id)
	if work.ValidateKey(work.KindTurn, id) != nil {
		return work.Item{}, TurnData{}, notFound
	}
	it, err := s.store.GetItem(ctx, work.KindTurn, id)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return work.Item{}, TurnData{}, notFound
		}
		return work.Item{}, TurnData{}, fmt.Errorf("get turn %s: %w", id, err)
	}
	if !c.CanRead(it.Workspace) {
		return work.Item{}, TurnData{}, notFound
	}
	d, _ := ParseTurnData(it.Data)
	return it, d, nil
}

// Post posts a user message to a session: it appends the message and creates the
// turn that answers it in one write, then sends the turn's wake-up. A text whose
// first word is a registered command runs that command instead (/compact queues a
// compact-only turn). It returns the turn (pending).
//
// Errors: ENOTFOUND (no such session, or not visible to the caller); EFORBIDDEN
// for a caller that may only read, or whose token is below the access the
// session was opened with (ReasonSessionAccess); EINVALID for an empty text; ETOOLARGE over
// session.MaxUserText bytes; EUNAVAILABLE when the store cannot be reached or
// appends kept racing.
func (s *Service) Post(ctx context.Context, c auth.Caller, sessionID, text string) (work.Item, error) {
	if err := checkUserText(text); err != nil {
		return work.Item{}, err
	}
	sess, err := s.session(ctx, c, sessionID, true)
	if err != nil {
		return work.Item{}, err
	}
	if err := s.guardPost(ctx, sess); err != nil {
		return work.Item{}, err
	}
	if name, args, fn := s.command(text); fn != nil {
		return fn(ctx, s, CommandRequest{Caller: c, Session: sess, Name: name, Args: args, Text: text})
	}
	return s.CreateTurn(ctx, sess, text, false)
}

// checkUserText refuses a user message's text: ETOOLARGE over
// session.MaxUserText bytes, EINVALID (field text) when it is not valid UTF-8
// or empty.
func checkUserText(text string) error {
	if len(text) > session.MaxUserText {
		return &molt.Error{Code: molt.ETOOLARGE, Field: "text",
			Message: fmt.Sprintf("message text over %d bytes", session.MaxUserText)}
	}
	if !utf8.ValidString(text) {
		return molt.Invalid("text", "text is not valid UTF-8")
	}
	if strings.TrimSpace(text) == "" {
		return molt.Invalid("text", "text is empty")
	}
	return nil
}

// maxSeqRaces bounds the re-reads of a session whose next seq moved under a
// write. Each race is lost to a poster that won, so n concurrent posters need at
// most n tries; with the backoff between tries this covers dozens.
const maxSeqRaces = 64

// seqRaceBackoff waits before try (1-based) of a raced append, with full jitter
// up to 1 ms << try (at most 64 ms), so racing posters spread out.
func seqRaceBackoff(ctx context.Context, try int) error {
	d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(try, 6)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CreateTurn appends text as a user message of sess and creates its turn in one
// write, then wakes the turn. sess may be stale: when the session's next seq has
// moved, it is read again and the write retried (nothing was written). It does
// no access check (callers do; commands and A2A reuse it).
func (s *Service) CreateTurn(ctx context.Context, sess session.Session, text string, compactOnly bool) (work.Item, error) {
	return s.createTurn(ctx, sess, text, compactOnly, "")
}

// KindTurnKey is the kind of the items that map a sender's message key to the
// turn it made (PostExternal): created in the turn's own write, so a message
// sent twice makes one turn. They expire after TurnKeyTTL.
const KindTurnKey work.Kind = "turn_key"

// TurnKeyTTL is how long a message key is remembered.
const TurnKeyTTL = 8 * 24 * time.Hour

// turnKey is a turn_key item's Data.
type turnKey struct {
	Turn string `json:"turn"`
}

// TurnByKey returns the turn the message key made, or ENOTFOUND.
func (s *Service) TurnByKey(ctx context.Context, key string) (work.Item, error) {
	k, err := s.store.GetItem(ctx, KindTurnKey, key)
	if err != nil {
		return work.Item{}, err
	}
	var d turnKey
	if err := json.Unmarshal(k.Data, &d); err != nil || d.Turn == "" {
		return work.Item{}, molt.NotFound("turn of key %s not found", key)
	}
	return s.store.GetItem(ctx, work.KindTurn, d.Turn)
}

// createTurn is CreateTurn remembering the message under key (when not ""):
// the key's item is created in the turn's write, and a key that exists already
// answers the turn it made, posting nothing.
func (s *Service) createTurn(ctx context.Context, sess session.Session, text string, compactOnly bool, key string) (work.Item, error) {
	for try := 0; try < maxSeqRaces; try++ {
		id := s.ids.NewID()
		d := TurnData{SessionID: sess.ID, UserSeq: sess.NextSeq, CompactOnly: compactOnly}
		it := work.Item{Kind: work.KindTurn, ID: id, Workspace: sess.Workspace, LockKey: LockKey(sess.ID), Data: d.encode()}
		msg := session.Message{SessionID: sess.ID, Seq: sess.NextSeq, Role: session.RoleUser, Text: text,
			TurnID: id, CreatedAt: s.clock.Now().UTC()}
		also := []work.Op{session.AppendMessage{Message: msg}}
		if key != "" {
			now := s.clock.Now().UTC()
			kd, _ := json.Marshal(turnKey{Turn: id})
			also = append(also, work.CreateItem{Item: work.Item{Kind: KindTurnKey, ID: key, Workspace: sess.Workspace,
				Status: "recorded", Data: kd, CreatedAt: now, UpdatedAt: now, OpID: s.ids.NewID(),
				ExpiresAt: now.Add(TurnKeyTTL)}})
		}
		created, err := s.proto.Create(ctx, it, also...)
		if _, dup := work.FailedOp(err).(work.CreateItem); dup {
			return s.TurnByKey(ctx, key) // sent before: the turn it made
		}
		if molt.ErrorReason(err) == work.ReasonAlsoFailed {
			// Another message took the seq (or the session is gone): read it again.
			sid := sess.ID
			if sess, err = s.store.GetSession(ctx, sid); err != nil {
				if molt.ErrorCode(err) == molt.ENOTFOUND {
					return work.Item{}, sessionNotFound(sid)
				}
				return work.Item{}, fmt.Errorf("reread session %s: %w", sid, err)
			}
			if err := seqRaceBackoff(ctx, try+1); err != nil {
				break
			}
			continue
		}
		if err != nil {
			return work.Item{}, fmt.Errorf("post to session %s: %w", sess.ID, err)
		}
		s.wake(ctx, created.ID)
		return created, nil
	}
	return work.Item{}, molt.Unavailable(nil, "session %s: messages kept arriving; try again", sess.ID)
}

// wake sends a turn's wake-up. A failed send only delays the turn until the
// tick re-sends wake-ups of pending work.
func (s *Service) wake(ctx context.Context, turnID string) {
	if err := s.queue.Send(ctx, queue.Message{Kind: string(work.KindTurn), ID: turnID}); err != nil {
		s.log.WarnContext(ctx, "turn wake-up not sent; the tick will re-send it",
			slog.String("turn_id", turnID), slog.String("error", err.Error()))
	}
}

// surface reads a workspace's effective surface (built-in, global, workspace)
// in one store request (workspace.Surfaces).
func (s *Service) surface(ctx context.Context, ws string) ([]workspace.EffectiveFile, error) {
	sf, err := s.surfaces.Read(ctx, ws)
	if err != nil {
		return nil, err
	}
	return sf.Effective(), nil
}
