package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestBodyText: invalid UTF-8 and NUL in any JSON string, at any depth, are 400
// naming the field; so is a body that is not an object (null read as {}).
func TestBodyText(t *testing.T) {
	t.Parallel()
	e := setupApp(t)
	sid := e.session(e.full)
	msgs := "/api/sessions/" + sid + "/messages"
	cases := []struct {
		name, method, path, body, field string
	}{
		{"invalid utf-8", "POST", msgs, "{\"text\":\"caf\xe9\"}", "text"},
		{"nul", "POST", msgs, `{"text":"a\u0000b"}`, "text"},
		{"nested nul", "PUT", "/api/settings", `{"general":{"language":"en\u0000"}}`, "general.language"},
		{"invalid utf-8 title", "PATCH", "/api/sessions/" + sid, "{\"title\":\"\xff\xfe\"}", "title"},
		{"invalid utf-8 key", "POST", msgs, "{\"te\xffxt\":\"hi\"}", "body"},
		{"null message", "POST", msgs, `null`, "body"},
		{"null settings", "PUT", "/api/settings", ` null `, "body"},
		{"null title", "PATCH", "/api/sessions/" + sid, `null`, "body"},
		{"null optional body", "POST", "/api/workspaces/acme/sessions", `null`, "body"},
		{"array", "POST", msgs, `["hi"]`, "body"},
	}
	for _, c := range cases {
		resp := e.do(req{method: c.method, path: c.path, token: e.full, body: c.body,
			header: map[string]string{"Content-Type": "application/json"}})
		p := wantProblem(t, resp, http.StatusBadRequest, "invalid", c.field)
		if c.field != "body" && !strings.Contains(p.Detail, c.field) {
			t.Errorf("%s: detail %q does not name %s", c.name, p.Detail, c.field)
		}
	}
	// What is valid still is.
	e.call(202, req{method: "POST", path: msgs, token: e.full, body: `{"text":"café \ufffd ok"}`})
}

// TestRepeatedQuery: a query parameter given twice is 400 naming it.
func TestRepeatedQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces?limit=1&limit=2", token: e.full}), 400, "invalid", "limit")
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces?limit=1&lim%69t=2", token: e.full}), 400, "invalid", "limit")
	wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces?limit=1", token: e.full}), 200)
}

// TestClientRequestID: a client id of the safe shape is adopted; any other is
// replaced by molt's own; either way the client's is logged as its own
// attribute, apart from request_id.
func TestClientRequestID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	safe := regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	for _, bad := range []string{"../../etc/passwd", "a b", "x=y", "a/b", strings.Repeat("a", 129), "é"} {
		resp := e.do(req{method: "GET", path: "/health", header: map[string]string{"X-Request-Id": bad}})
		got := resp.Header.Get("X-Request-Id")
		if got == bad || !safe.MatchString(got) {
			t.Errorf("X-Request-Id %q answered as %q, want molt's own id", bad, got)
		}
		if !strings.Contains(e.logs.String(), `"request_id":"`+got+`"`) {
			t.Errorf("molt's id %s is not logged", got)
		}
	}
	if !strings.Contains(e.logs.String(), `"client_request_id":"../../etc/passwd"`) {
		t.Errorf("the refused client id is not logged as client_request_id:\n%s", e.logs.String())
	}
	resp := e.do(req{method: "GET", path: "/health", header: map[string]string{"X-Request-Id": "Ab-1.2_3"}})
	if got := resp.Header.Get("X-Request-Id"); got != "Ab-1.2_3" {
		t.Errorf("safe X-Request-Id answered as %q", got)
	}
	if !strings.Contains(e.logs.String(), `"client_request_id":"Ab-1.2_3"`) {
		t.Errorf("the client id is not logged as client_request_id")
	}
}

// TestConcurrentPosters: 16 posters to one session at once all get 202, and
// the contention is logged at WARN at most.
func TestConcurrentPosters(t *testing.T) {
	t.Parallel()
	e := setupApp(t)
	const n, rounds = 16, 4
	for range rounds {
		sid := e.session(e.full)
		var wg sync.WaitGroup
		codes := make([]int, n)
		bodies := make([]string, n)
		for i := range n {
			wg.Go(func() {
				resp := e.do(req{method: "POST", path: "/api/sessions/" + sid + "/messages", token: e.full,
					body: `{"text":"hello"}`})
				codes[i] = resp.StatusCode
				bodies[i] = readAll(resp)
			})
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusAccepted {
				t.Errorf("session %s poster %d: %d %s, want 202", sid, i, c, bodies[i])
			}
		}
	}
	if strings.Contains(e.logs.String(), `"level":"ERROR"`) {
		t.Errorf("contention logged at ERROR:\n%s", e.logs.String())
	}
}
