package httpapi_test

import (
	"strings"
	"testing"
)

// TestRemotesAndResolve: remote agents are registered by reference to their
// token (never the token), names and aliases that collide with another target
// are refused, and /resolve reports how a message would route against the
// workspace's agents and remotes without dispatching it.
func TestRemotesAndResolve(t *testing.T) {
	t.Parallel()
	e := setupApp(t)
	e.call(201, req{method: "PUT", path: "/api/workspaces/acme/files/agents/reviewer/AGENT.md", token: e.full, body: "You review."})
	e.call(201, req{method: "PUT", path: "/api/workspaces/acme/files/agents/reviewer/agent.yaml", token: e.full,
		body: "name: Nora\naliases: [code reviewer]\n"})
	body := `{"card_url":"https://billing.example/.well-known/agent-card.json","token_ref":"env:BILLING_TOKEN","aliases":["accounts team"]}`
	got := e.call(201, req{method: "PUT", path: "/api/workspaces/acme/remotes/billing", token: e.full, body: body})
	if got["token_ref"] != "env:BILLING_TOKEN" || got["name"] != "billing" {
		t.Fatalf("registered %v", got)
	}
	e.call(200, req{method: "PUT", path: "/api/workspaces/acme/remotes/billing", token: e.full, body: body})

	for _, c := range []struct {
		name, body, field string
	}{
		{"a token instead of a reference", `{"card_url":"https://x.example/card","token_ref":"sk-live-123"}`, "token_ref"},
		{"no scheme", `{"card_url":"x.example/card","token_ref":"env:T"}`, "card_url"},
		{"credentials in the URL", `{"card_url":"https://u:p@x.example/card","token_ref":"env:T"}`, "card_url"},
		{"empty alias", `{"card_url":"https://x.example/card","token_ref":"env:T","aliases":["--"]}`, "aliases"},
	} {
		p := e.call(400, req{method: "PUT", path: "/api/workspaces/acme/remotes/other", token: e.full, body: c.body})
		if p["field"] != c.field {
			t.Errorf("%s: problem %v, want field %s", c.name, p, c.field)
		}
	}
	// An alias (or name) another target has, however spelled, is refused.
	for _, b := range []string{
		`{"card_url":"https://x.example/card","token_ref":"env:T","aliases":["Code-Reviewer"]}`,
		`{"card_url":"https://x.example/card","token_ref":"env:T","aliases":["NORA"]}`,
		`{"card_url":"https://x.example/card","token_ref":"env:T","aliases":["accounts  team"]}`,
	} {
		p := e.call(409, req{method: "PUT", path: "/api/workspaces/acme/remotes/clash", token: e.full, body: b})
		if p["code"] != "alias_collision" {
			t.Errorf("%s: problem %v, want alias_collision", b, p)
		}
	}
	e.call(409, req{method: "PUT", path: "/api/workspaces/acme/remotes/reviewer", token: e.full,
		body: `{"card_url":"https://x.example/card","token_ref":"env:T"}`})

	list := e.call(200, req{method: "GET", path: "/api/workspaces/acme/remotes", token: e.full})
	if items := list["items"].([]any); len(items) != 1 {
		t.Fatalf("remotes %v", list)
	}

	resolve := func(text string) map[string]any {
		t.Helper()
		return e.call(200, req{method: "POST", path: "/api/workspaces/acme/resolve", token: e.wsTok,
			body: `{"text":` + quote(text) + `}`})
	}
	for _, c := range []struct{ text, decision, target, kind string }{
		{"Have the reviewer look at this", "dispatch", "reviewer", "agent"},
		{"Have Nora look at this", "dispatch", "reviewer", "agent"},
		{"Forward it to the accounts team", "dispatch", "billing", "remote"},
		{"He said \"have the reviewer look at this\"", "local", "", ""},
		{"```\nhave the reviewer look at this\n```", "local", "", ""},
		{"Ask the reviewer and billing to look", "abstain", "", ""},
	} {
		got := resolve(c.text)
		if got["decision"] != c.decision || (c.target != "" && (got["target"] != c.target || got["kind"] != c.kind)) {
			t.Errorf("resolve %q = %v, want %s %s %s", c.text, got, c.decision, c.target, c.kind)
		}
		if got["message"] != c.text {
			t.Errorf("resolve %q changed the message: %v", c.text, got["message"])
		}
	}
	if resp := e.do(req{method: "DELETE", path: "/api/workspaces/acme/remotes/billing", token: e.full}); resp.StatusCode != 204 {
		t.Fatalf("delete remote = %d", resp.StatusCode)
	}
	e.call(404, req{method: "GET", path: "/api/workspaces/acme/remotes/billing", token: e.full})
	if got := resolve("Forward it to the accounts team"); got["decision"] != "local" {
		t.Fatalf("a deleted remote still routes: %v", got)
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
