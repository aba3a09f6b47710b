package httpapi_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/workspace"
)

func TestHealth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := wantStatus(t, e.do(req{method: "GET", path: "/health"}), 200)
	got := decode[map[string]string](t, body)
	if got["status"] != "ok" || got["version"] != "v9.9.9" || got["sha"] != "abc1234" {
		t.Errorf("health = %v", got)
	}
	wantProblem(t, e.do(req{method: "POST", path: "/health"}), 405, "method_not_allowed", "")
}

func TestRouting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wantProblem(t, e.do(req{method: "GET", path: "/nope", token: e.full}), 404, "not_found", "")
	wantProblem(t, e.do(req{method: "GET", path: "/api/nope"}), 404, "not_found", "")
	resp := e.do(req{method: "DELETE", path: "/api/settings", token: e.full})
	wantProblem(t, resp, 405, "method_not_allowed", "")
	if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "PUT") {
		t.Errorf("Allow = %q, want GET and PUT", allow)
	}
	// The router's trailing-slash redirect never leaks out as a redirect.
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme/files", token: e.full, body: "x"}), 404, "not_found", "")
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resp := e.do(req{method: "GET", path: "/health", header: map[string]string{"X-Request-Id": "req-42"}})
	if got := resp.Header.Get("X-Request-Id"); got != "req-42" {
		t.Errorf("X-Request-Id = %q, want the caller's req-42", got)
	}
	a := e.do(req{method: "GET", path: "/health", header: map[string]string{"X-Request-Id": "bad id\"with quotes"}}).Header.Get("X-Request-Id")
	b := e.do(req{method: "GET", path: "/health"}).Header.Get("X-Request-Id")
	if a == b || strings.Contains(a, " ") {
		t.Errorf("generated ids %q, %q: want distinct, sane ids", a, b)
	}
	e.do(req{method: "GET", path: "/api/workspaces/acme", token: e.full, header: map[string]string{"X-Request-Id": "req-log"}})
	var found bool
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"request_id":"req-log"`) && strings.Contains(line, `"route":"GET /api/workspaces/{ws}"`) &&
			strings.Contains(line, `"status":200`) && strings.Contains(line, `"duration_ms"`) && strings.Contains(line, `"method":"GET"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no access log line for req-log in:\n%s", e.logs.String())
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		name, header string
	}{
		{"missing", ""},
		{"unknown", "Bearer molt_unknownunknownunknown"},
		{"not bearer", "Basic " + e.full},
		{"empty bearer", "Bearer "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.header != "" {
				h["Authorization"] = tc.header
			}
			for _, path := range []string{"/api/workspaces", "/api/settings", "/api/workspaces/acme/files/INSTRUCTIONS.md"} {
				resp := e.do(req{method: "GET", path: path, header: h})
				wantProblem(t, resp, 401, "unauthorized", "")
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q", got)
				}
			}
			// An unauthenticated write writes nothing, before the body is looked at.
			wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme/files/INSTRUCTIONS.md", header: h, body: "x"}), 401, "unauthorized", "")
		})
	}
	if n := len(e.allFiles("acme")); n != 0 {
		t.Errorf("%d files written by unauthenticated requests", n)
	}
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/acme/files/INSTRUCTIONS.md", token: e.full, body: "acme"}), 201)
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/other/files/INSTRUCTIONS.md", token: e.full, body: "other"}), 201)
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/global/files/USER.md", token: e.full, body: "global"}), 201)

	t.Run("scoped tokens read their workspace", func(t *testing.T) {
		for _, tok := range []string{e.ro, e.wsTok} {
			wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/acme", token: tok}), 200)
			wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/acme/files", token: tok}), 200)
			if got := string(wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/acme/files/INSTRUCTIONS.md", token: tok}), 200)); got != "acme" {
				t.Errorf("content %q, want acme", got)
			}
			// The shared surface shows through every workspace, so it is readable.
			wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/global/files/USER.md", token: tok}), 200)
			wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/global/files", token: tok}), 200)
		}
	})
	t.Run("403 for writes and settings without full", func(t *testing.T) {
		for _, tok := range []string{e.ro, e.wsTok} {
			for _, r := range []req{
				{method: "PUT", path: "/api/workspaces/acme/files/INSTRUCTIONS.md", body: "changed"},
				{method: "PUT", path: "/api/workspaces/acme/files/agents/x/AGENT.md", body: "new"},
				{method: "DELETE", path: "/api/workspaces/acme/files/INSTRUCTIONS.md"},
				{method: "PUT", path: "/api/workspaces/global/files/USER.md", body: "changed"},
				{method: "DELETE", path: "/api/workspaces/global/files/USER.md"},
				{method: "PUT", path: "/api/workspaces/acme", body: `{"description":"x"}`},
				{method: "DELETE", path: "/api/workspaces/acme"},
				{method: "GET", path: "/api/settings"},
				{method: "PUT", path: "/api/settings", body: `{"evolution":{"level":"L3"}}`},
			} {
				r.token = tok
				wantProblem(t, e.do(r), 403, "forbidden", "")
			}
		}
	})
	t.Run("404 for another workspace", func(t *testing.T) {
		for _, ws := range []string{"other", "nosuch"} {
			var details []string
			for _, r := range []req{
				{method: "GET", path: "/api/workspaces/" + ws},
				{method: "GET", path: "/api/workspaces/" + ws + "/files"},
				{method: "GET", path: "/api/workspaces/" + ws + "/files/INSTRUCTIONS.md"},
				{method: "PUT", path: "/api/workspaces/" + ws + "/files/INSTRUCTIONS.md", body: "stolen"},
				{method: "DELETE", path: "/api/workspaces/" + ws + "/files/INSTRUCTIONS.md"},
				{method: "PUT", path: "/api/workspaces/" + ws, body: `{}`},
				{method: "DELETE", path: "/api/workspaces/" + ws},
			} {
				r.token = e.wsTok
				p := wantProblem(t, e.do(r), 404, "not_found", "")
				details = append(details, strings.ReplaceAll(p.Detail, ws, "WS"))
			}
			if ws == "other" {
				// The answer for an existing workspace reads like the one for a missing one.
				for i, d := range details {
					if d != `workspace "WS" not found` {
						t.Errorf("request %d: detail %q reveals more than a missing workspace would", i, d)
					}
				}
			}
		}
		got, err := e.store.GetFile(context.Background(), "other", "INSTRUCTIONS.md")
		if err != nil || string(got.Content) != "other" {
			t.Errorf("other's file = %q, %v; want it untouched", got.Content, err)
		}
	})
	t.Run("scoped listing shows only its workspace", func(t *testing.T) {
		for _, tok := range []string{e.ro, e.wsTok} {
			l := decode[list[wsItem]](t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces", token: tok}), 200))
			if len(l.Items) != 1 || l.Items[0].Name != "acme" || l.NextCursor != "" {
				t.Errorf("scoped listing = %+v, want only acme", l)
			}
		}
		l := decode[list[wsItem]](t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces", token: e.full}), 200))
		if len(l.Items) != 2 {
			t.Errorf("full listing = %+v, want acme and other", l)
		}
	})
}

func TestWorkspaceCRUD(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resp := e.do(req{method: "PUT", path: "/api/workspaces/beta", token: e.full, body: `{"description":"first"}`, header: map[string]string{"Content-Type": "application/json"}})
	created := decode[wsItem](t, wantStatus(t, resp, 201))
	if created.Name != "beta" || created.Description != "first" || created.CreatedAt.IsZero() {
		t.Errorf("created = %+v", created)
	}
	updated := decode[wsItem](t, wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/beta", token: e.full, body: `{"description":"second"}`}), 200))
	if updated.Description != "second" || !updated.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("updated = %+v, want description second and created_at kept", updated)
	}
	// No description (empty body or {}) keeps the one it has.
	for _, body := range []string{"", "{}"} {
		got := decode[wsItem](t, wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/beta", token: e.full, body: body}), 200))
		if got.Description != "second" {
			t.Errorf("PUT %q: description %q, want second kept", body, got.Description)
		}
	}
	got := decode[wsItem](t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/beta", token: e.full}), 200))
	if got.Description != "second" {
		t.Errorf("get = %+v", got)
	}
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/beta/files/INSTRUCTIONS.md", token: e.full, body: "x"}), 201)
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/workspaces/beta", token: e.full}), 204)
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces/beta", token: e.full}), 404, "not_found", "")
	wantProblem(t, e.do(req{method: "DELETE", path: "/api/workspaces/beta", token: e.full}), 404, "not_found", "")
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces/beta/files/INSTRUCTIONS.md", token: e.full}), 404, "not_found", "")

	// global is reserved; bad names and descriptions are refused.
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/global", token: e.full, body: `{}`}), 400, "reserved", "workspace")
	wantProblem(t, e.do(req{method: "DELETE", path: "/api/workspaces/global", token: e.full}), 400, "reserved", "workspace")
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces/global", token: e.full}), 404, "not_found", "")
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/Bad_Name", token: e.full, body: `{}`}), 400, "invalid", "workspace")
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/" + strings.Repeat("a", 64), token: e.full, body: `{}`}), 400, "invalid", "workspace")
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/gamma", token: e.full,
		body: fmt.Sprintf(`{"description":%q}`, strings.Repeat("d", workspace.MaxDescLength+1))}), 400, "invalid", "description")
}

