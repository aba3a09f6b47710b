package httpapi_test

import (
	"net/http"
	"testing"
)

// TestFileConditions: GET's ETag is the file's hash; PUT and DELETE with
// If-Match write only over that version and If-None-Match: * only creates, else
// 412 precondition_failed with nothing changed.
func TestFileConditions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const path = "/api/workspaces/acme/files/INSTRUCTIONS.md"
	send := func(method, body string, h map[string]string) *http.Response {
		return e.do(req{method: method, path: path, token: e.full, body: body, header: h})
	}
	content := func() string {
		t.Helper()
		resp := e.do(req{method: "GET", path: path, token: e.full})
		if resp.StatusCode == http.StatusNotFound {
			return "<absent>"
		}
		return string(wantStatus(t, resp, 200))
	}
	etag := func() string {
		t.Helper()
		resp := e.do(req{method: "GET", path: path, token: e.full})
		wantStatus(t, resp, 200)
		return resp.Header.Get("ETag")
	}
	ifMatch := func(tag string) map[string]string { return map[string]string{"If-Match": tag} }
	create := map[string]string{"If-None-Match": "*"}

	// Absent: If-Match fails (DELETE too), If-None-Match: * creates once.
	wantProblem(t, send("PUT", "v1", ifMatch(`"`+sha("v0")+`"`)), 412, "precondition_failed", "")
	wantProblem(t, send("PUT", "v1", ifMatch("*")), 412, "precondition_failed", "")
	wantProblem(t, send("DELETE", "", ifMatch(`"`+sha("v0")+`"`)), 412, "precondition_failed", "")
	if got := content(); got != "<absent>" {
		t.Fatalf("a failed precondition wrote %q", got)
	}
	wantStatus(t, send("PUT", "v1", create), 201)
	wantProblem(t, send("PUT", "v1 again", create), 412, "precondition_failed", "")
	tag1 := etag()
	if tag1 != `"`+sha("v1")+`"` {
		t.Fatalf("ETag = %s, want the quoted sha256", tag1)
	}
	// The editor's version: applies; a stale one (or a weak tag): 412.
	resp := send("PUT", "v2", ifMatch(tag1))
	wantStatus(t, resp, 200)
	if got := resp.Header.Get("ETag"); got != `"`+sha("v2")+`"` {
		t.Errorf("PUT ETag = %s", got)
	}
	for _, stale := range []string{tag1, "W/" + etag(), "garbage"} {
		wantProblem(t, send("PUT", "v3", ifMatch(stale)), 412, "precondition_failed", "")
		wantProblem(t, send("DELETE", "", ifMatch(stale)), 412, "precondition_failed", "")
	}
	if got := content(); got != "v2" {
		t.Fatalf("content = %q after refused writes, want v2", got)
	}
	wantStatus(t, send("PUT", "v3", ifMatch(tag1+", "+etag())), 200)
	// Without conditions: unchanged behaviour.
	wantStatus(t, send("PUT", "v4", nil), 200)
	wantStatus(t, send("DELETE", "", ifMatch(etag())), 204)
	wantProblem(t, send("DELETE", "", nil), 404, "not_found", "")
	// Access and the workspace come first.
	wantProblem(t, e.do(req{method: "PUT", path: path, token: e.ro, body: "x", header: create}), 403, "forbidden", "")
	wantProblem(t, e.do(req{method: "PUT", path: "/api/workspaces/ghost/files/USER.md", token: e.full, body: "x", header: create}), 404, "not_found", "")
}
