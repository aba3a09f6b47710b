// Package session holds chat sessions and their append-only message logs.
//
// A session belongs to a workspace and an agent. Messages get consecutive sequence
// numbers (1, 2, …) through AppendMessage, an op that commits together with other
// writes (a new turn, a turn's transition), conditional on the session's next
// sequence number: two appenders can never take the same number, and an assistant
// reply is committed only in the same write as the turn that owns its claim.
package session

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/work"
)

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleTool      = "tool"
)

// Title sources.
const (
	TitleNone   = ""
	TitleManual = "manual"
	TitleAuto   = "auto"
)

// Access levels a session records (the opener's token level), plus External for
// the evolution source gate.
const (
	AccessFull      = "full"
	AccessWorkspace = "workspace"
	AccessReadonly  = "readonly"
)

// Limits.
const (
	MaxTitle       = 200
	MaxUserText    = 32 << 10 // bytes of a posted message
	MaxMessageText = 64 << 10 // bytes of any stored message text
	MaxSummary     = 32 << 10
	MaxToolJSON    = 64 << 10
)

// Session is a chat session.
type Session struct {
	ID          string `json:"id"`
	Workspace   string `json:"workspace"`
	Agent       string `json:"agent"`
	Title       string `json:"title"`
	TitleSource string `json:"title_source"` // "", manual, auto
	TitleRev    int    `json:"title_rev"`    // bumped by every title change
	// NamingSeq is the message seq the newest naming job was asked for (0:
	// none); RequestNaming moves it, and it names that job (see naming).
	NamingSeq  int       `json:"naming_seq"`
	Access     string    `json:"access"`   // full, workspace, readonly
	External   bool      `json:"external"` // input ever came from outside (A2A, webhook)
	Parent     string    `json:"parent,omitempty"`
	NextSeq    int       `json:"next_seq"`    // the sequence number the next message gets (first is 1)
	SummarySeq int       `json:"summary_seq"` // messages with seq <= SummarySeq are replaced by Summary
	Summary    string    `json:"-"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Message is one entry of a session's log.
type Message struct {
	SessionID   string          `json:"session_id"`
	Seq         int             `json:"seq"`
	Role        string          `json:"role"`
	Text        string          `json:"text"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"`   // JSON array, role assistant
	ToolResults json.RawMessage `json:"tool_results,omitempty"` // JSON array, role tool
	TurnID      string          `json:"turn_id,omitempty"`      // assistant, tool, system: the turn that wrote it; user: the turn that answers it
	CreatedAt   time.Time       `json:"created_at"`
}

var agentRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)

// ValidateAgent returns EINVALID (field "agent") unless id is an agent id.
func ValidateAgent(id string) error {
	if !agentRe.MatchString(id) {
		return molt.Invalid("agent", "agent %q is not a valid agent id", id)
	}
	return nil
}

// Validate checks a message before it is stored: EINVALID naming the field, or
// ETOOLARGE.
func (m Message) Validate() error {
	if m.SessionID == "" {
		return molt.Invalid("session_id", "session id is empty")
	}
	if m.Seq < 1 {
		return molt.Invalid("seq", "seq must be at least 1")
	}
	switch m.Role {
	case RoleUser, RoleAssistant, RoleSystem, RoleTool:
	default:
		return molt.Invalid("role", "role must be user, assistant, system or tool")
	}
	if len(m.Text) > MaxMessageText {
		return &molt.Error{Code: molt.ETOOLARGE, Field: "text", Message: "message text over the limit"}
	}
	if len(m.ToolCalls) > MaxToolJSON || len(m.ToolResults) > MaxToolJSON {
		return &molt.Error{Code: molt.ETOOLARGE, Field: "tool_calls", Message: "tool data over the limit"}
	}
	return nil
}

// AppendMessage appends Message to its session. Its condition is that the session
// exists and its NextSeq equals Message.Seq; it sets NextSeq to Seq+1 and
// UpdatedAt, and stores the message (which must not exist).
type AppendMessage struct{ Message Message }

// SetSummary records a compaction: Summary replaces messages up to UpToSeq. Its
// condition is that the session exists and its SummarySeq equals IfSummarySeq.
type SetSummary struct {
	SessionID    string
	Summary      string
	UpToSeq      int
	IfSummarySeq int
}

// MarkExternal marks a session external (Session.External): input from
// outside molt reached it, e.g. a delegated message's answer from a remote
// agent. Its condition is that the session exists; marking a session that is
// external already changes nothing else.
type MarkExternal struct{ SessionID string }

// WorkOp marks MarkExternal as an op of work.Backend.Commit.
func (MarkExternal) WorkOp() {}

// Validate checks the op's session id.
func (op MarkExternal) Validate() error { return ValidateID("session_id", op.SessionID) }

// Writes names the session, which every op of the commit on it advances
// together.
func (op MarkExternal) Writes() []work.Record { return []work.Record{sessionRecord(op.SessionID)} }

// WorkOp marks AppendMessage as an op of work.Backend.Commit.
func (AppendMessage) WorkOp() {}

// WorkOp marks SetSummary as an op of work.Backend.Commit.
func (SetSummary) WorkOp() {}

// Both are checked by work.CheckCommit like the work ops.
var (
	_ work.CheckedOp = AppendMessage{}
	_ work.CheckedOp = SetSummary{}
	_ work.CheckedOp = MarkExternal{}
)

// Validate checks the message to append (see Message.ValidateStored).
func (op AppendMessage) Validate() error { return op.Message.ValidateStored() }

// Writes names the message, which no other op of the commit may write, and the
// session, which every append and summary of the commit advances together.
func (op AppendMessage) Writes() []work.Record {
	return []work.Record{sessionRecord(op.Message.SessionID),
		{Key: fmt.Sprintf("message %s/%d", op.Message.SessionID, op.Message.Seq)}}
}

// Writes names the session, which every append and summary of the commit
// advances together.
func (op SetSummary) Writes() []work.Record { return []work.Record{sessionRecord(op.SessionID)} }

func sessionRecord(id string) work.Record { return work.Record{Key: "session " + id, Shared: true} }

// Store keeps sessions and messages. Messages are written only through the
// AppendMessage op in a work.Backend Commit.
type Store interface {
	// CreateSession stores a new session (NextSeq 1). EINVALID for a bad
	// workspace, agent, title or access; ENOTFOUND when the workspace is absent.
	CreateSession(ctx context.Context, s Session) (Session, error)
	// GetSession returns ENOTFOUND when absent.
	GetSession(ctx context.Context, id string) (Session, error)
	// ListSessions lists a workspace's sessions, newest first.
	ListSessions(ctx context.Context, ws string, q page.Query) (page.Page[Session], error)
	// SetTitle sets the title and its source when the title revision is still
	// ifRev, bumping it. ECONFLICT reason "stale_title" otherwise; ENOTFOUND.
	SetTitle(ctx context.Context, id, title, source string, ifRev int) (Session, error)
	// DeleteSession removes the session and its messages; ENOTFOUND when absent.
	// An append racing a delete either lands before it (and is deleted with it) or
	// fails its condition.
	DeleteSession(ctx context.Context, id string) error
	// ListMessages returns up to limit messages with seq > after, in order.
	ListMessages(ctx context.Context, id string, after, limit int) ([]Message, error)
}
