package storetest

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
)

// testTokenLifecycle: tokens are listed (no hashes), their use recorded only
// forward, and a revoked token stays stored, revoked, with its first
// revocation time, and cannot be stored again.
func testTokenLifecycle(t *testing.T, open Opener) {
	e := setup(t, open)
	newToken := func(level auth.Level, ws, name string) (string, auth.Token) {
		t.Helper()
		secret, tok, err := auth.New(level, ws, name, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.s.PutToken(e.ctx, tok); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		return secret, tok
	}
	_, admin := newToken(auth.Full, "", "admin")
	ciSecret, ci := newToken(auth.Workspace, "acme", "ci")
	_, ro := newToken(auth.Readonly, "acme", "")

	// Listings come from an index that may lag: wait for all three.
	var list []auth.Token
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if list, err = e.s.ListTokens(e.ctx); err != nil {
			t.Fatalf("list tokens: %v", err)
		}
		if len(list) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(list) != 3 || list[0].ID != admin.ID || list[1].ID != ci.ID || list[2].ID != ro.ID {
		t.Fatalf("ListTokens = %+v, want admin, ci, readonly oldest first", list)
	}
	for _, tok := range list {
		if tok.Hash != "" {
			t.Fatalf("ListTokens gave token %s with its hash", tok.ID)
		}
	}
	if got := list[1]; got.Level != auth.Workspace || got.Workspace != "acme" || got.Name != "ci" ||
		!got.CreatedAt.Equal(ci.CreatedAt) || !got.LastUsedAt.IsZero() || got.Revoked() {
		t.Fatalf("listed ci token = %+v, want %+v never used, not revoked", got, ci)
	}

	// Use is recorded, never backwards.
	used := e.clock.Now()
	if err := e.s.TouchToken(e.ctx, ci.Hash, used); err != nil {
		t.Fatalf("touch: %v", err)
	}
	if err := e.s.TouchToken(e.ctx, ci.Hash, used.Add(-time.Hour)); err != nil {
		t.Fatalf("touch earlier: %v", err)
	}
	got, err := e.s.TokenByHash(e.ctx, ci.Hash)
	if err != nil || !got.LastUsedAt.Equal(used) {
		t.Fatalf("after touches: %+v %v, want last used %v", got, err, used)
	}
	wantCode(t, e.s.TouchToken(e.ctx, auth.Hash("molt_nobody_has_this_one"), used), molt.ENOTFOUND)

	// Revocation.
	revokedAt := e.clock.Now()
	rt, err := e.s.RevokeToken(e.ctx, ci.ID, revokedAt)
	if err != nil || !rt.RevokedAt.Equal(revokedAt) || rt.ID != ci.ID || rt.Hash != "" {
		t.Fatalf("revoke: %+v %v, want revoked at %v without hash", rt, err, revokedAt)
	}
	again, err := e.s.RevokeToken(e.ctx, ci.ID, revokedAt.Add(time.Hour))
	if err != nil || !again.RevokedAt.Equal(revokedAt) {
		t.Fatalf("revoke again: %+v %v, want the first revocation %v kept", again, err, revokedAt)
	}
	got, err = e.s.TokenByHash(e.ctx, auth.Hash(ciSecret))
	if err != nil || !got.Revoked() || !got.RevokedAt.Equal(revokedAt) || !got.LastUsedAt.Equal(used) {
		t.Fatalf("revoked token reads %+v %v", got, err)
	}
	wantCode(t, e.s.PutToken(e.ctx, ci), molt.ECONFLICT)
	_, err = e.s.RevokeToken(e.ctx, "000000000000", revokedAt)
	wantCode(t, err, molt.ENOTFOUND)
	if other, err := e.s.TokenByHash(e.ctx, ro.Hash); err != nil || other.Revoked() {
		t.Fatalf("another token was revoked too: %+v %v", other, err)
	}
	// By hash too (what rotating the admin token does: the secret is known).
	if rt, err := e.s.RevokeToken(e.ctx, ro.Hash, revokedAt); err != nil || rt.ID != ro.ID || !rt.Revoked() || rt.Hash != "" {
		t.Fatalf("revoke by hash: %+v %v", rt, err)
	}
	if got, err := e.s.TokenByHash(e.ctx, ro.Hash); err != nil || !got.Revoked() {
		t.Fatalf("revoked by hash reads %+v %v", got, err)
	}
	_, err = e.s.RevokeToken(e.ctx, auth.Hash("molt_nobody_has_this_one"), revokedAt)
	wantCode(t, err, molt.ENOTFOUND)
}
