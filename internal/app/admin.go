package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
)

// AdminTokenFile is where `molt serve` keeps the admin token it created, mode 0600.
const AdminTokenFile = "admin-token"

// EnsureAdminToken makes sure an admin (full) token exists and returns its secret.
// With envSecret (MOLT_ADMIN_TOKEN) set, that secret is stored (idempotently) and
// used. Otherwise the secret in <dataDir>/admin-token is reused when its hash is in
// the store (stored again when not); either secret must pass auth.ValidateSecret
// (EINVALID otherwise, so an unusable admin token fails the start, not every
// request); on first start a new token is created, printed once to out, and
// written to that file with mode 0600.
func (a *App) EnsureAdminToken(ctx context.Context, envSecret string, out io.Writer) (string, error) {
	path := filepath.Join(a.Config.DataDir, AdminTokenFile)
	if envSecret != "" {
		if err := auth.ValidateSecret("MOLT_ADMIN_TOKEN", envSecret); err != nil {
			return "", err
		}
		if err := a.storeFull(ctx, envSecret); err != nil {
			return "", err
		}
		fmt.Fprintln(out, "admin token: from MOLT_ADMIN_TOKEN")
		return envSecret, nil
	}
	if b, err := os.ReadFile(path); err == nil {
		secret := strings.TrimSpace(string(b))
		if err := auth.ValidateSecret(path, secret); err != nil {
			return "", err
		}
		// Stored again when the file outlived its store (a fresh table, a
		// deleted db).
		if err := a.storeFull(ctx, secret); err != nil {
			return "", err
		}
		fmt.Fprintf(out, "admin token: in %s\n", path)
		return secret, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	secret, tok, err := auth.New(auth.Full, "", "admin", a.Clock.Now())
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(a.Config.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	if err := a.Store.PutToken(ctx, tok); err != nil {
		return "", fmt.Errorf("store admin token: %w", err)
	}
	fmt.Fprintf(out, "admin token (shown once, also saved to %s):\n%s\n", path, secret)
	return secret, nil
}

// storeFull stores secret as a full token unless it is one already; EINVALID
// when it is the secret of a token of another level.
func (a *App) storeFull(ctx context.Context, secret string) error {
	h := auth.Hash(secret)
	switch t, err := a.Store.TokenByHash(ctx, h); {
	case err == nil && t.Revoked():
		return molt.Invalid("admin token", "the admin token %s was revoked; run `molt token rotate-admin` (or set another MOLT_ADMIN_TOKEN)", t.ID)
	case err == nil && t.Level == auth.Full:
		return nil
	case err == nil:
		return molt.Invalid("admin token", "the admin secret is the secret of a %s token, not a full one", t.Level)
	case molt.ErrorCode(err) != molt.ENOTFOUND:
		return fmt.Errorf("look up admin token: %w", err)
	}
	tok := auth.Token{Hash: h, ID: h[:12], Level: auth.Full, Name: "admin", CreatedAt: a.Clock.Now()}
	if err := a.Store.PutToken(ctx, tok); err != nil && molt.ErrorCode(err) != molt.ECONFLICT {
		return fmt.Errorf("store admin token: %w", err)
	}
	return nil
}

// RotateAdminToken replaces the admin token of <data>/admin-token: a new full
// token is stored and written to that file (mode 0600, replaced atomically),
// then the token of the old secret, if any, is revoked. It returns the new
// secret. EINVALID when envSecret (MOLT_ADMIN_TOKEN) is set: that admin token
// is the operator's to change.
func (a *App) RotateAdminToken(ctx context.Context, envSecret string) (string, auth.Token, error) {
	if envSecret != "" {
		return "", auth.Token{}, molt.Invalid("MOLT_ADMIN_TOKEN", "MOLT_ADMIN_TOKEN is set: revoke its token with `molt token revoke` and set a new one")
	}
	path := filepath.Join(a.Config.DataDir, AdminTokenFile)
	var old string
	if b, err := os.ReadFile(path); err == nil {
		old = strings.TrimSpace(string(b))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", auth.Token{}, fmt.Errorf("read admin token: %w", err)
	}
	secret, tok, err := auth.New(auth.Full, "", "admin", a.Clock.Now())
	if err != nil {
		return "", auth.Token{}, err
	}
	if err := a.Store.PutToken(ctx, tok); err != nil {
		return "", auth.Token{}, fmt.Errorf("store admin token: %w", err)
	}
	if err := os.MkdirAll(a.Config.DataDir, 0o700); err != nil {
		return "", auth.Token{}, fmt.Errorf("create data dir: %w", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		return "", auth.Token{}, fmt.Errorf("write admin token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", auth.Token{}, fmt.Errorf("write admin token: %w", err)
	}
	if old != "" && old != secret {
		h := auth.Hash(old)
		id := h[:auth.IDLen]
		if _, err := a.Store.RevokeToken(ctx, h, a.Clock.Now()); err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
			return "", auth.Token{}, fmt.Errorf("revoke old admin token %s (the new one is in %s): %w", id, path, err)
		}
	}
	tok.Hash = ""
	return secret, tok, nil
}

// CreateToken creates a token and returns its secret. Unlike Tokens.Create
// (what `molt token create` and the API use) it does not check that the
// workspace exists.
func (a *App) CreateToken(ctx context.Context, level auth.Level, ws, name string) (string, auth.Token, error) {
	secret, tok, err := auth.New(level, ws, name, a.Clock.Now())
	if err != nil {
		return "", auth.Token{}, err
	}
	if err := a.Store.PutToken(ctx, tok); err != nil {
		return "", auth.Token{}, fmt.Errorf("store token: %w", err)
	}
	return secret, tok, nil
}
