package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/changes"
	"github.com/molt-dev/molt/internal/console"
	"github.com/molt-dev/molt/internal/httpapi"
)

// consoleAsset returns the served (hashed) name of a console asset.
func consoleAsset(t *testing.T, name string) string {
	t.Helper()
	h, ok := console.Default().Hashed(name)
	if !ok {
		t.Fatalf("console has no asset %s", name)
	}
	return h
}

// TestConsoleServed: the page and its assets come from the API handler with the
// security headers, the index revalidated and the hashed assets immutable; an
// unknown asset is a 404 problem.
func TestConsoleServed(t *testing.T) {
	t.Parallel()
	e := setupApp(t)
	index := e.do(req{method: "GET", path: "/"})
	body := readAll(index)
	if index.StatusCode != 200 || !strings.HasPrefix(index.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", index.StatusCode, index.Header.Get("Content-Type"))
	}
	app := consoleAsset(t, "app.js")
	if !strings.Contains(body, `src="assets/`+app+`"`) || strings.Contains(body, `"assets/app.js"`) {
		t.Errorf("index does not reference the hashed module %s:\n%s", app, body)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, " style=") {
		t.Errorf("index has an inline script or style")
	}
	asset := e.do(req{method: "GET", path: "/assets/" + app})
	js := readAll(asset)
	for _, r := range []*http.Response{index, asset} {
		for k, want := range map[string]string{
			"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
			"X-Content-Type-Options":  "nosniff",
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("%s %s: %s = %q, want %q", r.Request.Method, r.Request.URL.Path, k, got, want)
			}
		}
	}
	if got := index.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("index Cache-Control = %q, want no-cache", got)
	}
	if got := asset.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
		t.Errorf("asset Cache-Control = %q", got)
	}
	if !strings.HasPrefix(asset.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("asset Content-Type = %q", asset.Header.Get("Content-Type"))
	}
	// Imports inside a module point at hashed names too.
	if !strings.Contains(js, `from "./`+consoleAsset(t, "api.js")+`"`) {
		t.Errorf("app.js does not import the hashed api.js")
	}
	if etag := asset.Header.Get("ETag"); etag == "" {
		t.Error("asset has no ETag")
	} else if r := e.do(req{method: "GET", path: "/assets/" + app, header: map[string]string{"If-None-Match": etag}}); r.StatusCode != 304 {
		t.Errorf("revalidation: %d, want 304", r.StatusCode)
	}
	wantProblem(t, e.do(req{method: "GET", path: "/assets/app.js"}), 404, "not_found", "")
}

// TestChangesFeed: a post shows up in the feed of a caller who may see it, and
// not in the feed of another workspace's token; once the lookback has passed, a
// poll with nothing new is empty.
func TestChangesFeed(t *testing.T) {
	t.Parallel()
	e := setupApp(t)
	type feed struct {
		Events []struct {
			Kind      string `json:"kind"`
			ID        string `json:"id"`
			Workspace string `json:"workspace"`
			SessionID string `json:"session_id"`
		} `json:"events"`
		Cursor string `json:"cursor"`
	}
	poll := func(tok, cursor string) feed {
		t.Helper()
		var f feed
		body := readAll(e.do(req{method: "GET", path: "/api/changes?after=" + cursor, token: tok}))
		if err := json.Unmarshal([]byte(body), &f); err != nil || f.Cursor == "" {
			t.Fatalf("feed: %v %s", err, body)
		}
		return f
	}
	full0, other0 := poll(e.full, ""), poll(e.otherTok, "")
	sid := e.session(e.wsTok)
	e.call(202, req{method: "POST", path: "/api/sessions/" + sid + "/messages", token: e.wsTok, body: `{"text":"hello"}`})
	f := poll(e.full, full0.Cursor)
	found := false
	for _, ev := range f.Events {
		found = found || (ev.Kind == "turn" && ev.SessionID == sid && ev.Workspace == "acme")
	}
	if !found {
		t.Fatalf("full feed after a post: %+v; want the turn of session %s", f.Events, sid)
	}
	if o := poll(e.otherTok, other0.Cursor); len(o.Events) != 0 {
		t.Errorf("other workspace's feed shows %+v", o.Events)
	}
	if w := poll(e.wsTok, full0.Cursor); len(w.Events) == 0 {
		t.Errorf("acme's own feed shows nothing after its post")
	}
	// Past the feed's lookback a poll may re-send the turn once; the poll after
	// it, with nothing new, returns nothing.
	time.Sleep(changes.Lookback + 100*time.Millisecond)
	g := poll(e.full, f.Cursor)
	if h := poll(e.full, g.Cursor); len(h.Events) != 0 {
		t.Errorf("feed with nothing new: %+v", h.Events)
	}
	wantProblem(t, e.do(req{method: "GET", path: "/api/changes?after=nonsense!", token: e.full}), 400, "invalid", "after")
}

// TestConsoleThroughLambda: the api function serves the same page and assets,
// under a named stage too, with the console's headers; the body of an asset is
// the embedded module, byte for byte.
func TestConsoleThroughLambda(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fn := httpapi.Lambda(e.h)
	base := sampleV2(t, "apigw-v2-request-no-authorizer.json")
	app := consoleAsset(t, "app.js")
	for _, tc := range []struct{ stage, path, ctype, cache string }{
		{"$default", "/", "text/html; charset=utf-8", "no-cache"},
		{"prod", "/prod/", "text/html; charset=utf-8", "no-cache"},
		{"prod", "/prod/assets/" + app, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
	} {
		ev := base
		ev.RawPath, ev.RawQueryString = tc.path, ""
		ev.RequestContext.Stage = tc.stage
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = "GET", tc.path
		ev.Headers = map[string]string{}
		ev.Body = ""
		resp, err := fn(context.Background(), ev)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %d %s", tc.path, err, resp.StatusCode, resp.Body)
		}
		body := resp.Body
		if resp.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				t.Fatal(err)
			}
			body = string(b)
		}
		if resp.Headers["Content-Type"] != tc.ctype || resp.Headers["Cache-Control"] != tc.cache ||
			!strings.HasPrefix(resp.Headers["Content-Security-Policy"], "default-src 'self'") || resp.Headers["X-Frame-Options"] != "DENY" {
			t.Errorf("GET %s: headers %v", tc.path, resp.Headers)
		}
		if strings.HasSuffix(tc.path, ".js") && !strings.Contains(body, "export") && !strings.Contains(body, "import") {
			t.Errorf("GET %s: body is not the module: %.200s", tc.path, body)
		}
		if strings.HasSuffix(tc.path, "/") && !strings.Contains(body, `src="assets/`+app+`"`) {
			t.Errorf("GET %s: index does not reference %s (relative, so a stage prefix works)", tc.path, app)
		}
	}
}
