package applies_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/work"
)

// api is a client of a served App.
type api struct {
	t    testing.TB
	base string
}

func (a api) call(method, path, token, body string) (int, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &out) != nil {
		a.t.Fatalf("%s %s: answer is not JSON: %s", method, path, b)
	}
	return resp.StatusCode, out
}

func (a api) want(status int, method, path, token, body string) map[string]any {
	a.t.Helper()
	got, out := a.call(method, path, token, body)
	if got != status {
		a.t.Fatalf("%s %s: %d %v, want %d", method, path, got, out, status)
	}
	return out
}

const adminToken = "admin-token-for-the-applies-end-to-end-test"

// serve runs the App as `molt serve` does (API, workers, a tick every hour so
// nothing depends on it; the test ticks by hand) and returns a client.
func serve(t testing.TB, e *env) (api, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- e.app.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", Tick: time.Hour, AdminToken: adminToken,
			Ready: func(addr string) { ready <- addr }})
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

// TestServeEndToEnd is the check on the local wiring (`molt serve`: API,
// workers and in-process queues in one process), over HTTP: a run from "/evo
// always answer in French", approved, is applied and INSTRUCTIONS.md holds the
// rule; rollback restores the exact previous bytes; a file edited after a new
// apply makes its rollback 409 conflict naming it, and force succeeds with the
// edit kept in rollback-pre/; at L2 the run applies itself and its session
// gets exactly one notice, however many ticks run.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	a, stop := serve(t, e)
	defer stop()
	full := adminToken
	wsTok, _, err := e.app.CreateToken(e.ctx, auth.Workspace, "acme", "acme")
	if err != nil {
		t.Fatal(err)
	}
	before := "# Instructions\n\nBe helpful.\n"
	a.want(http.StatusCreated, "PUT", "/api/workspaces/acme/files/INSTRUCTIONS.md", full, before)
	sid := a.want(http.StatusCreated, "POST", "/api/workspaces/acme/sessions", full, `{}`)["id"].(string)

	evo := func(hint string) string {
		t.Helper()
		out := a.want(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", full, `{"text":"/evo `+hint+`"}`)
		return out["run"].(map[string]any)["id"].(string)
	}
	run := func(id string, done func(map[string]any) bool) map[string]any {
		t.Helper()
		return waitFor(t, e, func() (map[string]any, bool) {
			d := a.want(http.StatusOK, "GET", "/api/evolution/runs/"+id, full, "")
			return d, done(d)
		})
	}
	status := func(s ...string) func(map[string]any) bool {
		return func(d map[string]any) bool {
			for _, x := range s {
				if d["status"] == x {
					return true
				}
			}
			return false
		}
	}
	applyOf := func(runID string) string {
		t.Helper()
		d := run(runID, func(d map[string]any) bool { return len(d["applies"].([]any)) > 0 })
		return d["applies"].([]any)[0].(map[string]any)["id"].(string)
	}
	applied := func(id string) map[string]any {
		t.Helper()
		return waitFor(t, e, func() (map[string]any, bool) {
			v := a.want(http.StatusOK, "GET", "/api/evolution/applies/"+id, full, "")
			return v, v["status"] == "applied" || v["status"] == "failed"
		})
	}

	// Review, approve, applied: the rule is live.
	r1 := evo("always answer in French")
	run(r1, status("awaiting_review"))
	a.want(http.StatusOK, "POST", "/api/evolution/runs/"+r1+"/approve", full, "")
	ap1 := applyOf(r1)
	v := applied(ap1)
	if v["status"] != "applied" || v["approved_by"] != "reviewer" || !sameList(v["published"], "INSTRUCTIONS.md") {
		t.Fatalf("apply view %v", v)
	}
	if m, _ := v["manifest"].(map[string]any); m == nil || m["readable"] != true || m["overwrites"] != float64(1) {
		t.Fatalf("manifest summary %v", v["manifest"])
	}
	ins := e.files("acme")["INSTRUCTIONS.md"]
	if !strings.Contains(ins, "- always answer in French") || !strings.HasPrefix(ins, "# Instructions") {
		t.Fatalf("INSTRUCTIONS.md after the apply:\n%s", ins)
	}
	if d := run(r1, status("applied")); d["status"] != "applied" {
		t.Fatalf("run %v", d)
	}
	// Full tokens only; unknown applies are 404; the body is strict.
	a.want(http.StatusForbidden, "GET", "/api/evolution/applies/"+ap1, wsTok, "")
	a.want(http.StatusForbidden, "POST", "/api/evolution/applies/"+ap1+"/rollback", wsTok, "")
	a.want(http.StatusNotFound, "GET", "/api/evolution/applies/nope", full, "")
	a.want(http.StatusBadRequest, "POST", "/api/evolution/applies/"+ap1+"/rollback", full, `{"forced":true}`)

	// Rollback restores the exact previous bytes.
	out := a.want(http.StatusOK, "POST", "/api/evolution/applies/"+ap1+"/rollback", full, "")
	if out["ok"] != true || !sameList(out["restored"], "INSTRUCTIONS.md") || !sameList(out["removed"]) ||
		!sameList(out["removedDirs"]) || !sameList(out["keptDirs"]) || len(out) != 5 {
		t.Fatalf("rollback answer %v", out)
	}
	if got := e.files("acme")["INSTRUCTIONS.md"]; got != before {
		t.Fatalf("INSTRUCTIONS.md after rollback = %q, want %q", got, before)
	}
	if p := a.want(http.StatusConflict, "POST", "/api/evolution/applies/"+ap1+"/rollback", full, ""); p["code"] != "not_applied" {
		t.Fatalf("second rollback %v", p)
	}
	run(r1, status("rolled_back"))

	// A new apply, then an edit: conflict naming the file; force keeps the edit
	// in rollback-pre/.
	r2 := evo("keep answers short")
	run(r2, status("awaiting_review"))
	a.want(http.StatusOK, "POST", "/api/evolution/runs/"+r2+"/approve", full, "")
	ap2 := applyOf(r2)
	applied(ap2)
	edit := e.files("acme")["INSTRUCTIONS.md"] + "\nMy own line.\n"
	a.want(http.StatusOK, "PUT", "/api/workspaces/acme/files/INSTRUCTIONS.md", full, edit)
	p := a.want(http.StatusConflict, "POST", "/api/evolution/applies/"+ap2+"/rollback", full, `{}`)
	cs, _ := p["details"].(map[string]any)["conflicts"].([]any)
	if p["code"] != "conflict" || len(cs) != 1 || cs[0].(map[string]any)["rel"] != "INSTRUCTIONS.md" ||
		cs[0].(map[string]any)["reason"] != "modified" {
		t.Fatalf("conflict %v", p)
	}
	if got := e.files("acme")["INSTRUCTIONS.md"]; got != edit {
		t.Fatal("a refused rollback changed the file")
	}
	a.want(http.StatusOK, "POST", "/api/evolution/applies/"+ap2+"/rollback", full, `{"force":true}`)
	if got := e.files("acme")["INSTRUCTIONS.md"]; got != before {
		t.Fatalf("INSTRUCTIONS.md after the forced rollback = %q", got)
	}
	if b, ok := e.blob("applies/" + ap2 + "/rollback-pre/INSTRUCTIONS.md"); !ok || string(b) != edit {
		t.Fatalf("rollback-pre holds %q", b)
	}

	// L2: the run applies itself; one notice, with two ticks at once and more.
	a.want(http.StatusOK, "PUT", "/api/settings", full, `{"evolution":{"level":"L2"}}`)
	r3 := evo("always answer in French")
	run(r3, status("applied"))
	ap3 := applyOf(r3)
	if v := applied(ap3); v["approved_by"] != "auto" {
		t.Fatalf("L2 apply %v", v)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := e.app.Tick(e.ctx, e.app.Maintainer()); err != nil {
				t.Errorf("tick: %v", err)
			}
		})
	}
	wg.Wait()
	e.tick()
	notices := 0
	for _, m := range e.messages(sid) {
		if m.Role == "system" && strings.HasPrefix(m.Text, "Evolution applied automatically") {
			notices++
			if !strings.Contains(m.Text, "INSTRUCTIONS.md") || !strings.Contains(m.Text, ap3) {
				t.Fatalf("notice %q", m.Text)
			}
		}
	}
	if notices != 1 {
		t.Fatalf("%d notices, want 1", notices)
	}
	if v := a.want(http.StatusOK, "GET", "/api/evolution/applies/"+ap3, full, ""); v["notified_at"] == nil {
		t.Fatalf("notified_at missing: %v", v)
	}
	// At L2 the run's detail carries the auto-apply banner: applied, with the
	// files and score; a run that was not applied automatically, its reason.
	d := a.want(http.StatusOK, "GET", "/api/evolution/runs/"+r3, full, "")
	b, _ := d["auto_apply"].(map[string]any)
	if b == nil || b["applied"] != true || b["level"] != "L2" || !sameList(b["files"], "INSTRUCTIONS.md") || b["score"] == nil ||
		b["apply"] != ap3 {
		t.Fatalf("banner of an auto-applied run: %v", d["auto_apply"])
	}
	if aps := d["applies"].([]any); !sameList(aps[0].(map[string]any)["published"], "INSTRUCTIONS.md") {
		t.Fatalf("run's applies %v", aps)
	}
	d = a.want(http.StatusOK, "GET", "/api/evolution/runs/"+r1, full, "")
	if b, _ := d["auto_apply"].(map[string]any); b == nil || b["applied"] != false || b["reason"] != "level" {
		t.Fatalf("banner of a reviewed run: %v", d["auto_apply"])
	}
	if it := e.item(work.KindApply, ap1); it.Status != "rolled_back" {
		t.Fatalf("first apply %s", it.Status)
	}
}

// sameList reports whether v (a JSON array) holds exactly want.
func sameList(v any, want ...string) bool {
	xs, ok := v.([]any)
	if !ok || len(xs) != len(want) {
		return false
	}
	for i, x := range xs {
		if x != want[i] {
			return false
		}
	}
	return true
}
