package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/auth"
)

// TestTokensAPI: a full token creates a token (its secret shown once), lists
// tokens without secrets or hashes, with last use, and revokes one, which is
// refused from its next request on; a token for a workspace that does not
// exist is refused.
func TestTokensAPI(t *testing.T) {
	t.Parallel()
	e := setupApp(t)
	out := e.call(201, req{method: "POST", path: "/api/tokens", token: e.full, body: `{"level":"workspace","workspace":"acme","name":"ci"}`})
	secret, _ := out["secret"].(string)
	id, _ := out["id"].(string)
	if !strings.HasPrefix(secret, auth.Prefix) || id != auth.Hash(secret)[:12] || out["workspace"] != "acme" || out["level"] != "workspace" {
		t.Fatalf("created %v", out)
	}
	e.secrets = append(e.secrets, secret, auth.Hash(secret))
	e.call(200, req{method: "GET", path: "/api/workspaces/acme/files", token: secret})

	list := e.call(200, req{method: "GET", path: "/api/tokens", token: e.full})
	raw := mustJSON(t, list)
	for _, s := range e.secrets {
		if strings.Contains(raw, s) {
			t.Fatalf("the token list shows a secret or hash: %s", raw)
		}
	}
	var ci map[string]any
	for _, v := range list["tokens"].([]any) {
		if m := v.(map[string]any); m["id"] == id {
			ci = m
		}
	}
	if ci == nil || ci["name"] != "ci" || ci["last_used_at"] == nil || ci["created_at"] == nil || ci["revoked_at"] != nil {
		t.Fatalf("listed ci token = %v, want it used and not revoked (list %s)", ci, raw)
	}

	// Revoked: refused at once, and listed as revoked.
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/tokens/" + id, token: e.full}), 204)
	wantProblem(t, e.do(req{method: "GET", path: "/api/workspaces/acme/files", token: secret}), 401, "unauthorized", "")
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/tokens/" + id, token: e.full}), 204)
	for _, v := range e.call(200, req{method: "GET", path: "/api/tokens", token: e.full})["tokens"].([]any) {
		if m := v.(map[string]any); m["id"] == id && m["revoked_at"] == nil {
			t.Fatalf("revoked token listed as %v", m)
		}
	}
	wantProblem(t, e.do(req{method: "DELETE", path: "/api/tokens/000000000000", token: e.full}), 404, "not_found", "")
	wantProblem(t, e.do(req{method: "DELETE", path: "/api/tokens/nope", token: e.full}), 400, "invalid", "id")

	// No token for a workspace that does not exist.
	wantProblem(t, e.do(req{method: "POST", path: "/api/tokens", token: e.full, body: `{"level":"workspace","workspace":"nosuch"}`}),
		400, auth.ReasonNoWorkspace, "workspace")
	wantProblem(t, e.do(req{method: "POST", path: "/api/tokens", token: e.full, body: `{"level":"root"}`}), 400, "invalid", "level")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
