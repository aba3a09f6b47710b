package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
)

// maxHashLen bounds a token hash (hex SHA-256 is 64).
const maxHashLen = 128

// PutToken stores a token by its hash. EINVALID for an empty or overlong hash,
// ECONFLICT (reason "exists") when a token with that hash is stored.
func (s *Store) PutToken(ctx context.Context, t auth.Token) error {
	if t.Hash == "" || len(t.Hash) > maxHashLen {
		return molt.Invalid("hash", "token hash is empty or too long")
	}
	err := s.w.write(ctx, func(q querier) error {
		// The primary key refuses a second token with the same hash.
		_, err := q.ExecContext(ctx, `INSERT INTO tokens (hash, id, level, workspace, name, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, t.Hash, t.ID, string(t.Level), t.Workspace, t.Name, ts(t.CreatedAt))
		return err
	})
	if molt.ErrorReason(err) == "constraint" {
		return &molt.Error{Code: molt.ECONFLICT, Reason: "exists", Message: fmt.Sprintf("token %s exists", t.ID), Err: err}
	}
	if err != nil {
		return fmt.Errorf("put token %s: %w", t.ID, err)
	}
	return nil
}

// TokenByHash returns the token with that hash, revoked or not; ENOTFOUND when
// there is none.
func (s *Store) TokenByHash(ctx context.Context, hash string) (auth.Token, error) {
	if hash == "" || len(hash) > maxHashLen {
		return auth.Token{}, molt.NotFound("no such token")
	}
	t, err := scanToken(s.rdb.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return auth.Token{}, molt.NotFound("no such token")
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

const tokenCols = `hash, id, level, workspace, name, created_at, last_used_at, revoked_at`

func scanToken(row interface{ Scan(...any) error }) (auth.Token, error) {
	var t auth.Token
	var level, created, used, revoked string
	if err := row.Scan(&t.Hash, &t.ID, &level, &t.Workspace, &t.Name, &created, &used, &revoked); err != nil {
		return auth.Token{}, err
	}
	t.Level = auth.Level(level)
	var err error
	if t.CreatedAt, err = parseTS(created); err != nil {
		return auth.Token{}, fmt.Errorf("token %s: %w", t.ID, err)
	}
	if t.LastUsedAt, err = parseTS(used); err != nil {
		return auth.Token{}, fmt.Errorf("token %s: %w", t.ID, err)
	}
	if t.RevokedAt, err = parseTS(revoked); err != nil {
		return auth.Token{}, fmt.Errorf("token %s: %w", t.ID, err)
	}
	return t, nil
}

// ListTokens returns every token, oldest first, without hashes.
func (s *Store) ListTokens(ctx context.Context) ([]auth.Token, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []auth.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.Hash = ""
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken marks the token with that id (or hash) revoked at at (the first
// revocation is kept); ENOTFOUND when no token matches.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) (auth.Token, error) {
	if id == "" || len(id) > maxHashLen {
		return auth.Token{}, molt.NotFound("no such token")
	}
	var t auth.Token
	err := s.w.write(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE (id = ? OR hash = ?) AND revoked_at = ''`, ts(at), id, id); err != nil {
			return err
		}
		var err error
		t, err = scanToken(q.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ? OR hash = ?`, id, id))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return auth.Token{}, molt.NotFound("no token %s", id)
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	t.Hash = ""
	return t, nil
}

// TouchToken sets the token's last use to at when at is later.
func (s *Store) TouchToken(ctx context.Context, hash string, at time.Time) error {
	if hash == "" || len(hash) > maxHashLen {
		return molt.NotFound("no such token")
	}
	var found bool
	err := s.w.write(ctx, func(q querier) error {
		if err := q.QueryRowContext(ctx, `SELECT 1 FROM tokens WHERE hash = ?`, hash).Scan(new(int)); err != nil {
			return err
		}
		found = true
		_, err := q.ExecContext(ctx, `UPDATE tokens SET last_used_at = ? WHERE hash = ? AND last_used_at < ?`, ts(at), hash, ts(at))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !found) {
		return molt.NotFound("no such token")
	}
	if err != nil {
		return fmt.Errorf("touch token: %w", err)
	}
	return nil
}

// GetSettings returns the saved settings, or settings.Default() when none were
// saved. Keys missing from the saved document (added by a later version) take
// their default.
func (s *Store) GetSettings(ctx context.Context) (settings.Settings, error) {
	st, _, err := s.ReadSettings(ctx)
	return st, err
}

// ReadSettings returns the saved settings (as GetSettings) with their revision,
// 0 when none were saved.
func (s *Store) ReadSettings(ctx context.Context) (settings.Settings, int64, error) {
	var doc string
	var rev int64
	err := s.rdb.QueryRowContext(ctx, `SELECT doc, revision FROM settings WHERE id = 1`).Scan(&doc, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return settings.Default(), 0, nil
	}
	if err != nil {
		return settings.Settings{}, 0, fmt.Errorf("get settings: %w", err)
	}
	out := settings.Default()
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		return settings.Settings{}, 0, fmt.Errorf("decode stored settings: %w", err)
	}
	return out, rev, nil
}

// PutSettings saves the settings after settings.Validate and advances the
// revision; EINVALID (naming the key) writes nothing.
func (s *Store) PutSettings(ctx context.Context, st settings.Settings) error {
	if err := st.Validate(); err != nil {
		return err
	}
	doc := st.Encode()
	now := ts(s.clock.Now())
	err := s.w.write(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO settings (id, doc, updated_at, revision) VALUES (1, ?, ?, 1)
			ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at,
				revision = settings.revision + 1`, string(doc), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("put settings: %w", err)
	}
	return nil
}

// PutSettingsIf saves the settings after settings.Validate only while the stored
// revision is rev (one statement whose WHERE is the condition) and returns the
// new revision. ECONFLICT/settings.ReasonChanged when it is not; EINVALID
// (naming the key) writes nothing.
func (s *Store) PutSettingsIf(ctx context.Context, st settings.Settings, rev int64) (int64, error) {
	if err := st.Validate(); err != nil {
		return 0, err
	}
	doc := st.Encode()
	now := ts(s.clock.Now())
	err := s.w.write(ctx, func(q querier) error {
		var res sql.Result
		var err error
		if rev == 0 {
			// No row yet, or one saved before revisions existed.
			res, err = q.ExecContext(ctx, `INSERT INTO settings (id, doc, updated_at, revision) VALUES (1, ?, ?, 1)
				ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at, revision = 1
				WHERE settings.revision = 0`, string(doc), now)
		} else {
			res, err = q.ExecContext(ctx, `UPDATE settings SET doc = ?, updated_at = ?, revision = revision + 1
				WHERE id = 1 AND revision = ?`, string(doc), now, rev)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return molt.Conflict(settings.ReasonChanged, "the settings are no longer at revision %d", rev)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("put settings: %w", err)
	}
	return rev + 1, nil
}
