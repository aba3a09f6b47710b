package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/search"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func searchApp(t *testing.T, sc search.Config) (*app.App, *lockedBuffer) {
	t.Helper()
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir(), Search: sc}
	d, err := localbackend.Open(cfg, molt.SystemClock{}, &molt.SortableIDs{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a := app.New(cfg, d, slog.New(slog.NewJSONHandler(logs, nil)))
	t.Cleanup(func() { _ = a.Close() })
	return a, logs
}

// TestWebTools: both tools are registered; web_fetch refuses the metadata
// address and loopback with a safe message.
func TestWebTools(t *testing.T) {
	t.Parallel()
	a, _ := searchApp(t, search.Config{FetchAllowHTTP: true, TinyfishKey: "tf-secret"})
	tools, unknown := a.Chat.Tools().Select([]string{app.ToolWebSearch, app.ToolWebFetch})
	if len(tools) != 2 || len(unknown) != 0 {
		t.Fatalf("tools %v, unknown %v", tools, unknown)
	}
	fetch := tools[0]
	if fetch.Spec.Name != app.ToolWebFetch {
		fetch = tools[1]
	}
	if !json.Valid(fetch.Spec.InputSchema) || !json.Valid(tools[1].Spec.InputSchema) {
		t.Fatal("a tool's input schema is not JSON")
	}
	for _, u := range []string{"http://169.254.169.254/", "http://127.0.0.1/", "https://[fd00:ec2::254]/latest"} {
		in, _ := json.Marshal(map[string]string{"url": u})
		out, err := fetch.Run(context.Background(), in)
		if err == nil || err.Error() != "web_fetch failed: blocked_address" {
			t.Errorf("%s: %q, %v; want blocked_address", u, out, err)
		}
	}
}

// TestProbeSearXNG: readiness is logged when /config lists engines; an
// instance that never gets ready is logged as such once the wait is over.
func TestProbeSearXNG(t *testing.T) {
	t.Parallel()
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/config" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"engines":[{"name":"brave","enabled":true,"categories":["general"]}],"version":"2026.1.11"}`))
	}))
	t.Cleanup(ready.Close)
	a, logs := searchApp(t, search.Config{SearXNGURL: ready.URL})
	if !a.ProbeSearXNG(context.Background(), 5*time.Second) || !strings.Contains(logs.String(), "SearXNG ready") {
		t.Fatalf("probe of a ready instance: logs %s", logs)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	b, logs := searchApp(t, search.Config{SearXNGURL: down.URL})
	start := time.Now()
	if b.ProbeSearXNG(context.Background(), 1500*time.Millisecond) {
		t.Fatal("probe of a down instance reported ready")
	}
	if took := time.Since(start); took < time.Second || took > 4*time.Second {
		t.Fatalf("probe took %v, want about its 1.5 s", took)
	}
	if l := logs.String(); !strings.Contains(l, "SearXNG not ready") || !strings.Contains(l, "http_503") {
		t.Fatalf("logs %s", l)
	}
}
