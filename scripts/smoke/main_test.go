package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/buildinfo"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
)

const testSHA = "smoke0123456789"

// setup runs molt serve's wiring (the real handler and workers, on a free
// port) with a workspace acme, and returns its base URL and a workspace
// token of acme.
func setup(t *testing.T) (base, token string) {
	t.Helper()
	buildinfo.SHA = testSHA
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir(), A2AWait: 10 * time.Second}
	d, err := localbackend.Open(cfg, molt.SystemClock{}, &molt.SortableIDs{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(cfg, d, nil)
	ctx, cancel := context.WithCancel(context.Background())
	admin := auth.NewSecret()
	ready := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", AdminToken: admin, Ready: func(addr string) { ready <- addr }})
	}()
	t.Cleanup(func() { cancel(); <-done; _ = a.Close() })
	base = "http://" + <-ready
	req, _ := http.NewRequest("PUT", base+"/api/workspaces/acme", strings.NewReader(`{"description":"smoke"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("create workspace: %v %v", resp, err)
	}
	resp.Body.Close()
	token, _, err = a.CreateToken(ctx, auth.Workspace, "acme", "smoke")
	if err != nil {
		t.Fatal(err)
	}
	return base, token
}

func TestSmokePasses(t *testing.T) {
	base, token := setup(t)
	cfg, err := configFrom(env(map[string]string{"MOLT_SMOKE_URL": base + "/", "MOLT_SMOKE_SHA": testSHA,
		"MOLT_SMOKE_TOKEN": token, "MOLT_SMOKE_WORKSPACE": "acme", "MOLT_SMOKE_TIMEOUT": "20s"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Poll = 50 * time.Millisecond
	var out bytes.Buffer
	if failed := run(context.Background(), cfg, http.DefaultClient, &out); failed != 0 {
		t.Fatalf("%d checks failed:\n%s", failed, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Errorf("%d lines, want one per check (6):\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "ok   ") {
			t.Errorf("line %q is not a passing check", l)
		}
	}
}

func TestSmokeFails(t *testing.T) {
	base, token := setup(t)
	cases := []struct {
		name string
		env  map[string]string
		want []string // the checks that must fail
	}{
		{"wrong sha", map[string]string{"MOLT_SMOKE_SHA": "other"}, []string{"FAIL health"}},
		{"wrong token", map[string]string{"MOLT_SMOKE_TOKEN": "not-a-token-0123456789"},
			[]string{"FAIL api", "FAIL a2a SendMessage", "FAIL a2a GetTask", "FAIL a2a malformed body"}},
		{"unknown agent", map[string]string{"MOLT_SMOKE_AGENT": "nobody"}, []string{"FAIL a2a SendMessage", "FAIL a2a GetTask"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := map[string]string{"MOLT_SMOKE_URL": base, "MOLT_SMOKE_SHA": testSHA, "MOLT_SMOKE_TOKEN": token,
				"MOLT_SMOKE_WORKSPACE": "acme", "MOLT_SMOKE_TIMEOUT": "20s"}
			for k, v := range c.env {
				e[k] = v
			}
			cfg, err := configFrom(env(e))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Poll = 50 * time.Millisecond
			var out bytes.Buffer
			failed := run(context.Background(), cfg, http.DefaultClient, &out)
			if failed != len(c.want) {
				t.Errorf("%d checks failed, want %d:\n%s", failed, len(c.want), out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w+":") {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestConfigRequired(t *testing.T) {
	if _, err := configFrom(env(map[string]string{"MOLT_SMOKE_URL": "http://x"})); err == nil ||
		!strings.Contains(err.Error(), "MOLT_SMOKE_SHA") || !strings.Contains(err.Error(), "MOLT_SMOKE_TOKEN") {
		t.Errorf("missing settings: %v", err)
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
