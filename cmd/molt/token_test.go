package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/auth"
)

// molt runs the command and returns its output.
func molt(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out, io.Discard)
	return out.String(), err
}

// TestTokenCommands: create refuses a missing workspace; list shows ids,
// levels, workspaces, names and dates but no secret; revoke marks a token
// revoked; rotate-admin writes a new admin token (0600) and revokes the old.
func TestTokenCommands(t *testing.T) {
	t.Setenv("MOLT_BACKEND", "local")
	t.Setenv("MOLT_ADMIN_TOKEN", "")
	dir := t.TempDir()
	if _, err := molt(t, "token", "create", "--level", "workspace", "--workspace", "nosuch", "--data", dir); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("token for a missing workspace: %v, want refused", err)
	}
	out, err := molt(t, "token", "create", "--level", "full", "--name", "ops", "--data", dir)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	secret := lines[len(lines)-1]
	id := auth.Hash(secret)[:12]

	list, err := molt(t, "token", "list", "--data", dir)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if !strings.Contains(list, id) || !strings.Contains(list, "ops") || !strings.Contains(list, "full") ||
		strings.Contains(list, secret) || strings.Contains(list, auth.Hash(secret)) {
		t.Fatalf("list:\n%s\nwant token %s with its level and name, without secret or hash", list, id)
	}
	if _, err := molt(t, "token", "revoke", id, "--data", dir); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := molt(t, "token", "revoke", "000000000000", "--data", dir); err == nil {
		t.Fatal("revoking an unknown id succeeded")
	}
	list, _ = molt(t, "token", "list", "--data", dir)
	if row := lineWith(list, id); strings.HasSuffix(strings.TrimSpace(row), "-") {
		t.Fatalf("revoked token listed as %q, want a revocation time", row)
	}

	// Rotation: the first creates the file, the second revokes what it held.
	if _, err := molt(t, "token", "rotate-admin", "--data", dir); err != nil {
		t.Fatalf("rotate-admin: %v", err)
	}
	path := filepath.Join(dir, "admin-token")
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := molt(t, "token", "rotate-admin", "--data", dir); err != nil {
		t.Fatalf("rotate-admin again: %v", err)
	}
	second, _ := os.ReadFile(path)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin-token mode %v %v, want 0600", fi.Mode().Perm(), err)
	}
	oldID := auth.Hash(strings.TrimSpace(string(first)))[:12]
	newID := auth.Hash(strings.TrimSpace(string(second)))[:12]
	list, _ = molt(t, "token", "list", "--data", dir)
	if oldRow, newRow := lineWith(list, oldID), lineWith(list, newID); oldID == newID ||
		strings.HasSuffix(strings.TrimSpace(oldRow), " -") || !strings.HasSuffix(strings.TrimSpace(newRow), " -") {
		t.Fatalf("after rotation:\n%s\nwant %s revoked and %s valid", list, oldID, newID)
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
