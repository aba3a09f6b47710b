package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/workspace"
)

// MaxMessagesPage bounds one ListMessages call: a larger limit is clamped to it.
const MaxMessagesPage = 500

// ReasonSessionExists is the ECONFLICT reason of a CreateSession whose id is taken.
const ReasonSessionExists = "exists"

// ReasonStaleTitle is the ECONFLICT reason of a SetTitle at an old title revision.
const ReasonStaleTitle = "stale_title"

// CreateSession stores a new session of an existing workspace, with NextSeq 1 and
// both times now; its id is generated when empty. EINVALID for a bad workspace
// name, workspace.Global (reason "reserved"), agent, title, title source, access,
// id, or a parent that is not a session of the same workspace (field "parent");
// ENOTFOUND when the workspace does not exist; ECONFLICT/ReasonSessionExists when
// the id is taken. Nothing is written on any error.
func (s *Store) CreateSession(ctx context.Context, in session.Session) (session.Session, error) {
	out, err := session.Prepare(in, s.ids.NewID)
	if err != nil {
		return session.Session{}, err
	}
	now := s.clock.Now().UTC()
	out.CreatedAt, out.UpdatedAt = now, now
	err = s.w.write(ctx, func(q querier) error {
		var one int
		err := q.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE name = ?`, out.Workspace).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return molt.NotFound("workspace %s not found", out.Workspace)
		}
		if err != nil {
			return err
		}
		if out.Parent != "" {
			err := q.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ? AND workspace = ?`, out.Parent, out.Workspace).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return molt.Invalid("parent", "parent session %s is not a session of workspace %s", out.Parent, out.Workspace)
			}
			if err != nil {
				return err
			}
		}
		res, err := q.ExecContext(ctx, `INSERT INTO sessions (id, workspace, agent, title, title_source, title_rev,
			access, external, parent, next_seq, summary_seq, summary, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			out.ID, out.Workspace, out.Agent, out.Title, out.TitleSource, out.TitleRev, out.Access, out.External,
			out.Parent, out.NextSeq, out.SummarySeq, out.Summary, ts(out.CreatedAt), ts(out.UpdatedAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return molt.Conflict(ReasonSessionExists, "session %s exists", out.ID)
		}
		return nil
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("create session in %s: %w", out.Workspace, err)
	}
	return out, nil
}

const sessionCols = `id, workspace, agent, title, title_source, title_rev, access, external, parent,
	next_seq, summary_seq, summary, created_at, updated_at, naming_seq`

func scanSession(r scanner) (session.Session, error) {
	var ss session.Session
	var created, updated string
	if err := r.Scan(&ss.ID, &ss.Workspace, &ss.Agent, &ss.Title, &ss.TitleSource, &ss.TitleRev, &ss.Access,
		&ss.External, &ss.Parent, &ss.NextSeq, &ss.SummarySeq, &ss.Summary, &created, &updated, &ss.NamingSeq); err != nil {
		return session.Session{}, err
	}
	var err error
	if ss.CreatedAt, err = parseTS(created); err != nil {
		return session.Session{}, err
	}
	if ss.UpdatedAt, err = parseTS(updated); err != nil {
		return session.Session{}, err
	}
	return ss, nil
}

// GetSession returns one session with its summary; EINVALID for a malformed id,
// ENOTFOUND when absent.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	if err := session.ValidateID("id", id); err != nil {
		return session.Session{}, err
	}
	return s.getSession(ctx, s.rdb, id)
}

func (s *Store) getSession(ctx context.Context, q querier, id string) (session.Session, error) {
	ss, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return session.Session{}, molt.NotFound("session %s not found", id)
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	return ss, nil
}

// ListSessions lists the sessions of workspace ws, newest (highest id) first; an
// empty page when it has none or does not exist. The cursor is the last id of the
// previous page. EINVALID for a bad name, cursor or limit.
func (s *Store) ListSessions(ctx context.Context, ws string, q page.Query) (page.Page[session.Session], error) {
	if err := workspace.ValidateName(ws); err != nil {
		return page.Page[session.Session]{}, err
	}
	limit, after, err := q.Normalize()
	if err != nil {
		return page.Page[session.Session]{}, err
	}
	var rows *sql.Rows
	if after == "" {
		rows, err = s.rdb.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE workspace = ?
			ORDER BY id DESC LIMIT ?`, ws, limit+1)
	} else {
		rows, err = s.rdb.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE workspace = ? AND id < ?
			ORDER BY id DESC LIMIT ?`, ws, after, limit+1)
	}
	if err != nil {
		return page.Page[session.Session]{}, fmt.Errorf("list sessions of %s: %w", ws, err)
	}
	defer rows.Close()
	out := page.Page[session.Session]{Items: []session.Session{}}
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return page.Page[session.Session]{}, fmt.Errorf("list sessions of %s: %w", ws, err)
		}
		out.Items = append(out.Items, ss)
	}
	if err := rows.Err(); err != nil {
		return page.Page[session.Session]{}, fmt.Errorf("list sessions of %s: %w", ws, err)
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		out.Next = page.Cursor(out.Items[limit-1].ID)
	}
	return out, nil
}

// SetTitle sets the title and its source (manual or auto) when the title revision
// is still ifRev, bumps the revision and UpdatedAt, and returns the session.
// EINVALID for a bad id, title or source; ENOTFOUND when absent;
// ECONFLICT/ReasonStaleTitle when the revision moved on (nothing written).
func (s *Store) SetTitle(ctx context.Context, id, title, source string, ifRev int) (session.Session, error) {
	if err := session.ValidateID("id", id); err != nil {
		return session.Session{}, err
	}
	if err := session.ValidateTitle(title, source); err != nil {
		return session.Session{}, err
	}
	if source == session.TitleNone {
		return session.Session{}, molt.Invalid("title_source", "title source must be manual or auto")
	}
	now := s.clock.Now().UTC()
	var out session.Session
	err := s.w.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `UPDATE sessions SET title = ?, title_source = ?, title_rev = title_rev + 1,
			updated_at = ? WHERE id = ? AND title_rev = ?`, title, source, ts(now), id, ifRev)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		cur, err := s.getSession(ctx, q, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return molt.Conflict(ReasonStaleTitle, "session %s title is at revision %d, not %d", id, cur.TitleRev, ifRev)
		}
		out = cur
		return nil
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("set title of session %s: %w", id, err)
	}
	return out, nil
}

// DeleteSession removes the session and its messages in one transaction.
// EINVALID for a malformed id, ENOTFOUND when absent. An AppendMessage committed
// before it is deleted with it; one after it fails its condition.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := session.ValidateID("id", id); err != nil {
		return err
	}
	err := s.w.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return molt.NotFound("session %s not found", id)
		}
		_, err = q.ExecContext(ctx, `DELETE FROM messages WHERE session_id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

const messageCols = `session_id, seq, role, text, tool_calls, tool_results, turn_id, created_at`

func scanMessage(r scanner) (session.Message, error) {
	var m session.Message
	var calls, results []byte
	var created string
	if err := r.Scan(&m.SessionID, &m.Seq, &m.Role, &m.Text, &calls, &results, &m.TurnID, &created); err != nil {
		return session.Message{}, err
	}
	if len(calls) > 0 {
		m.ToolCalls = calls
	}
	if len(results) > 0 {
		m.ToolResults = results
	}
	var err error
	m.CreatedAt, err = parseTS(created)
	return m, err
}

// ListMessages returns up to limit messages of session id with seq > after, in
// seq order; limit is clamped to 1..MaxMessagesPage. EINVALID for a malformed id,
// ENOTFOUND when the session does not exist.
func (s *Store) ListMessages(ctx context.Context, id string, after, limit int) ([]session.Message, error) {
	if err := session.ValidateID("id", id); err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), MaxMessagesPage)
	after = max(after, 0)
	var one int
	err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, molt.NotFound("session %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", id, err)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+messageCols+` FROM messages WHERE session_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", id, err)
	}
	defer rows.Close()
	out := []session.Message{}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("list messages of session %s: %w", id, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", id, err)
	}
	return out, nil
}

// applyAppend is the AppendMessage op: the session must exist with next_seq equal
// to the message's seq; it advances next_seq and stores the message (which must
// not exist). ok is false when the condition failed.
func (s *Store) applyAppend(ctx context.Context, q querier, op session.AppendMessage) (ok bool, err error) {
	m := op.Message
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.clock.Now()
	}
	res, err := q.ExecContext(ctx, `UPDATE sessions SET next_seq = next_seq + 1, updated_at = ?
		WHERE id = ? AND next_seq = ?`, ts(m.CreatedAt), m.SessionID, m.Seq)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, err
	}
	res, err = q.ExecContext(ctx, `INSERT INTO messages (`+messageCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id, seq) DO NOTHING`,
		m.SessionID, m.Seq, m.Role, m.Text, nilIfEmpty(m.ToolCalls), nilIfEmpty(m.ToolResults), m.TurnID, ts(m.CreatedAt))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// applySummary is the SetSummary op: the session must exist with summary_seq
