package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/molt-dev/molt/internal/settings"
)

// wsSettingsDoc is GET/PUT /api/workspaces/{ws}/settings's answer.
type wsSettingsDoc struct {
	Naming struct {
		Mode           *string `json:"mode"`
		TimeoutSeconds *int    `json:"timeout_seconds"`
		Model          *string `json:"model"`
	} `json:"naming"`
	Effective struct {
		Naming struct {
			Mode           string `json:"mode"`
			TimeoutSeconds int    `json:"timeout_seconds"`
			Model          string `json:"model"`
		} `json:"naming"`
	} `json:"effective"`
}

func decodeWSSettings(t *testing.T, body []byte) wsSettingsDoc {
	t.Helper()
	var d wsSettingsDoc
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return d
}

// TestWorkspaceSettings: a workspace overrides the naming keys, validated like
// the global ones (400 naming the key, nothing written); a null key inherits
// the global value again; the effective values follow the global settings
// where not overridden.
func TestWorkspaceSettings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const path = "/api/workspaces/acme/settings"
	d := decodeWSSettings(t, wantStatus(t, e.do(req{method: "GET", path: path, token: e.ro}), 200))
	if d.Naming.Mode != nil || d.Naming.TimeoutSeconds != nil || d.Naming.Model != nil {
		t.Fatalf("initial overrides = %+v, want none", d.Naming)
	}
	if n := d.Effective.Naming; n.Mode != "once" || n.TimeoutSeconds != 45 {
		t.Fatalf("initial effective = %+v, want the global defaults", n)
	}

	resp := e.do(req{method: "PUT", path: path, token: e.full, body: `{"naming":{"mode":"disabled","timeout_seconds":7}}`})
	if tag := resp.Header.Get("ETag"); tag != `"1"` {
		t.Errorf("ETag = %s, want \"1\"", tag)
	}
	d = decodeWSSettings(t, wantStatus(t, resp, 200))
	if n := d.Effective.Naming; n.Mode != "disabled" || n.TimeoutSeconds != 7 {
		t.Fatalf("effective after PUT = %+v, want disabled, 7", n)
	}
	// The global timeout changes; the workspace keeps its own, and inherits
	// the mode it does not override.
	wantStatus(t, e.do(req{method: "PUT", path: "/api/settings", token: e.full, body: `{"naming":{"mode":"always","timeout_seconds":60,"model":"cheap"}}`}), 200)
	d = decodeWSSettings(t, wantStatus(t, e.do(req{method: "GET", path: path, token: e.wsTok}), 200))
	if n := d.Effective.Naming; n.Mode != "disabled" || n.TimeoutSeconds != 7 || n.Model != "cheap" {
		t.Fatalf("effective = %+v, want disabled, 7, cheap", n)
	}

	for _, tc := range []struct{ body, field string }{
		{`{"naming":{"mode":"sometimes"}}`, "naming.mode"},
		{`{"naming":{"timeout_seconds":0}}`, "naming.timeout_seconds"},
		{`{"naming":{"timeout_seconds":301}}`, "naming.timeout_seconds"},
		{`{"naming":{"timeout_seconds":"9"}}`, "naming.timeout_seconds"},
		{`{"naming":{"model":"two words"}}`, "naming.model"},
		{`{"naming":{"Mode":"once"}}`, "naming.Mode"},
		{`{"naming":{"mode":"once","mode":"always"}}`, "naming.mode"},
		{`{"evolution":{"level":"L3"}}`, "evolution"},
	} {
		wantProblem(t, e.do(req{method: "PUT", path: path, token: e.full, body: tc.body}), 400, "invalid", tc.field)
	}
	d = decodeWSSettings(t, wantStatus(t, e.do(req{method: "GET", path: path, token: e.full}), 200))
	if d.Naming.Mode == nil || *d.Naming.Mode != "disabled" || d.Naming.TimeoutSeconds == nil || *d.Naming.TimeoutSeconds != 7 || d.Naming.Model != nil {
		t.Fatalf("a refused PUT changed the overrides: %+v", d.Naming)
	}

	// null drops an override: the global value applies again.
	d = decodeWSSettings(t, wantStatus(t, e.do(req{method: "PUT", path: path, token: e.full, body: `{"naming":{"timeout_seconds":null}}`}), 200))
	if d.Naming.TimeoutSeconds != nil || d.Naming.Mode == nil {
		t.Fatalf("overrides after null = %+v, want the mode kept and no timeout", d.Naming)
	}
	if n := d.Effective.Naming; n.Mode != "disabled" || n.TimeoutSeconds != 60 {
		t.Fatalf("effective after null = %+v, want disabled, 60 (global)", n)
	}

	// Another workspace is untouched; global is not a workspace.
	d = decodeWSSettings(t, wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/other/settings", token: e.full}), 200))
	if n := d.Effective.Naming; n.Mode != "always" || n.TimeoutSeconds != 60 {
		t.Fatalf("other's effective = %+v, want the global always, 60", n)
	}
	wantStatus(t, e.do(req{method: "GET", path: "/api/workspaces/global/settings", token: e.full}), 404)

	// Deleting the workspace deletes its overrides: one created again under
	// the name starts with none.
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/workspaces/acme", token: e.full}), 204)
	wantStatus(t, e.do(req{method: "GET", path: path, token: e.full}), 404)
	wantStatus(t, e.do(req{method: "PUT", path: path, token: e.full, body: `{"naming":{"mode":"once"}}`}), 404)
	wantStatus(t, e.do(req{method: "PUT", path: "/api/workspaces/acme", token: e.full}), 201)
	d = decodeWSSettings(t, wantStatus(t, e.do(req{method: "GET", path: path, token: e.full}), 200))
	if d.Naming.Mode != nil || d.Naming.TimeoutSeconds != nil {
		t.Fatalf("overrides of the re-created workspace = %+v, want none", d.Naming)
	}
}

// TestWorkspaceSettingsIfMatch: a PUT of a workspace's overrides with
// If-Match applies only over the revision named (409 settings_changed
// otherwise, nothing written); "*" or a list naming the current tag applies.
func TestWorkspaceSettingsIfMatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const path = "/api/workspaces/acme/settings"
	put := func(body, tag string) *http.Response {
		return e.do(req{method: "PUT", path: path, token: e.full, body: body, header: map[string]string{"If-Match": tag}})
	}
	first := e.do(req{method: "GET", path: path, token: e.full})
	wantStatus(t, first, 200)
	tag0 := first.Header.Get("ETag")
	resp := put(`{"naming":{"timeout_seconds":7}}`, tag0)
	wantStatus(t, resp, 200)
	tag1 := resp.Header.Get("ETag")
	if tag1 == "" || tag1 == tag0 {
		t.Fatalf("ETag after PUT = %q, want a new one (was %q)", tag1, tag0)
	}
	for _, stale := range []string{tag0, `"99"`, `W/` + tag1, `bogus`} {
		wantProblem(t, put(`{"naming":{"timeout_seconds":9}}`, stale), 409, settings.ReasonChanged, "")
	}
	d := decodeWSSettings(t, wantStatus(t, e.do(req{method: "GET", path: path, token: e.full}), 200))
	if d.Naming.TimeoutSeconds == nil || *d.Naming.TimeoutSeconds != 7 {
		t.Fatalf("overrides after refused updates = %+v, want timeout 7", d.Naming)
	}
	wantStatus(t, put(`{"naming":{"timeout_seconds":8}}`, tag0+", "+tag1), 200)
	wantStatus(t, put(`{"naming":{"timeout_seconds":9}}`, "*"), 200)
}
