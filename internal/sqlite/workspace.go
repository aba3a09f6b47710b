package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/workspace"
)

// ReasonTooManyFiles is the ECONFLICT reason of a PutFile that would add a file to
// a surface that already has workspace.MaxFiles files.
const ReasonTooManyFiles = "too_many_files"

func reserved(name string) error {
	return &molt.Error{Code: molt.EINVALID, Field: "workspace", Reason: "reserved",
		Message: fmt.Sprintf("workspace name %q is reserved", name)}
}

// PutWorkspace creates or updates a workspace and reports whether it was created.
// A new workspace takes w.CreatedAt, or now when that is zero; an update keeps the
// stored CreatedAt. UpdatedAt is always now. EINVALID (field "workspace") for a bad
// name or for workspace.Global (reason "reserved"), EINVALID (field
// "description") for a description over workspace.MaxDescLength.
func (s *Store) PutWorkspace(ctx context.Context, w workspace.Workspace) (workspace.Workspace, bool, error) {
	if err := workspace.ValidateName(w.Name); err != nil {
		return workspace.Workspace{}, false, err
	}
	if w.Name == workspace.Global {
		return workspace.Workspace{}, false, reserved(w.Name)
	}
	if len(w.Description) > workspace.MaxDescLength {
		return workspace.Workspace{}, false, molt.Invalid("description", "description over %d characters", workspace.MaxDescLength)
	}
	now := s.clock.Now().UTC()
	sortKey := s.ids.NewID()
	var out workspace.Workspace
	var created bool
	err := s.w.write(ctx, func(q querier) error {
		out, created = w, false
		out.UpdatedAt = now
		var stored string
		err := q.QueryRowContext(ctx, `SELECT created_at FROM workspaces WHERE name = ?`, w.Name).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created = true
			if out.CreatedAt.IsZero() {
				out.CreatedAt = now
			}
			out.CreatedAt = out.CreatedAt.UTC()
			_, err = q.ExecContext(ctx, `INSERT INTO workspaces (name, sort_key, description, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?)`, out.Name, sortKey, out.Description, ts(out.CreatedAt), ts(out.UpdatedAt))
			return err
		case err != nil:
			return err
		}
		if out.CreatedAt, err = parseTS(stored); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, `UPDATE workspaces SET description = ?, updated_at = ? WHERE name = ?`,
			out.Description, ts(out.UpdatedAt), out.Name)
		return err
	})
	if err != nil {
		return workspace.Workspace{}, false, fmt.Errorf("put workspace %s: %w", w.Name, err)
	}
	return out, created, nil
}

const workspaceCols = `name, description, created_at, updated_at, sort_key`

func scanWorkspace(r scanner) (workspace.Workspace, string, error) {
	var w workspace.Workspace
	var created, updated, sortKey string
	if err := r.Scan(&w.Name, &w.Description, &created, &updated, &sortKey); err != nil {
		return workspace.Workspace{}, "", err
	}
	var err error
	if w.CreatedAt, err = parseTS(created); err != nil {
		return workspace.Workspace{}, "", err
	}
	if w.UpdatedAt, err = parseTS(updated); err != nil {
		return workspace.Workspace{}, "", err
	}
	return w, sortKey, nil
}

// GetWorkspace returns the workspace name; EINVALID for a bad name, ENOTFOUND when
// absent (workspace.Global is a surface, not a workspace: ENOTFOUND).
func (s *Store) GetWorkspace(ctx context.Context, name string) (workspace.Workspace, error) {
	if err := workspace.ValidateName(name); err != nil {
		return workspace.Workspace{}, err
	}
	w, _, err := scanWorkspace(s.rdb.QueryRowContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return workspace.Workspace{}, molt.NotFound("workspace %s not found", name)
	}
	if err != nil {
		return workspace.Workspace{}, fmt.Errorf("get workspace %s: %w", name, err)
	}
	return w, nil
}

