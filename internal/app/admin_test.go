package app_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
)

func newApp(t *testing.T) *app.App {
	t.Helper()
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir()}
	d, err := localbackend.Open(cfg, molt.SystemClock{}, &molt.SortableIDs{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(cfg, d, nil)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// TestEnsureAdminTokenRefusesUnusableSecrets: a secret no request could present
// as a bearer token (too short, too long, with a space or a comma) is refused at
// start, whether it comes from MOLT_ADMIN_TOKEN or the admin-token file, and no
// full token is stored for it.
func TestEnsureAdminTokenRefusesUnusableSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, secret := range []string{
		"short",
		strings.Repeat("x", 19),
		strings.Repeat("x", 201),
		"has a space in the middle of it",
		"has,a,comma,in,the,middle,of,it",
		"tab\tin\tthe\tmiddle\tof\tthe\tsecret",
	} {
		a := newApp(t)
		if _, err := a.EnsureAdminToken(ctx, secret, io.Discard); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("MOLT_ADMIN_TOKEN %q: %v, want invalid", secret, err)
		}
		if _, err := a.Store.TokenByHash(ctx, auth.Hash(secret)); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("MOLT_ADMIN_TOKEN %q stored: %v", secret, err)
		}
		a = newApp(t)
		path := filepath.Join(a.Config.DataDir, app.AdminTokenFile)
		if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := a.EnsureAdminToken(ctx, "", io.Discard); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("admin-token file %q: %v, want invalid", secret, err)
		}
		if _, err := a.Store.TokenByHash(ctx, auth.Hash(secret)); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("admin-token file %q stored: %v", secret, err)
		}
	}
	// A good secret works from either source, and the file is 0600.
	a := newApp(t)
	good := "molt_" + strings.Repeat("G", 40)
	if got, err := a.EnsureAdminToken(ctx, good, io.Discard); err != nil || got != good {
		t.Fatalf("MOLT_ADMIN_TOKEN: %q, %v", got, err)
	}
	if auth.ParseBearer("Bearer "+good) != good {
		t.Fatal("a good secret does not parse as a bearer token")
	}
	a = newApp(t)
	secret, err := a.EnsureAdminToken(ctx, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(a.Config.DataDir, app.AdminTokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin-token file: %v, %v; want mode 0600", fi, err)
	}
	if again, err := a.EnsureAdminToken(ctx, "", io.Discard); err != nil || again != secret {
		t.Fatalf("second start: %q, %v; want the same secret", again, err)
	}
}

// TestEnsureAdminTokenIsFull: MOLT_ADMIN_TOKEN or an admin-token file holding
// the secret of an existing scoped token does not start an "admin" that is not
// one.
func TestEnsureAdminTokenIsFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newApp(t)
	secret, _, err := a.CreateToken(ctx, auth.Workspace, "acme", "guest")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnsureAdminToken(ctx, secret, io.Discard); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("a workspace token's secret as MOLT_ADMIN_TOKEN: %v, want invalid", err)
	}
	if err := os.WriteFile(filepath.Join(a.Config.DataDir, app.AdminTokenFile), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnsureAdminToken(ctx, "", io.Discard); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("a workspace token's secret in the admin-token file: %v, want invalid", err)
	}
	if tok, err := a.Store.TokenByHash(ctx, auth.Hash(secret)); err != nil || tok.Level != auth.Workspace {
		t.Fatalf("the workspace token became %+v, %v", tok, err)
	}
}
