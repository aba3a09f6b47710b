package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/workspace"
)

// syncBuffer collects log output from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is one handler on its own SQLite file, with a token of each kind.
type env struct {
	t     *testing.T
	store *sqlite.Store
	h     http.Handler
	logs  *syncBuffer

	full     string // full token
	ro       string // readonly on acme
	wsTok    string // workspace on acme
	otherTok string // workspace on other
	secrets  []string
}

func setup(t *testing.T) *env {
	t.Helper()
	clock := molt.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{Clock: clock, IDs: &molt.SortableIDs{Clock: clock}})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	logs := &syncBuffer{}
	e := &env{t: t, store: st, logs: logs}
	e.h = httpapi.New(httpapi.Config{
		Store: st, Clock: clock, Version: "v9.9.9", SHA: "abc1234",
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	ctx := context.Background()
	for _, name := range []string{"acme", "other"} {
		if _, _, err := st.PutWorkspace(ctx, workspace.Workspace{Name: name}); err != nil {
			t.Fatalf("put workspace %s: %v", name, err)
		}
	}
	e.full = e.token(auth.Full, "")
	e.ro = e.token(auth.Readonly, "acme")
	e.wsTok = e.token(auth.Workspace, "acme")
	e.otherTok = e.token(auth.Workspace, "other")
	t.Cleanup(e.checkLogs)
	return e
}

func (e *env) token(level auth.Level, ws string) string {
	e.t.Helper()
	secret, tok, err := auth.New(level, ws, "test", time.Now())
	if err != nil {
		e.t.Fatalf("new token: %v", err)
	}
	if err := e.store.PutToken(context.Background(), tok); err != nil {
		e.t.Fatalf("put token: %v", err)
	}
	e.secrets = append(e.secrets, secret, tok.Hash)
	return secret
}

// checkLogs fails when a secret or a token hash reached the log.
func (e *env) checkLogs() {
	logs := e.logs.String()
	for _, s := range e.secrets {
		if strings.Contains(logs, s) {
			e.t.Errorf("the log contains a token secret or hash")
		}
	}
}

// req is one request to send.
type req struct {
	method, path, token string
	body                string
	header              map[string]string
}

// do serves r and checks what every response must carry.
func (e *env) do(r req) *http.Response {
	e.t.Helper()
	hr := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, hr)
	resp := w.Result()
	resp.Request = hr // for failure messages and checkCommon
	checkCommon(e.t, resp)
	return resp
}

// checkCommon asserts the headers every response has, and that every error is a
// well-formed problem document.
func checkCommon(t *testing.T, resp *http.Response) {
	t.Helper()
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
	// The console's page and assets are cached on purpose (TestConsoleServed);
	// every other answer, and any console error, is no-store.
	console := resp.Request != nil && resp.StatusCode < 400 &&
		(resp.Request.URL.Path == "/" || strings.HasPrefix(resp.Request.URL.Path, "/assets/"))
	if got := resp.Header.Get("Cache-Control"); got != "no-store" && !console {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("no X-Request-Id")
	}
	if resp.StatusCode < 400 {
		return
	}
	if got := resp.Header.Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("status %d: Content-Type = %q, want application/problem+json", resp.StatusCode, got)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var p problemDoc
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("status %d: problem body %q: %v", resp.StatusCode, body, err)
		return
	}
	if p.Status != resp.StatusCode || p.Code == "" || p.Title == "" || p.Type == "" {
		t.Errorf("status %d: malformed problem %+v", resp.StatusCode, p)
	}
}

type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

// wantStatus fails unless resp has status want; it returns the body.
func wantStatus(t *testing.T, resp *http.Response, want int) []byte {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, want, body)
	}
	return body
}

// wantProblem fails unless resp is a problem with that status, code and field
// ("" = any field).
func wantProblem(t *testing.T, resp *http.Response, status int, code, field string) problemDoc {
	t.Helper()
	body := wantStatus(t, resp, status)
	var p problemDoc
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem %s: %v", body, err)
	}
	if p.Code != code {
		t.Errorf("%s %s: code %q, want %q (%s)", resp.Request.Method, resp.Request.URL, p.Code, code, body)
	}
	if field != "" && p.Field != field {
		t.Errorf("%s %s: field %q, want %q (%s)", resp.Request.Method, resp.Request.URL, p.Field, field, body)
	}
	return p
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

type fileItem struct {
	Path      string    `json:"path"`
	SHA256    string    `json:"sha256"`
	Size      int       `json:"size"`
	Scope     string    `json:"scope"`
	UpdatedAt time.Time `json:"updated_at"`
}

type wsItem struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type list[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// allFiles returns every stored file of global and the given workspaces, read
// from the store itself.
func (e *env) allFiles(names ...string) []workspace.File {
	e.t.Helper()
	var out []workspace.File
	for _, ws := range append([]string{workspace.Global}, names...) {
		fs, err := e.store.ListFiles(context.Background(), ws)
		if err != nil {
			e.t.Fatalf("list files of %s: %v", ws, err)
		}
		out = append(out, fs...)
	}
	return out
}