// ListWorkspaces lists workspaces newest first (by an id made at creation, so the
// cursor stays valid while workspaces are created). EINVALID for a bad cursor or
// limit.
func (s *Store) ListWorkspaces(ctx context.Context, q page.Query) (page.Page[workspace.Workspace], error) {
	limit, after, err := q.Normalize()
	if err != nil {
		return page.Page[workspace.Workspace]{}, err
	}
	var rows *sql.Rows
	if after == "" {
		rows, err = s.rdb.QueryContext(ctx, `SELECT `+workspaceCols+` FROM workspaces ORDER BY sort_key DESC LIMIT ?`, limit+1)
	} else {
		rows, err = s.rdb.QueryContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE sort_key < ? ORDER BY sort_key DESC LIMIT ?`, after, limit+1)
	}
	if err != nil {
		return page.Page[workspace.Workspace]{}, fmt.Errorf("list workspaces: %w", err)
	}
	defer rows.Close()
	out := page.Page[workspace.Workspace]{Items: []workspace.Workspace{}}
	var keys []string
	for rows.Next() {
		w, key, err := scanWorkspace(rows)
		if err != nil {
			return page.Page[workspace.Workspace]{}, fmt.Errorf("list workspaces: %w", err)
		}
		out.Items = append(out.Items, w)
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		return page.Page[workspace.Workspace]{}, fmt.Errorf("list workspaces: %w", err)
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		out.Next = page.Cursor(keys[limit-1])
	}
	return out, nil
}

// DeleteWorkspace removes a workspace with its files, sessions and their messages
// in one transaction. EINVALID for a bad name or workspace.Global (reason
// "reserved"), ENOTFOUND when absent.
func (s *Store) DeleteWorkspace(ctx context.Context, name string) error {
	if err := workspace.ValidateName(name); err != nil {
		return err
	}
	if name == workspace.Global {
		return reserved(name)
	}
	err := s.w.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM workspaces WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return molt.NotFound("workspace %s not found", name)
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM files WHERE workspace = ?`, name); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM messages WHERE session_id IN
			(SELECT id FROM sessions WHERE workspace = ?)`, name); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, `DELETE FROM sessions WHERE workspace = ?`, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete workspace %s: %w", name, err)
	}
	return nil
}

// validateFileKey checks a file's workspace name (Global allowed) and path.
func validateFileKey(ws, path string) error {
	if err := workspace.ValidateName(ws); err != nil {
		return err
	}
	return workspace.ValidatePath(path)
}

// PutFile writes one file of f.Workspace (workspace.Global allowed) and returns it
// with its hash, size and UpdatedAt (now). EINVALID for a bad workspace name or
// path, ETOOLARGE (field "content") over workspace.MaxFileSize, ENOTFOUND when the
// workspace does not exist, ECONFLICT/ReasonTooManyFiles when a new file would
// exceed workspace.MaxFiles. Nothing is written on any error.
func (s *Store) PutFile(ctx context.Context, f workspace.File) (workspace.File, error) {
	return s.PutFileIf(ctx, f, workspace.Match{})
}

// PutFileIf is PutFile when m holds for the stored file, checked inside the
// write's transaction; ECONFLICT/workspace.ReasonPrecondition, writing nothing,
// when it does not.
func (s *Store) PutFileIf(ctx context.Context, f workspace.File, m workspace.Match) (workspace.File, error) {
	if err := validateFileKey(f.Workspace, f.Path); err != nil {
		return workspace.File{}, err
	}
	if len(f.Content) > workspace.MaxFileSize {
		return workspace.File{}, &molt.Error{Code: molt.ETOOLARGE, Field: "content",
			Message: fmt.Sprintf("file over %d bytes", workspace.MaxFileSize)}
	}
	content := f.Content
	if content == nil {
		content = []byte{}
	}
	nf := workspace.NewFile(f.Workspace, f.Path, content, s.clock.Now().UTC())
	err := s.w.write(ctx, func(q querier) error {
		if nf.Workspace != workspace.Global {
			var one int
			err := q.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE name = ?`, nf.Workspace).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return molt.NotFound("workspace %s not found", nf.Workspace)
			}
			if err != nil {
				return err
			}
		}
		var exists, count int
		var sha string
		err := q.QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM files WHERE workspace = ?1 AND path = ?2),
			COALESCE((SELECT sha256 FROM files WHERE workspace = ?1 AND path = ?2), ''),
			(SELECT COUNT(*) FROM files WHERE workspace = ?1)`, nf.Workspace, nf.Path).Scan(&exists, &sha, &count)
		if err != nil {
			return err
		}
		if !m.Holds(exists == 1, sha) {
			return workspace.PreconditionFailed(nf.Workspace, nf.Path)
		}
		if exists == 0 && count >= workspace.MaxFiles {
			return molt.Conflict(ReasonTooManyFiles, "workspace %s has %d files, the limit", nf.Workspace, workspace.MaxFiles)
		}
		_, err = q.ExecContext(ctx, `INSERT INTO files (workspace, path, content, sha256, size, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (workspace, path) DO UPDATE SET content = excluded.content, sha256 = excluded.sha256,
				size = excluded.size, updated_at = excluded.updated_at`,
			nf.Workspace, nf.Path, nf.Content, nf.SHA256, nf.Size, ts(nf.UpdatedAt))
		return err
	})
	if err != nil {
		return workspace.File{}, fmt.Errorf("put file %s/%s: %w", f.Workspace, f.Path, err)
	}
	return nf, nil
}

const fileCols = `workspace, path, content, sha256, size, updated_at`

func scanFile(r scanner) (workspace.File, error) {
	var f workspace.File
	var updated string
	if err := r.Scan(&f.Workspace, &f.Path, &f.Content, &f.SHA256, &f.Size, &updated); err != nil {
		return workspace.File{}, err
	}
	if f.Content == nil {
		f.Content = []byte{}
	}
	var err error
	f.UpdatedAt, err = parseTS(updated)
	return f, err
}

// GetFile returns one file with its content; EINVALID for a bad name or path,
// ENOTFOUND when absent.
func (s *Store) GetFile(ctx context.Context, ws, path string) (workspace.File, error) {
	if err := validateFileKey(ws, path); err != nil {
		return workspace.File{}, err
	}
	f, err := scanFile(s.rdb.QueryRowContext(ctx, `SELECT `+fileCols+` FROM files WHERE workspace = ? AND path = ?`, ws, path))
	if errors.Is(err, sql.ErrNoRows) {
		return workspace.File{}, molt.NotFound("file %s/%s not found", ws, path)
	}
	if err != nil {
		return workspace.File{}, fmt.Errorf("get file %s/%s: %w", ws, path, err)
	}
	return f, nil
}

// ListFiles returns every file of ws with content, sorted by path; an empty list
// when ws has none (or does not exist). EINVALID for a bad name.
func (s *Store) ListFiles(ctx context.Context, ws string) ([]workspace.File, error) {
	if err := workspace.ValidateName(ws); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+fileCols+` FROM files WHERE workspace = ? ORDER BY path`, ws)
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", ws, err)
	}
	defer rows.Close()
	out := []workspace.File{}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("list files of %s: %w", ws, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files of %s: %w", ws, err)
	}
	return out, nil
}

// DeleteFile removes one file; EINVALID for a bad name or path, ENOTFOUND when
// absent.
func (s *Store) DeleteFile(ctx context.Context, ws, path string) error {
	return s.DeleteFileIf(ctx, ws, path, workspace.Match{})
}

// DeleteFileIf is DeleteFile when m holds for the stored file, checked inside
// the delete's transaction; ECONFLICT/workspace.ReasonPrecondition, deleting
// nothing, when it does not.
func (s *Store) DeleteFileIf(ctx context.Context, ws, path string, m workspace.Match) error {
	if err := validateFileKey(ws, path); err != nil {
		return err
	}
	err := s.w.write(ctx, func(q querier) error {
		if !m.IsZero() {
			var sha string
			err := q.QueryRowContext(ctx, `SELECT sha256 FROM files WHERE workspace = ? AND path = ?`, ws, path).Scan(&sha)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if !m.Holds(err == nil, sha) {
				return workspace.PreconditionFailed(ws, path)
			}
		}
		res, err := q.ExecContext(ctx, `DELETE FROM files WHERE workspace = ? AND path = ?`, ws, path)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return molt.NotFound("file %s/%s not found", ws, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete file %s/%s: %w", ws, path, err)
	}
	return nil
}

// ListSurface returns every file of the global surface and of ws (none when ws
// is workspace.Global), each sorted by path, with one query. EINVALID for a bad
// name.
func (s *Store) ListSurface(ctx context.Context, ws string) (global, own []workspace.File, err error) {
	if err := workspace.ValidateName(ws); err != nil {
		return nil, nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+fileCols+` FROM files WHERE workspace IN (?, ?) ORDER BY path`,
		workspace.Global, ws)
	if err != nil {
		return nil, nil, fmt.Errorf("list surface of %s: %w", ws, err)
	}
	defer rows.Close()
	global, own = []workspace.File{}, []workspace.File{}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("list surface of %s: %w", ws, err)
		}
		if f.Workspace == workspace.Global {
			global = append(global, f)
		} else {
			own = append(own, f)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list surface of %s: %w", ws, err)
	}
	return global, own, nil
}

// ReadWorkspaceSettings returns workspace ws's overrides of the settings (none
// when none were saved) with their revision. EINVALID for a bad name,
// ENOTFOUND when the workspace does not exist.
func (s *Store) ReadWorkspaceSettings(ctx context.Context, ws string) (settings.Overrides, int64, error) {
	if err := workspace.ValidateName(ws); err != nil {
		return settings.Overrides{}, 0, err
	}
	var doc string
	var rev int64
	err := s.rdb.QueryRowContext(ctx, `SELECT settings, settings_revision FROM workspaces WHERE name = ?`, ws).Scan(&doc, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return settings.Overrides{}, 0, molt.NotFound("workspace %s not found", ws)
	}
	if err != nil {
		return settings.Overrides{}, 0, fmt.Errorf("get settings of workspace %s: %w", ws, err)
	}
	o, err := settings.DecodeOverrides(doc)
	if err != nil {
		return settings.Overrides{}, 0, fmt.Errorf("decode stored settings of workspace %s: %w", ws, err)
	}
	return o, rev, nil
}

// PutWorkspaceSettingsIf saves o as workspace ws's overrides after Validate
// only while their stored revision is rev (one statement whose WHERE is the
// condition), and returns the new revision. ECONFLICT/settings.ReasonChanged
// when it is not, ENOTFOUND when the workspace does not exist; EINVALID writes
// nothing. The overrides are a column of the workspace's row, so deleting the
// workspace deletes them.
func (s *Store) PutWorkspaceSettingsIf(ctx context.Context, ws string, o settings.Overrides, rev int64) (int64, error) {
	if err := workspace.ValidateName(ws); err != nil {
		return 0, err
	}
	if err := o.Validate(); err != nil {
		return 0, err
	}
	doc := string(o.Encode())
	err := s.w.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `UPDATE workspaces SET settings = ?, settings_revision = settings_revision + 1
			WHERE name = ? AND settings_revision = ?`, doc, ws, rev)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n > 0 {
			return nil
		}
		var one int
		err = q.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE name = ?`, ws).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return molt.NotFound("workspace %s not found", ws)
		}
		if err != nil {
			return err
		}
		return molt.Conflict(settings.ReasonChanged, "the settings of workspace %s are no longer at revision %d", ws, rev)
	})
	if err != nil {
		return 0, fmt.Errorf("put settings of workspace %s: %w", ws, err)
	}
	return rev + 1, nil
}
