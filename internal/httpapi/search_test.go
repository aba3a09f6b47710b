package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/search"
)

// searchServers are loopback providers: a SearXNG-compatible JSON API whose
// engines all failed (no internet) and a DuckDuckGo HTML endpoint answering
// results or its anti-bot page.
func searchServers(t *testing.T, ddgChallenge bool) (searxngURL, ddgURL string) {
	t.Helper()
	sx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"query":"molt","results":[],"answers":[],"corrections":[],"infoboxes":[],"suggestions":[],` +
			`"unresponsive_engines":[["brave","timeout"],["duckduckgo","timeout"],["wikipedia","timeout"]]}`))
	}))
	t.Cleanup(sx.Close)
	ddg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if ddgChallenge {
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`<html><body><div class="anomaly-modal__modal"><form id="challenge-form"></form></div></body></html>`))
			return
		}
		_, _ = w.Write([]byte(`<html><body><div class="result results_links web-result"><h2><a class="result__a" ` +
			`href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2F">Example</a></h2><a class="result__snippet">Snippet.</a></div></body></html>`))
	}))
	t.Cleanup(ddg.Close)
	return sx.URL, ddg.URL
}

func searchEnv(t *testing.T, ddgChallenge bool) *env {
	t.Helper()
	e := setup(t)
	sx, ddg := searchServers(t, ddgChallenge)
	c := search.New(search.Config{SearXNGURL: sx, DuckDuckGoURL: ddg, Timeout: 2 * time.Second}, nil)
	e.h = httpapi.New(httpapi.Config{Store: e.store, Search: c, Logger: slog.New(slog.NewJSONHandler(e.logs, nil))})
	return e
}

// TestSearchFallsBack: SearXNG with every engine unresponsive is reported as
// failed (engines_unresponsive), not as an empty success, and DuckDuckGo answers.
func TestSearchFallsBack(t *testing.T) {
	t.Parallel()
	e := searchEnv(t, false)
	for _, tok := range []string{e.full, e.wsTok} {
		got := decode[search.Response](t, wantStatus(t, e.do(req{method: "GET", path: "/api/search?q=molt", token: tok}), 200))
		if got.Backend != "duckduckgo" || len(got.Results) != 1 || got.Results[0].URL != "https://example.org/" {
			t.Fatalf("got %+v", got)
		}
		if len(got.Attempts) != 2 || got.Attempts[0].Backend != "searxng" || got.Attempts[0].Outcome != "failed" ||
			got.Attempts[0].Reason != "engines_unresponsive" || got.Attempts[1].Outcome != "ok" {
			t.Fatalf("attempts %+v", got.Attempts)
		}
	}
	wantProblem(t, e.do(req{method: "GET", path: "/api/search?q=molt", token: e.ro}), 403, "forbidden", "")
	wantProblem(t, e.do(req{method: "GET", path: "/api/search?q=", token: e.full}), 400, "invalid", "q")
	wantProblem(t, e.do(req{method: "GET", path: "/api/search?q=molt&backend=google", token: e.full}), 400, "invalid", "backend")
}

// TestSearchAllFail: SearXNG down and DuckDuckGo's challenge page is 503
// search_unavailable listing both attempts.
func TestSearchAllFail(t *testing.T) {
	t.Parallel()
	e := searchEnv(t, true)
	body := wantStatus(t, e.do(req{method: "GET", path: "/api/search?q=molt", token: e.full}), 503)
	p := decode[struct {
		Code    string          `json:"code"`
		Details search.Response `json:"details"`
	}](t, body)
	if p.Code != "search_unavailable" || len(p.Details.Attempts) != 2 ||
		p.Details.Attempts[0].Reason != "engines_unresponsive" || p.Details.Attempts[1].Reason != "challenge" {
		t.Fatalf("problem %s", body)
	}
	// An explicit backend runs alone.
	body = wantStatus(t, e.do(req{method: "GET", path: "/api/search?q=molt&backend=duckduckgo", token: e.full}), 503)
	if p := decode[struct {
		Details search.Response `json:"details"`
	}](t, body); len(p.Details.Attempts) != 1 || p.Details.Attempts[0].Reason != "challenge" {
		t.Fatalf("problem %s", body)
	}
}