func TestWorkspacePagination(t *testing.T) {
	t.Parallel()
	e := setup(t) // acme, other
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("ws-%d", i)
		wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/" + name, token: e.full}), 201)
		want = append([]string{name}, want...)
	}
	want = append(want, "other", "acme") // newest first

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		l := decode[list[wsItem]](t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces?limit=2&cursor=" + cursor, token: e.full}), 200))
		if len(l.Items) > 2 {
			t.Fatalf("page of %d items, limit 2", len(l.Items))
		}
		for _, w := range l.Items {
			got = append(got, w.Name)
		}
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("pages = %v, want %v", got, want)
	}
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces?limit=abc", token: e.full}), 400, "invalid", "limit")
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces?limit=100000", token: e.full}), 400, "invalid", "limit")
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces?cursor=!!!", token: e.full}), 400, "invalid", "cursor")
	l := decode[list[wsItem]](t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces", token: e.full}), 200))
	if len(l.Items) != 7 || l.NextCursor != "" {
		t.Errorf("default page: %d items, next %q", len(l.Items), l.NextCursor)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestFiles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	put := func(ws, p, content string, want int) fileItem {
		t.Helper()
		resp := e.do(req{method: "PUT", path: "/api/workspaces/" + ws + "/files/" + p, token: e.full, body: content,
			header: map[string]string{"Content-Type": "application/octet-stream"}})
		f := decode[fileItem](t, wantStatus(t, resp, want))
		if f.Path != p || f.SHA256 != sha(content) || f.Size != len(content) {
			t.Errorf("PUT %s/%s = %+v", ws, p, f)
		}
		if got := resp.Header.Get("ETag"); got != `"`+sha(content)+`"` {
			t.Errorf("PUT ETag %q", got)
		}
		return f
	}
	get := func(ws, p string) *http.Response {
		t.Helper()
		return e.do(req{method: "GET", path: "/api/workspaces/" + ws + "/files/" + p, token: e.full})
	}
	wantFile := func(ws, p, content, scope, ctype string) {
		t.Helper()
		resp := get(ws, p)
		if got := string(wantStatus(t, resp, 200)); got != content {
			t.Errorf("GET %s/%s = %q, want %q", ws, p, got, content)
		}
		if got := resp.Header.Get("X-Molt-Scope"); got != scope {
			t.Errorf("GET %s/%s scope %q, want %q", ws, p, got, scope)
		}
		if got := resp.Header.Get("ETag"); got != `"`+sha(content)+`"` {
			t.Errorf("GET %s/%s ETag %q", ws, p, got)
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, ctype) {
			t.Errorf("GET %s/%s Content-Type %q, want %s", ws, p, got, ctype)
		}
	}
	listScopes := func(ws string) map[string]string {
		t.Helper()
		l := decode[list[fileItem]](t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/" + ws + "/files", token: e.full}), 200))
		out := map[string]string{}
		for _, f := range l.Items {
			out[f.Path] = f.Scope
			if f.SHA256 == "" || f.UpdatedAt.IsZero() {
				t.Errorf("list item %+v lacks sha256 or updated_at", f)
			}
		}
		return out
	}

	if got := listScopes("acme"); len(got) != 0 {
		t.Errorf("empty surface lists %v", got)
	}
	put("global", "INSTRUCTIONS.md", "global instructions", 201)
	put("global", "agents/main/AGENT.md", "global agent", 201)
	put("global", "agents/main/agent.yaml", "name: main\n", 201)
	put("global", "skills/s/SKILL.md", "global skill", 201)
	put("global", "prompts/all/x.md", "x", 201)
	put("global", "agents/main/notes.txt", "plain", 201)
	put("global", "INSTRUCTIONS.md", "global instructions v2", 200)

	scopes := listScopes("acme")
	for _, p := range []string{"INSTRUCTIONS.md", "agents/main/AGENT.md", "agents/main/agent.yaml", "agents/main/notes.txt", "skills/s/SKILL.md", "prompts/all/x.md"} {
		if scopes[p] != "global" {
			t.Errorf("acme list: %s scope %q, want global (all %v)", p, scopes[p], scopes)
		}
	}
	wantFile("acme", "INSTRUCTIONS.md", "global instructions v2", "global", "text/markdown")
	wantFile("acme", "agents/main/agent.yaml", "name: main\n", "global", "application/yaml")
	wantFile("acme", "agents/main/notes.txt", "plain", "global", "text/plain")
	wantFile("global", "skills/s/SKILL.md", "global skill", "global", "text/markdown")

	t.Run("file override", func(t *testing.T) {
		put("acme", "INSTRUCTIONS.md", "acme instructions", 201)
		put("acme", "INSTRUCTIONS.md", "acme instructions v2", 200)
		wantFile("acme", "INSTRUCTIONS.md", "acme instructions v2", "workspace", "text/markdown")
		wantFile("other", "INSTRUCTIONS.md", "global instructions v2", "global", "text/markdown")
		wantFile("global", "INSTRUCTIONS.md", "global instructions v2", "global", "text/markdown")
		if got := listScopes("acme")["INSTRUCTIONS.md"]; got != "workspace" {
			t.Errorf("acme INSTRUCTIONS.md scope %q, want workspace", got)
		}
		wantStatus(t, e.do(req{method: "DELETE", path: "/api/workspaces/acme/files/INSTRUCTIONS.md", token: e.full}), 204)
		wantFile("acme", "INSTRUCTIONS.md", "global instructions v2", "global", "text/markdown")
		wantProblem(t, e.do(req{method: "DELETE", path: "/api/workspaces/acme/files/INSTRUCTIONS.md", token: e.full}), 404, "not_found", "")
	})
	t.Run("folder override", func(t *testing.T) {
		put("acme", "agents/main/AGENT.md", "acme agent", 201)
		scopes := listScopes("acme")
		if scopes["agents/main/AGENT.md"] != "workspace" {
			t.Errorf("acme agents/main/AGENT.md scope %q, want workspace", scopes["agents/main/AGENT.md"])
		}
		for _, p := range []string{"agents/main/agent.yaml", "agents/main/notes.txt"} {
			if s, ok := scopes[p]; ok {
				t.Errorf("%s listed (scope %s) although acme overrides agents/main/", p, s)
			}
			wantProblem(t, get("acme", p), 404, "not_found", "")
		}
		wantFile("acme", "agents/main/AGENT.md", "acme agent", "workspace", "text/markdown")
		wantFile("acme", "skills/s/SKILL.md", "global skill", "global", "text/markdown")
		wantFile("other", "agents/main/agent.yaml", "name: main\n", "global", "application/yaml")

		put("acme", "prompts/all/y.md", "acme y", 201)
		wantProblem(t, get("acme", "prompts/all/x.md"), 404, "not_found", "")
		if _, ok := listScopes("acme")["prompts/all/x.md"]; ok {
			t.Errorf("prompts/all/x.md listed although acme overrides prompts/all/")
		}
		wantStatus(t, e.do(req{method: "DELETE", path: "/api/workspaces/acme/files/agents/main/AGENT.md", token: e.full}), 204)
		wantFile("acme", "agents/main/agent.yaml", "name: main\n", "global", "application/yaml")
	})
	t.Run("global listing", func(t *testing.T) {
		for p, s := range listScopes("global") {
			if s != "global" {
				t.Errorf("global list: %s scope %q", p, s)
			}
		}
	})
	t.Run("conditional GET", func(t *testing.T) {
		resp := e.do(req{method: "GET", path: "/api/workspaces/acme/files/skills/s/SKILL.md", token: e.full,
			header: map[string]string{"If-None-Match": `"nope", "` + sha("global skill") + `"`}})
		wantStatus(t, resp, 304)
		resp = e.do(req{method: "GET", path: "/api/workspaces/acme/files/skills/s/SKILL.md", token: e.full,
			header: map[string]string{"If-None-Match": `"nope"`}})
		wantStatus(t, resp, 200)
	})
	t.Run("missing", func(t *testing.T) {
		wantProblem(t, get("acme", "USER.md"), 404, "not_found", "")
		wantProblem(t, get("nosuch", "INSTRUCTIONS.md"), 404, "not_found", "")
		wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces/nosuch/files", token: e.full}), 404, "not_found", "")
		wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/nosuch/files/USER.md", token: e.full, body: "x"}), 404, "not_found", "")
	})
}

// TestFileSizeLimit: a file of exactly workspace.MaxFileSize is stored, one byte
// more is 413 and writes nothing.
func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	big := strings.Repeat("a", workspace.MaxFileSize)
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/acme/files/USER.md", token: e.full, body: big}), 201)
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme/files/INDEX.md", token: e.full, body: big + "a"}), 413, "too_large", "")
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme/files/USER.md", token: e.full, body: big + "b"}), 413, "too_large", "")
	files := e.allFiles("acme")
	if len(files) != 1 || files[0].Path != "USER.md" || files[0].Size != workspace.MaxFileSize || files[0].Content[0] != 'a' {
		t.Errorf("after oversize PUTs: %d files", len(files))
	}
}

func TestJSONBodies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		name, body, field string
	}{
		{"malformed", `{"description":`, ""},
		{"unknown field", `{"descr":"x"}`, "descr"},
		{"wrong type", `{"description":5}`, "description"},
		{"trailing data", `{"description":"x"} {}`, "body"},
		{"not an object", `[1]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme", token: e.full, body: tc.body}), 400, "invalid", tc.field)
		})
	}
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme", token: e.full, body: `{}`,
		header: map[string]string{"Content-Type": "text/plain"}}), 415, "unsupported_media_type", "")
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/acme", token: e.full, body: `{}`,
		header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}), 200)
	// curl -d's default type; the body is still strict JSON.
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/acme", token: e.full, body: `{}`,
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}), 200)
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/acme", token: e.full, body: `description=x`,
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}), 400, "invalid", "")

	t.Run("oversize", func(t *testing.T) {
		small := httpapi.New(httpapi.Config{Store: e.store, MaxBody: 64, Logger: slog.New(slog.NewJSONHandler(e.logs, nil))})
		for _, path := range []string{"/api/workspaces/acme", "/api/settings"} {
			r := httptest.NewRequest("PUT", path, strings.NewReader(`{"description":"`+strings.Repeat("x", 100)+`"}`))
			r.Header.Set("Authorization", "Bearer "+e.full)
			w := httptest.NewRecorder()
			small.ServeHTTP(w, r)
			resp := w.Result()
			checkCommon(t, resp)
			wantProblem(t, resp, 413, "too_large", "")
		}
		// Without Content-Length the limit still holds.
		r := httptest.NewRequest("PUT", "/api/settings", strings.NewReader(`{"general":{"language":"`+strings.Repeat("x", 100)+`"}}`))
		r.ContentLength = -1
		r.Header.Set("Authorization", "Bearer "+e.full)
		w := httptest.NewRecorder()
		small.ServeHTTP(w, r)
		wantProblem(t, w.Result(), 413, "too_large", "")
	})
	got, err := e.store.GetWorkspace(context.Background(), "acme")
	if err != nil || got.Description != "" {
		t.Errorf("acme = %+v, %v; want no description written", got, err)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	got := decode[settings.Settings](t, wantStatus(t, e.do(req{method: "GET", path: "/api/settings", token: e.full}), 200))
	if got != settings.Default() {
		t.Errorf("settings = %+v, want defaults", got)
	}
	got = decode[settings.Settings](t, wantStatus(t, e.do(req{method: "PUT", path: "/api/settings", token: e.full,
		body: `{"evolution":{"level":"L2","max_attempts":5}}`}), 200))
	want := settings.Default()
	want.Evolution.Level, want.Evolution.MaxAttempts = "L2", 5
	if got != want {
		t.Errorf("after partial PUT: %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		body, field string
	}{
		{`{"evolution":{"max_attempts":0}}`, "evolution.max_attempts"},
		{`{"evolution":{"max_attempts":"3"}}`, "evolution.max_attempts"},
		{`{"evolution":{"auto_apply_threshold":101}}`, "evolution.auto_apply_threshold"},
		{`{"evolution":{"level":"L9"}}`, "evolution.level"},
		{`{"general":{"language":"not a tag"}}`, "general.language"},
		{`{"evolution":{"nope":1}}`, "nope"},
		{`{"evolution":`, ""},
		{``, "body"},
	} {
		wantProblem(t, e.do(req{method: "PUT", path: "/api/settings", token: e.full, body: tc.body}), 400, "invalid", tc.field)
	}
	got = decode[settings.Settings](t, wantStatus(t, e.do(req{method: "GET", path: "/api/settings", token: e.full}), 200))
	if got != want {
		t.Errorf("after refused PUTs: %+v, want %+v", got, want)
	}
}

// TestPathEscapes sends every escape attempt as raw bytes to a real server, so
// neither a client nor a router cleans the path on the way, and checks that each
// is refused and that nothing was written anywhere.
func TestPathEscapes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	for _, target := range []string{
		"/api/workspaces/acme/files/../x",
		"/api/workspaces/acme/files/../INSTRUCTIONS.md",
		"/api/workspaces/acme/files/%2e%2e/x",
		"/api/workspaces/acme/files/%2E%2E/INSTRUCTIONS.md",
		"/api/workspaces/acme/files/..%2fx",
		"/api/workspaces/acme/files/agents%2f..%2f..%2fx",
		"/api/workspaces/acme/files/a//b",
		"/api/workspaces/acme/files/agents//x/AGENT.md",
		"/api/workspaces/acme/files//abs",
		"/api/workspaces/acme/files/%2Fabs",
		"/api/workspaces/acme/files/%2Fetc/passwd",
		"/api/workspaces/acme/files/x/../../y",
		"/api/workspaces/acme/files/agents/x/../../../global/files/INSTRUCTIONS.md",
		"/api/workspaces/acme/files/./INSTRUCTIONS.md",
		"/api/workspaces/acme/files/agents/./x/AGENT.md",
		"/api/workspaces/acme/files/..%5cx",
		"/api/workspaces/acme/files/agents%5cx%5cAGENT.md",
		"/api/workspaces/acme/../global/files/INSTRUCTIONS.md",
		"/api/workspaces/acme/files/",
		"/api/workspaces/acme/files/secrets.txt",
		"/api/workspaces/acme/files/etc/passwd",
		"/api/workspaces/acme/files/agents",
		"/api/workspaces/acme/files/agents/x",
		"/api/workspaces/acme/files/prompts/other/x.md",
		"/api/workspaces/acme/files/prompts/all/x.txt",
		"/api/workspaces/acme/files/INSTRUCTIONS.md/x",
		"/api/workspaces/acme/files/.git/config",
		"/api/workspaces/acme/files/%00INSTRUCTIONS.md",
		"/api/workspaces/acme/files/agents/x/%0aAGENT.md",
		"/api/workspaces/..%2fglobal/files/INSTRUCTIONS.md",
		"/api/workspaces/%2e%2e/files/INSTRUCTIONS.md",
	} {
		for _, method := range []string{"PUT", "DELETE", "GET"} {
			status, ctype, body := rawRequest(t, srv, method, target, e.full, "pwned")
			if status != 400 && status != 404 {
				t.Errorf("%s %s: status %d, want 400 (or 404); body %s", method, target, status, body)
			}
			if ctype != "application/problem+json" {
				t.Errorf("%s %s: Content-Type %q", method, target, ctype)
			}
		}
	}
	if files := e.allFiles("acme", "other"); len(files) != 0 {
		for _, f := range files {
			t.Errorf("written: %s/%s", f.Workspace, f.Path)
		}
	}
	// And the surface is still writable the normal way.
	status, _, body := rawRequest(t, srv, "PUT", "/api/workspaces/acme/files/agents/x/AGENT.md", e.full, "ok")
	if status != 201 {
		t.Errorf("plain PUT: status %d, body %s", status, body)
	}
}

// rawRequest writes the request line byte for byte and returns status,
// Content-Type and body.
func rawRequest(t *testing.T, srv *httptest.Server, method, target, token, body string) (int, string, string) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: molt.test\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, token, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: read response: %v", method, target, err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = fmt.Fprint(&sb, readAll(resp))
	return resp.StatusCode, resp.Header.Get("Content-Type"), sb.String()
}

func readAll(resp *http.Response) string {
	b := make([]byte, 0, 512)
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			return string(b)
		}
	}
}

// TestInternalErrors: a store failure is a 500 with a generic message; the detail
// goes to the log only.
func TestInternalErrors(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	logs := &syncBuffer{}
	h := httpapi.New(httpapi.Config{Store: st, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	_ = st.Close() // every query now fails
	r := httptest.NewRequest("GET", "/api/workspaces", nil)
	r.Header.Set("Authorization", "Bearer molt_whatever")
	r.Header.Set("X-Request-Id", "req-500")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	resp := w.Result()
	checkCommon(t, resp)
	p := wantProblem(t, resp, 500, molt.EINTERNAL, "")
	if strings.Contains(strings.ToLower(p.Detail), "sql") || strings.Contains(p.Detail, "closed") {
		t.Errorf("detail leaks internals: %q", p.Detail)
	}
	if !strings.Contains(logs.String(), "closed") || !strings.Contains(logs.String(), `"request_id":"req-500"`) {
		t.Errorf("the cause is not logged with the request id:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "molt_whatever") {
		t.Errorf("the token reached the log")
	}
}
