package session

import (
	"encoding/json"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Sessions share the work items' id syntax: safe in keys of every adapter.
var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ValidateID returns EINVALID naming field unless id is a session id.
func ValidateID(field, id string) error {
	if !idRe.MatchString(id) {
		return molt.Invalid(field, "session id %q is not valid", id)
	}
	return nil
}

// ValidateTitle returns EINVALID unless title is UTF-8 of at most MaxTitle
// characters and source is a title source.
func ValidateTitle(title, source string) error {
	if !utf8.ValidString(title) || utf8.RuneCountInString(title) > MaxTitle {
		return molt.Invalid("title", "title is not valid UTF-8 of at most %d characters", MaxTitle)
	}
	switch source {
	case TitleNone, TitleManual, TitleAuto:
		return nil
	}
	return molt.Invalid("title_source", "title source must be manual or auto")
}

// MaxSeq is the largest message seq every adapter stores (DynamoDB's message
// sort key has 10 digits).
const MaxSeq = 9_999_999_999

// ValidateStored is Validate plus what every adapter needs to store a message
// faithfully: a well-formed session id, a seq of at most MaxSeq, UTF-8 text,
// JSON tool data.
func (m Message) ValidateStored() error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Seq > MaxSeq {
		return molt.Invalid("seq", "seq over %d", MaxSeq)
	}
	if err := ValidateID("session_id", m.SessionID); err != nil {
		return err
	}
	if !utf8.ValidString(m.Text) {
		return molt.Invalid("text", "message text is not valid UTF-8")
	}
	if len(m.TurnID) > 200 || !utf8.ValidString(m.TurnID) {
		return molt.Invalid("turn_id", "turn id is too long or not UTF-8")
	}
	if len(m.ToolCalls) > 0 && !json.Valid(m.ToolCalls) {
		return molt.Invalid("tool_calls", "tool calls are not valid JSON")
	}
	if len(m.ToolResults) > 0 && !json.Valid(m.ToolResults) {
		return molt.Invalid("tool_results", "tool results are not valid JSON")
	}
	return nil
}

// Validate checks a SetSummary op before it is stored.
func (op SetSummary) Validate() error {
	if err := ValidateID("session_id", op.SessionID); err != nil {
		return err
	}
	if len(op.Summary) > MaxSummary {
		return &molt.Error{Code: molt.ETOOLARGE, Field: "summary", Message: "summary over the limit"}
	}
	if !utf8.ValidString(op.Summary) {
		return molt.Invalid("summary", "summary is not valid UTF-8")
	}
	if op.UpToSeq < 0 || op.IfSummarySeq < 0 {
		return molt.Invalid("seq", "summary sequence numbers must not be negative")
	}
	return nil
}

// Prepare validates a session to create and fills in what the store decides: the
// id when empty (from newID), NextSeq 1, title revision 0, no summary. EINVALID
// names the field; the reserved global workspace is EINVALID with reason
// "reserved".
func Prepare(in Session, newID func() string) (Session, error) {
	if err := workspace.ValidateName(in.Workspace); err != nil {
		return Session{}, err
	}
	if in.Workspace == workspace.Global {
		return Session{}, &molt.Error{Code: molt.EINVALID, Field: "workspace", Reason: "reserved",
			Message: fmt.Sprintf("workspace name %q is reserved", in.Workspace)}
	}
	if err := ValidateAgent(in.Agent); err != nil {
		return Session{}, err
	}
	if err := ValidateTitle(in.Title, in.TitleSource); err != nil {
		return Session{}, err
	}
	switch in.Access {
	case AccessFull, AccessWorkspace, AccessReadonly:
	default:
		return Session{}, molt.Invalid("access", "access must be full, workspace or readonly")
	}
	if in.Parent != "" {
		if err := ValidateID("parent", in.Parent); err != nil {
			return Session{}, err
		}
	}
	if in.ID == "" {
		in.ID = newID()
	}
	if err := ValidateID("id", in.ID); err != nil {
		return Session{}, err
	}
	in.TitleRev, in.NextSeq, in.SummarySeq, in.Summary, in.NamingSeq = 0, 1, 0, "", 0
	return in, nil
}
