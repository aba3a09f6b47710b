package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// api calls an HTTP handler (in process) or a served address.
type api struct {
	t    testing.TB
	h    http.Handler // in process when set
	base string       // else http://addr
}

// call sends a JSON request and decodes the JSON answer into a map.
func (a api) call(method, path, token, body string) (int, map[string]any, http.Header) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var resp *http.Response
	if a.h != nil {
		req := httptest.NewRequest(method, path, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		a.h.ServeHTTP(rec, req)
		resp = rec.Result()
	} else {
		req, err := http.NewRequest(method, a.base+path, rd)
		if err != nil {
			a.t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if resp, err = http.DefaultClient.Do(req); err != nil {
			a.t.Fatal(err)
		}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			a.t.Fatalf("%s %s: answer is not JSON: %s", method, path, b)
		}
	}
	return resp.StatusCode, out, resp.Header
}

// want sends a request and fails unless the status is want.
func (a api) want(status int, method, path, token, body string) map[string]any {
	a.t.Helper()
	got, out, h := a.call(method, path, token, body)
	if got != status {
		a.t.Fatalf("%s %s: %d %v, want %d", method, path, got, out, status)
	}
	if status >= 400 && h.Get("Content-Type") != "application/problem+json" {
		a.t.Fatalf("%s %s: content type %q, want problem+json", method, path, h.Get("Content-Type"))
	}
	return out
}

// refused sends a request and fails unless it is a 409 with code.
func (a api) refused(code, method, path, token, body string) {
	a.t.Helper()
	out := a.want(http.StatusConflict, method, path, token, body)
	if out["code"] != code {
		a.t.Fatalf("%s %s: code %v, want %s", method, path, out["code"], code)
	}
}

// tokens creates a token of each level (workspace and readonly on acme).
func (e *env) tokens() (full, ws, ro string) {
	e.t.Helper()
	for _, l := range []auth.Level{auth.Full, auth.Workspace, auth.Readonly} {
		w := e.ws
		if l == auth.Full {
			w = ""
		}
		secret, _, err := e.app.CreateToken(e.ctx, l, w, "test")
		if err != nil {
			e.t.Fatal(err)
		}
		switch l {
		case auth.Full:
			full = secret
		case auth.Workspace:
			ws = secret
		default:
			ro = secret
		}
	}
	return full, ws, ro
}

// TestAPI: every run route needs a full token (workspace and readonly get
// 403, none 401); /evo over the messages route answers 202 with the run; every
// refusal of the run table is a 409 problem with its stable code.
func TestAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	full, wsTok, ro := e.tokens()
	a := api{t: t, h: e.app.HTTPHandler()}
	sess := a.want(http.StatusCreated, "POST", "/api/workspaces/acme/sessions", full, `{}`)
	sid := sess["id"].(string)
	out := a.want(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", full, `{"text":"/evo always answer in French"}`)
	run, _ := out["run"].(map[string]any)
	if run == nil || run["status"] != "pending" {
		t.Fatalf("/evo answered %v; want a pending run", out)
	}
	id := run["id"].(string)
	e.drain()

	routes := []struct{ method, path, body string }{
		{"GET", "/api/evolution/runs", ""},
		{"GET", "/api/evolution/runs/" + id, ""},
		{"POST", "/api/evolution/runs/" + id + "/approve", `{}`},
		{"POST", "/api/evolution/runs/" + id + "/reject", ""},
		{"POST", "/api/evolution/runs/" + id + "/retry", `{"hint":"x"}`},
		{"DELETE", "/api/evolution/runs/" + id, ""},
	}
	for _, r := range routes {
		a.want(http.StatusForbidden, r.method, r.path, wsTok, r.body)
		a.want(http.StatusForbidden, r.method, r.path, ro, r.body)
		a.want(http.StatusUnauthorized, r.method, r.path, "", r.body)
	}
	// /evo from a workspace token is 403 too.
	wsSess := a.want(http.StatusCreated, "POST", "/api/workspaces/acme/sessions", wsTok, `{}`)
	a.want(http.StatusForbidden, "POST", "/api/sessions/"+wsSess["id"].(string)+"/messages", wsTok, `{"text":"/evo be brief"}`)

	list := a.want(http.StatusOK, "GET", "/api/evolution/runs?status=awaiting_review", full, "")
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("list %v", list)
	}
	a.want(http.StatusBadRequest, "GET", "/api/evolution/runs?view=bogus", full, "")
	a.want(http.StatusBadRequest, "GET", "/api/evolution/runs?filter=bogus", full, "")
	a.want(http.StatusNotFound, "GET", "/api/evolution/runs/nope", full, "")
	det := a.want(http.StatusOK, "GET", "/api/evolution/runs/"+id, full, "")
	if det["status"] != "awaiting_review" || det["patch_md"] == "" || det["score"] == nil || det["verdict"] == nil ||
		det["attempts"] != float64(1) || det["snapshot"] == nil {
		t.Fatalf("detail %v", det)
	}

	base := "/api/evolution/runs/" + id
	a.refused(runs.CodeHintRequired, "POST", base+"/retry", full, `{}`)
	a.refused(runs.CodeHintRequired, "POST", base+"/retry", full, `{"hint":"  "}`)
	a.want(http.StatusOK, "POST", base+"/approve", full, `{"reviewer_hint":"fine"}`)
	a.refused(runs.CodeNotReviewable, "POST", base+"/approve", full, "")
	a.refused(runs.CodeNotReviewable, "POST", base+"/reject", full, "")
	a.refused(runs.CodeNotRetryable, "POST", base+"/retry", full, `{"hint":"again"}`)
	a.refused(runs.CodeActive, "DELETE", base, full, "")
	a.want(http.StatusBadRequest, "POST", base+"/approve", full, `{"bogus":1}`)

	// A second run: pending and running refuse retry and delete.
	out = a.want(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", full, `{"text":"/evo be brief"}`)
	id2 := out["run"].(map[string]any)["id"].(string)
	a.refused(runs.CodeActive, "POST", "/api/evolution/runs/"+id2+"/retry", full, `{"hint":"x"}`)
	a.refused(runs.CodeActive, "DELETE", "/api/evolution/runs/"+id2, full, "")
	a.refused(runs.CodeNotReviewable, "POST", "/api/evolution/runs/"+id2+"/reject", full, "")
	e.drain()
	a.want(http.StatusOK, "POST", "/api/evolution/runs/"+id2+"/reject", full, "")
	a.want(http.StatusNoContent, "DELETE", "/api/evolution/runs/"+id2, full, "")
	a.want(http.StatusNotFound, "GET", "/api/evolution/runs/"+id2, full, "")
}

