package session

import (
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// The ops of background naming (see docs/architecture.md, "State machines",
// Naming). Both are conditional on the session's identity: its id and its
// CreatedAt, so a session deleted and created again under the same id is not
// the session a job was asked for. Neither shares the session's record with
// other ops of a commit: a commit may not carry one of them together with an
// append or a summary of the same session (work.CheckCommit refuses it).

// RequestNaming records that a naming job for the session's messages up to
// Seq was asked for: the session's NamingSeq becomes Seq. Its condition is that
// the session exists, was created at Created, and its NamingSeq is below Seq.
// It travels with the job's work.CreateItem, so the newest job of a session is
// always the one its NamingSeq names.
type RequestNaming struct {
	SessionID string
	Created   time.Time
	Seq       int
}

// SaveTitle is a naming job's compare-and-save of an automatic title (source
// auto, revision bumped). Its condition is that the session exists, was
// created at Created, its TitleRev is still IfTitleRev and its title is not
// manual; with OnlyUnset, that it has no title at all (once mode); with
// IfNamingSeq > 0, that its NamingSeq is still IfNamingSeq (always mode: no
// newer job superseded this one).
type SaveTitle struct {
	SessionID   string
	Created     time.Time
	Title       string
	IfTitleRev  int
	OnlyUnset   bool
	IfNamingSeq int
}

// WorkOp marks RequestNaming as an op of work.Backend.Commit.
func (RequestNaming) WorkOp() {}

// WorkOp marks SaveTitle as an op of work.Backend.Commit.
func (SaveTitle) WorkOp() {}

var (
	_ work.CheckedOp = RequestNaming{}
	_ work.CheckedOp = SaveTitle{}
)

// Validate checks the request: a session id, its creation time, a seq in range.
func (op RequestNaming) Validate() error {
	if err := ValidateID("session_id", op.SessionID); err != nil {
		return err
	}
	if op.Created.IsZero() {
		return molt.Invalid("created", "the session's creation time is missing")
	}
	if op.Seq < 1 || op.Seq > MaxSeq {
		return molt.Invalid("seq", "seq must be between 1 and %d", MaxSeq)
	}
	return nil
}

// Validate checks the save: a session id, its creation time, a non-empty
// title that ValidateTitle accepts, revisions not negative.
func (op SaveTitle) Validate() error {
	if err := ValidateID("session_id", op.SessionID); err != nil {
		return err
	}
	if op.Created.IsZero() {
		return molt.Invalid("created", "the session's creation time is missing")
	}
	if op.Title == "" {
		return molt.Invalid("title", "title is empty")
	}
	if err := ValidateTitle(op.Title, TitleAuto); err != nil {
		return err
	}
	if op.IfTitleRev < 0 || op.IfNamingSeq < 0 {
		return molt.Invalid("if_title_rev", "revisions must not be negative")
	}
	return nil
}

// Writes names the session, not shared: no other op of the commit may write it.
func (op RequestNaming) Writes() []work.Record {
	return []work.Record{{Key: "session " + op.SessionID}}
}

// Writes names the session, not shared: no other op of the commit may write it.
func (op SaveTitle) Writes() []work.Record { return []work.Record{{Key: "session " + op.SessionID}} }
