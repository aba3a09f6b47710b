package app_test

import (
	"context"
	"io"
	"testing"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
)

// TestRevokedAdminToken: a start whose admin token was revoked fails instead of
// storing it again; rotate-admin revokes the old secret and the next start uses
// the new one.
func TestRevokedAdminToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newApp(t)
	old, err := a.EnsureAdminToken(ctx, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Store.RevokeToken(ctx, auth.Hash(old), a.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnsureAdminToken(ctx, "", io.Discard); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("start with a revoked admin token: %v, want EINVALID", err)
	}
	if _, err := a.EnsureAdminToken(ctx, old, io.Discard); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("MOLT_ADMIN_TOKEN of a revoked token: %v, want EINVALID", err)
	}
	secret, _, err := a.RotateAdminToken(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.EnsureAdminToken(ctx, "", io.Discard); err != nil || got != secret {
		t.Fatalf("start after rotation: %q %v, want the new secret", got, err)
	}
	if _, _, err := a.RotateAdminToken(ctx, old); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("rotate with MOLT_ADMIN_TOKEN set: %v, want EINVALID", err)
	}
	second, _, err := a.RotateAdminToken(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := a.Store.TokenByHash(ctx, auth.Hash(secret)); err != nil || !tok.Revoked() {
		t.Fatalf("the rotated-away token: %+v %v, want revoked", tok, err)
	}
	if tok, err := a.Store.TokenByHash(ctx, auth.Hash(second)); err != nil || tok.Revoked() || tok.Level != auth.Full {
		t.Fatalf("the new admin token: %+v %v", tok, err)
	}
}
