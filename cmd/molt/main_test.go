package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/workspace"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func call(t *testing.T, method, url, token, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestServe runs `molt serve` as a user would after `make run`: it answers /health,
// prints an admin token once, refuses unauthenticated calls with problem+json,
// keeps a workspace token out of another workspace, refuses a path escape writing
// nothing, and shuts down on cancel. A second start reuses the token without
// printing the secret again.
func TestServe(t *testing.T) {
	t.Setenv("MOLT_BACKEND", "")
	t.Setenv("MOLT_ADMIN_TOKEN", "")
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--data", dir, "--tick", "1s"}, out, io.Discard)
	}()

	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, _, body := call(t, "GET", base+"/health", "", "")
	var health map[string]string
	if code != 200 || json.Unmarshal([]byte(body), &health) != nil || health["status"] != "ok" || health["version"] == "" || health["sha"] == "" {
		t.Fatalf("health = %d %s", code, body)
	}
	secretBytes, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(secretBytes))
	if fi, _ := os.Stat(filepath.Join(dir, "admin-token")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin-token mode %v, want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(out.String(), admin) {
		t.Fatalf("the admin token was not printed on first start:\n%s", out.String())
	}

	code, hdr, body := call(t, "GET", base+"/api/workspaces", "", "")
	if code != 401 || hdr.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"code"`) {
		t.Fatalf("unauthenticated = %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	for _, ws := range []string{"acme", "other"} {
		if code, _, body := call(t, "PUT", base+"/api/workspaces/"+ws, admin, ""); code != 201 {
			t.Fatalf("create %s = %d %s", ws, code, body)
		}
	}
	if code, _, body := call(t, "PUT", base+"/api/workspaces/other/files/INSTRUCTIONS.md", admin, "secret rules"); code != 201 {
		t.Fatalf("put file = %d %s", code, body)
	}

	// A workspace token from `molt token create` (last line of its output).
	var tokOut bytes.Buffer
	if err := run(context.Background(), []string{"token", "create", "--level", "workspace", "--workspace", "acme", "--data", dir}, &tokOut, io.Discard); err != nil {
		t.Fatalf("token create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(tokOut.String()), "\n")
	wsTok := lines[len(lines)-1]
	if !strings.HasPrefix(wsTok, "molt_") {
		t.Fatalf("token create printed %q", tokOut.String())
	}
	if code, _, _ := call(t, "GET", base+"/api/workspaces/acme/files", wsTok, ""); code != 200 {
		t.Fatalf("own workspace = %d", code)
	}
	if code, _, body := call(t, "GET", base+"/api/workspaces/other/files/INSTRUCTIONS.md", wsTok, ""); code != 404 || strings.Contains(body, "secret rules") {
		t.Fatalf("other workspace = %d %s, want 404", code, body)
	}
	if code, _, _ := call(t, "PUT", base+"/api/workspaces/acme/files/INSTRUCTIONS.md", wsTok, "x"); code != 403 {
		t.Fatalf("workspace token writing a file = %d, want 403", code)
	}
	// Path escapes are refused and nothing is written.
	for _, p := range []string{"../x", "%2e%2e/x", "agents/../../x", "a//b"} {
		code, _, _ := call(t, "PUT", base+"/api/workspaces/acme/files/"+p, admin, "evil")
		if code != 400 && code != 404 {
			t.Errorf("PUT %s = %d, want 400 or 404", p, code)
		}
	}
	_, _, body = call(t, "GET", base+"/api/workspaces/acme/files", admin, "")
	if strings.Contains(body, "evil") || strings.Contains(body, `"x"`) {
		t.Fatalf("files after escapes: %s", body)
	}
	var files struct{ Items []map[string]any }
	if err := json.Unmarshal([]byte(body), &files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files.Items {
		if f["scope"] != "global" {
			t.Fatalf("a file was written to acme: %v", f)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not shut down")
	}

	// Second start: the token is reused, its secret not printed again.
	ctx2, cancel2 := context.WithCancel(context.Background())
	out2 := &syncBuffer{}
	addr2 := freeAddr(t)
	done2 := make(chan error, 1)
	go func() { done2 <- run(ctx2, []string{"serve", "--addr", addr2, "--data", dir}, out2, io.Discard) }()
	deadline = time.Now().Add(20 * time.Second)
	for {
		if code, _, _ := func() (int, http.Header, string) {
			resp, err := http.Get("http://" + addr2 + "/health")
			if err != nil {
				return 0, nil, ""
			}
			resp.Body.Close()
			return resp.StatusCode, nil, ""
		}(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second serve did not answer:\n%s", out2.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, _ := call(t, "GET", "http://"+addr2+"/api/workspaces", admin, ""); code != 200 {
		t.Fatalf("admin token after restart = %d", code)
	}
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out2.String(), admin) {
		t.Fatal("the admin secret was printed again on the second start")
	}
}

func TestInvoke(t *testing.T) {
	t.Setenv("MOLT_BACKEND", "")
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"invoke", "api", "--event", "../../events/api-health.json", "--data", dir}, &out, io.Discard); err != nil {
		t.Fatalf("invoke api: %v", err)
	}
	var resp struct {
		StatusCode int    `json:"statusCode"`
		Body       string `json:"body"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"status":"ok"`) {
		t.Fatalf("invoke api health = %v %s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"invoke", "ticker", "--event", "../../events/ticker-scheduled.json", "--data", dir}, &out, io.Discard); err != nil {
		t.Fatalf("invoke ticker: %v", err)
	}
	var res map[string]int
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("ticker result %q: %v", out.String(), err)
	}
	if _, ok := res["requeued"]; !ok {
		t.Fatalf("ticker result %v lacks counts", res)
	}
	if err := run(context.Background(), []string{"invoke", "nope", "--event", "../../events/api-health.json", "--data", dir}, &out, io.Discard); err == nil {
		t.Fatal("unknown function accepted")
	}
	if err := run(context.Background(), []string{"token", "create", "--level", "root", "--data", dir}, &out, io.Discard); err == nil {
		t.Fatal("bad level accepted")
	}
}

// TestResolve: molt resolve prints how a message routes against a
// workspace's agents, without dispatching it.
func TestResolve(t *testing.T) {
	t.Setenv("MOLT_BACKEND", "")
	dir := t.TempDir()
	ctx := context.Background()
	a, err := open(ctx, dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Store.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Store.PutFile(ctx, workspace.NewFile("acme", "agents/reviewer/AGENT.md", []byte("You review."), time.Now())); err != nil {
		t.Fatal(err)
	}
	a.Close()
	for _, c := range []struct{ text, want string }{
		{"Have the reviewer look at this", `"decision": "dispatch"`},
		{"`have the reviewer look at this`", `"decision": "local"`},
		{"@nobody hi", `"reason": "unknown_target"`},
	} {
		out := &syncBuffer{}
		if err := run(ctx, []string{"resolve", "--workspace", "acme", "--data", dir, c.text}, out, io.Discard); err != nil {
			t.Fatalf("resolve %q: %v", c.text, err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Fatalf("resolve %q printed %s, want %s", c.text, out.String(), c.want)
		}
	}
	if err := run(ctx, []string{"resolve", "--workspace", "nosuch", "--data", dir, "hi"}, io.Discard, io.Discard); err == nil {
		t.Fatal("resolve in a missing workspace succeeded")
	}
}