// TestServeEndToEnd is the check on the local wiring (molt serve: the
// API, the tick and the workers in one process, in-process queues), over HTTP:
// at L0 /evo always answer in French reaches awaiting_review with a patch to
// INSTRUCTIONS.md, a score and a verdict, and approve creates a pending apply;
// at L2 the same request is approved automatically (approved_by auto); with the
// threshold at 100 it stops at review with below_threshold.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	full, wsTok, ro := e.tokens()
	a, stop := serve(t, e)
	defer stop()

	// Each level gets its own workspace: an apply worker in the same process
	// may publish an approved rule, after which the same hint is no change.
	sid := ""
	evo := func() string {
		t.Helper()
		out := a.want(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", full, `{"text":"/evo always answer in French"}`)
		return out["run"].(map[string]any)["id"].(string)
	}
	newSession := func(ws string) string {
		t.Helper()
		if ws != "acme" {
			a.want(http.StatusCreated, "PUT", "/api/workspaces/"+ws, full, `{}`)
		}
		return a.want(http.StatusCreated, "POST", "/api/workspaces/"+ws+"/sessions", full, `{}`)["id"].(string)
	}
	sid = newSession("acme")
	settle := func(id string) map[string]any {
		t.Helper()
		return waitFor(t, e, func() (map[string]any, bool) {
			d := a.want(http.StatusOK, "GET", "/api/evolution/runs/"+id, full, "")
			st := d["status"].(string)
			return d, st != "pending" && st != "running"
		})
	}

	id := evo()
	d := settle(id)
	patch, _ := d["patch"].(map[string]any)
	if d["status"] != "awaiting_review" || patch == nil || fmt.Sprint(patch["files"]) != "[INSTRUCTIONS.md]" ||
		d["score"] == nil || d["verdict"] == nil || d["reason"] != "level" {
		t.Fatalf("at L0: %v", d)
	}
	msgs := a.want(http.StatusOK, "GET", "/api/sessions/"+sid+"/messages", full, "")["items"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "system" {
		t.Fatalf("session messages %v; want the one queued notice", msgs)
	}
	a.want(http.StatusForbidden, "POST", "/api/evolution/runs/"+id+"/approve", wsTok, "")
	a.want(http.StatusForbidden, "POST", "/api/evolution/runs/"+id+"/approve", ro, "")
	a.want(http.StatusOK, "POST", "/api/evolution/runs/"+id+"/approve", full, "")
	d = a.want(http.StatusOK, "GET", "/api/evolution/runs/"+id, full, "")
	aps, _ := d["applies"].([]any)
	if len(aps) != 1 || aps[0].(map[string]any)["approved_by"] != runs.ApprovedByReviewer || d["approved_by"] != runs.ApprovedByReviewer {
		t.Fatalf("after approve: %v", d)
	}

	a.want(http.StatusOK, "PUT", "/api/settings", full, `{"evolution":{"level":"L2"}}`)
	sid = newSession("acme-l2")
	id = evo()
	d = settle(id)
	if !slices.Contains([]any{"approved", "applied"}, d["status"]) || d["approved_by"] != runs.ApprovedByAuto {
		t.Fatalf("at L2: %v", d)
	}

	a.want(http.StatusOK, "PUT", "/api/settings", full, `{"evolution":{"auto_apply_threshold":100}}`)
	sid = newSession("acme-t100")
	id = evo()
	d = settle(id)
	if d["status"] != "awaiting_review" || d["reason"] != "below_threshold" {
		t.Fatalf("at L2 with threshold 100: %v", d)
	}
}

// serve runs the App as `molt serve` does (tick every hour: pickup must not
// need it) and returns a client of it.
func serve(t testing.TB, e *env) (api, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- e.app.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", Tick: time.Hour,
			AdminToken: "admin-token-for-the-end-to-end-test", Ready: func(addr string) { ready <- addr }})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("serve: %v", err)
	}
	return api{t: t, base: "http://" + addr}, func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// waitFor re-checks cond at every store commit until it holds (30 s at most).
func waitFor[T any](t testing.TB, e *env, cond func() (T, bool)) T {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		changed := e.store.changes()
		if v, ok := cond(); ok {
			return v
		}
		select {
		case <-changed:
		case <-deadline:
			v, _ := cond()
			t.Fatalf("condition not met after 30 s: %v", v)
			return v
		}
	}
}

// runStatus reads a run's status.
func (e *env) runStatus(id string) work.Status {
	it, err := e.store.GetItem(e.ctx, work.KindRun, id)
	if err != nil {
		return ""
	}
	return it.Status
}