// equal to IfSummarySeq.
func (s *Store) applySummary(ctx context.Context, q querier, op session.SetSummary) (ok bool, err error) {
	res, err := q.ExecContext(ctx, `UPDATE sessions SET summary = ?, summary_seq = ?, updated_at = ?
		WHERE id = ? AND summary_seq = ?`, op.Summary, op.UpToSeq, ts(s.clock.Now()), op.SessionID, op.IfSummarySeq)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func nilIfEmpty(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// applyRequestNaming is the RequestNaming op: the session exists, is the one
// created at op.Created, and its naming_seq is below op.Seq.
func (s *Store) applyRequestNaming(ctx context.Context, q querier, op session.RequestNaming) (ok bool, err error) {
	res, err := q.ExecContext(ctx, `UPDATE sessions SET naming_seq = ? WHERE id = ? AND created_at = ? AND naming_seq < ?`,
		op.Seq, op.SessionID, ts(op.Created), op.Seq)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// applySaveTitle is the SaveTitle op: the session exists, is the one created
// at op.Created, its title revision is op.IfTitleRev, its title is not
// manual (with OnlyUnset: not set at all), and with IfNamingSeq its
// naming_seq is that.
func (s *Store) applySaveTitle(ctx context.Context, q querier, op session.SaveTitle) (ok bool, err error) {
	query := `UPDATE sessions SET title = ?, title_source = ?, title_rev = title_rev + 1, updated_at = ?
		WHERE id = ? AND created_at = ? AND title_rev = ? AND title_source <> ?`
	args := []any{op.Title, session.TitleAuto, ts(s.clock.Now()), op.SessionID, ts(op.Created), op.IfTitleRev, session.TitleManual}
	if op.OnlyUnset {
		query += ` AND title_source = ''`
	}
	if op.IfNamingSeq > 0 {
		query += ` AND naming_seq = ?`
		args = append(args, op.IfNamingSeq)
	}
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
