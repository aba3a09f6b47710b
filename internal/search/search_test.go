package search_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/search"
)

const testKey = "tf-secret-key-123456"

// provider is a loopback server speaking one provider's wire format; calls
// counts the requests it got.
type provider struct {
	*httptest.Server
	calls atomic.Int32
}

func serve(t *testing.T, h http.HandlerFunc) *provider {
	t.Helper()
	p := &provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		h(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reply writes body with a content type and status.
func reply(status int, ct string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// hang answers nothing until the client goes away; gone is closed then.
func hang(gone chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
			return
		}
		if gone != nil {
			close(gone)
		}
	}
}

// searxngOK checks the request is SearXNG's JSON search and answers file.
func searxngOK(t *testing.T, file string) http.HandlerFunc {
	body := testdata(t, file)
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" || r.URL.Query().Get("q") == "" {
			t.Errorf("searxng got %s %s", r.Method, r.URL)
		}
		reply(200, "application/json", body)(w, r)
	}
}

// ddgOK checks the request is DuckDuckGo's HTML form post and answers file.
func ddgOK(t *testing.T, file string) http.HandlerFunc {
	body := testdata(t, file)
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("q") == "" {
			t.Errorf("duckduckgo got %s %s form %v", r.Method, r.URL, r.PostForm)
		}
		reply(200, "text/html; charset=utf-8", body)(w, r)
	}
}

func tinyfishOK(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("X-API-Key") != testKey || r.URL.Query().Get("query") == "" {
			t.Errorf("tinyfish got %s %s key %q", r.Method, r.URL, r.Header.Get("X-API-Key"))
		}
		reply(200, "application/json", []byte(`{"query":"molt","results":[{"position":1,"site_name":"example","title":"Tinyfish hit","url":"https://example.org/tf","snippet":"From Tinyfish."}]}`))(w, r)
	}
}

func client(cfg search.Config) *search.Client {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	return search.New(cfg, nil)
}

func attempts(r search.Response) string {
	var s []string
	for _, a := range r.Attempts {
		s = append(s, a.Backend+":"+a.Outcome+":"+a.Reason)
	}
	return strings.Join(s, " ")
}

func TestSearXNGResultsPreserved(t *testing.T) {
	t.Parallel()
	sx := serve(t, searxngOK(t, "searxng_results.json"))
	ddg := serve(t, ddgOK(t, "ddg_results.html"))
	resp, err := client(search.Config{SearXNGURL: sx.URL, DuckDuckGoURL: ddg.URL}).Search(context.Background(), search.Query{Text: "molt"})
	if err != nil {
		t.Fatal(err)
	}
	want := []search.Result{
		{Title: "Molt — a control plane", URL: "https://example.org/molt", Snippet: "Serverless control plane for agents."},
		{Title: "Second", URL: "https://example.com/second", Snippet: "Another result."},
	}
	if resp.Backend != "searxng" || len(resp.Results) != 2 || resp.Results[0] != want[0] || resp.Results[1] != want[1] {
		t.Fatalf("got %+v, want searxng %+v", resp, want)
	}
	if got := attempts(resp); got != "searxng:ok:" {
		t.Fatalf("attempts %s", got)
	}
	if ddg.calls.Load() != 0 {
		t.Fatal("duckduckgo was asked after a SearXNG answer")
	}
}

// TestEmptyIsSuccess: an empty answer ends the chain as a success.
func TestEmptyIsSuccess(t *testing.T) {
	t.Parallel()
	sx := serve(t, searxngOK(t, "searxng_empty.json"))
	ddg := serve(t, ddgOK(t, "ddg_results.html"))
	resp, err := client(search.Config{SearXNGURL: sx.URL, DuckDuckGoURL: ddg.URL}).Search(context.Background(), search.Query{Text: "zzqqxx"})
	if err != nil || resp.Backend != "searxng" || resp.Results == nil || len(resp.Results) != 0 || ddg.calls.Load() != 0 {
		t.Fatalf("got %+v, %v (ddg calls %d); want an empty searxng success", resp, err, ddg.calls.Load())
	}
	ddgEmpty := serve(t, ddgOK(t, "ddg_empty.html"))
	resp, err = client(search.Config{Backend: "duckduckgo", DuckDuckGoURL: ddgEmpty.URL}).Search(context.Background(), search.Query{Text: "zzqqxx"})
	if err != nil || resp.Backend != "duckduckgo" || len(resp.Results) != 0 {
		t.Fatalf("duckduckgo empty page: %+v, %v; want an empty success", resp, err)
	}
}

// TestSomeEnginesDownIsEmpty: an empty SearXNG answer with unresponsive
// engines is an outage only when they are every enabled general engine its
// /config lists; with one of them up it is an empty success.
func TestSomeEnginesDownIsEmpty(t *testing.T) {
	t.Parallel()
	unresponsive := testdata(t, "searxng_unresponsive.json") // brave, duckduckgo, mojeek
	for _, c := range []struct {
		name, engines, want string
	}{
		{"wikipedia up", `{"name":"wikipedia","categories":["general"],"enabled":true},`, "searxng:ok:"},
		{"all general down", `{"name":"wikipedia","categories":["general"],"enabled":false},` +
			`{"name":"openstreetmap","categories":["map"],"enabled":true},`, "searxng:failed:engines_unresponsive duckduckgo:ok:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			config := []byte(`{"categories":["general","map"],"engines":[` + c.engines +
				`{"name":"brave","categories":["general","web"],"enabled":true},` +
				`{"name":"duckduckgo","categories":["general","web"],"enabled":true},` +
				`{"name":"mojeek","categories":["general","web"],"enabled":true}]}`)
			sx := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/config" {
					_, _ = w.Write(config)
					return
				}
				_, _ = w.Write(unresponsive)
			})
			ddg := serve(t, ddgOK(t, "ddg_results.html"))
			resp, err := client(search.Config{SearXNGURL: sx.URL, DuckDuckGoURL: ddg.URL, Timeout: time.Second}).
				Search(context.Background(), search.Query{Text: "zzqqxx"})
			if err != nil {
				t.Fatal(err)
			}
			if got := attempts(resp); got != c.want {
				t.Fatalf("attempts %s, want %s", got, c.want)
			}
		})
	}
}

// TestSearXNGFailuresFallBack: every SearXNG failure mode has its reason and
// the chain goes on to DuckDuckGo.
func TestSearXNGFailuresFallBack(t *testing.T) {
	t.Parallel()
	huge := []byte(`{"results":[{"title":"` + strings.Repeat("x", search.MaxSearchBody) + `"}]}`)
	cases := []struct {
		name   string
		h      http.HandlerFunc
		reason string
	}{
		{"unresponsive", reply(200, "application/json", testdata(t, "searxng_unresponsive.json")), "engines_unresponsive"},
		{"json disabled", reply(403, "text/html; charset=utf-8", testdata(t, "searxng_403.html")), "json_disabled"},
		{"bang redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://www.google.com/search?q=molt", http.StatusFound)
		}, "redirect_refused"},
		{"truncated json", reply(200, "application/json", []byte(`{"results":[{"title":`)), "malformed"},
		{"no results key", reply(200, "application/json", []byte(`{"query":"molt"}`)), "malformed"},
		{"results not a list", reply(200, "application/json", []byte(`{"results":"none"}`)), "malformed"},
		{"html instead of json", reply(200, "text/html", []byte(`<html><body>results</body></html>`)), "malformed"},
		{"server error", reply(500, "text/plain", []byte("boom")), "http_500"},
		{"rate limited", reply(429, "text/plain", []byte("Too Many Requests")), "http_429"},
		{"too large", reply(200, "application/json", huge), "too_large"},
		{"hangs", hang(nil), "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sx := serve(t, c.h)
			ddg := serve(t, ddgOK(t, "ddg_results.html"))
			resp, err := client(search.Config{SearXNGURL: sx.URL, DuckDuckGoURL: ddg.URL, Timeout: time.Second}).
				Search(context.Background(), search.Query{Text: "!!g molt"})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := attempts(resp), "searxng:failed:"+c.reason+" duckduckgo:ok:"; got != want {
				t.Fatalf("attempts %s, want %s", got, want)
			}
			if resp.Backend != "duckduckgo" || len(resp.Results) != 2 {
				t.Fatalf("got %+v", resp)
			}
		})
	}
}

func TestDuckDuckGoResults(t *testing.T) {
	t.Parallel()
	ddg := serve(t, ddgOK(t, "ddg_results.html"))
	resp, err := client(search.Config{Backend: "duckduckgo", DuckDuckGoURL: ddg.URL}).Search(context.Background(), search.Query{Text: "molt", Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := []search.Result{
		{Title: "Molt control plane", URL: "https://example.org/molt?a=1", Snippet: "A serverless control plane."},
		{Title: "Direct link", URL: "https://example.net/direct", Snippet: "Snippet two."},
	}
	if len(resp.Results) != 2 || resp.Results[0] != want[0] || resp.Results[1] != want[1] {
		t.Fatalf("results %+v, want %+v (the ad skipped, uddg unwrapped)", resp.Results, want)
	}
	one, err := client(search.Config{Backend: "duckduckgo", DuckDuckGoURL: ddg.URL}).Search(context.Background(), search.Query{Text: "molt", Max: 1})
	if err != nil || len(one.Results) != 1 {
		t.Fatalf("max 1: %+v, %v", one, err)
	}
}

func TestDuckDuckGoFailures(t *testing.T) {
	t.Parallel()
	challenge := testdata(t, "ddg_challenge.html")
	cases := []struct {
		name   string
		h      http.HandlerFunc
		reason string
	}{
		{"challenge 202", reply(202, "text/html", challenge), "challenge"},
		{"challenge 200", reply(200, "text/html", challenge), "challenge"},
		{"unknown page", reply(200, "text/html", []byte(`<html><body><p>Welcome</p></body></html>`)), "malformed"},
		{"server error", reply(503, "text/html", []byte(`<html>down</html>`)), "http_503"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://duckduckgo.com/", http.StatusSeeOther)
		}, "redirect_refused"},
		{"hangs", hang(nil), "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ddg := serve(t, c.h)
			resp, err := client(search.Config{Backend: "duckduckgo", DuckDuckGoURL: ddg.URL, Timeout: time.Second}).
				Search(context.Background(), search.Query{Text: "molt"})
			if molt.ErrorCode(err) != molt.EUNAVAILABLE {
				t.Fatalf("got %+v, %v; want unavailable", resp, err)
			}
			var me *molt.Error
			errors.As(err, &me)
			r := me.Details.(search.Response)
			if got := attempts(r); got != "duckduckgo:failed:"+c.reason {
				t.Fatalf("attempts %s, want reason %s", got, c.reason)
			}
			if len(r.Results) != 0 {
				t.Fatalf("a failure carries results %+v", r.Results)
			}
		})
	}
}

// TestChainOrder: auto without a key is SearXNG, DuckDuckGo; with one
// SearXNG, Tinyfish, DuckDuckGo; explicit choices fall back to Tinyfish.
func TestChainOrder(t *testing.T) {
	t.Parallel()
	down := serve(t, reply(500, "text/plain", nil))
	tf := serve(t, tinyfishOK(t))
	ddg := serve(t, ddgOK(t, "ddg_results.html"))

	c := client(search.Config{SearXNGURL: down.URL, DuckDuckGoURL: ddg.URL, TinyfishKey: testKey, TinyfishSearchURL: tf.URL})
	resp, err := c.Search(context.Background(), search.Query{Text: "molt"})
	if err != nil || attempts(resp) != "searxng:failed:http_500 tinyfish:ok:" || resp.Results[0].Title != "Tinyfish hit" {
		t.Fatalf("auto with key: %+v, %v", resp, err)
	}
	resp, err = c.Search(context.Background(), search.Query{Text: "molt", Backend: "duckduckgo"})
	if err != nil || attempts(resp) != "duckduckgo:ok:" {
		t.Fatalf("explicit duckduckgo: %+v, %v", resp, err)
	}
	badDDG := serve(t, reply(202, "text/html", testdata(t, "ddg_challenge.html")))
	c2 := client(search.Config{DuckDuckGoURL: badDDG.URL, TinyfishKey: testKey, TinyfishSearchURL: tf.URL})
	resp, err = c2.Search(context.Background(), search.Query{Text: "molt", Backend: "duckduckgo"})
	if err != nil || attempts(resp) != "duckduckgo:failed:challenge tinyfish:ok:" {
		t.Fatalf("duckduckgo then tinyfish: %+v, %v", resp, err)
	}
	resp, err = c2.Search(context.Background(), search.Query{Text: "molt"})
	if err != nil || attempts(resp) != "searxng:skipped:not_configured tinyfish:ok:" {
		t.Fatalf("auto without SearXNG: %+v, %v", resp, err)
	}
	resp, err = c2.Search(context.Background(), search.Query{Text: "molt", Backend: "tinyfish"})
	if err != nil || attempts(resp) != "tinyfish:ok:" {
		t.Fatalf("explicit tinyfish: %+v, %v", resp, err)
	}
	_, err = client(search.Config{}).Search(context.Background(), search.Query{Text: "molt", Backend: "tinyfish"})
	if molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("tinyfish without a key: %v, want invalid", err)
	}
}

// TestSecretsStayOut: a failed Tinyfish answer (402: no credits) reports its
// status only; neither the key nor the body reaches the error.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	tf := serve(t, reply(402, "application/json", []byte(`{"error":"no credits for key `+testKey+`"}`)))
	_, err := client(search.Config{Backend: "tinyfish", TinyfishKey: testKey, TinyfishSearchURL: tf.URL}).Search(context.Background(), search.Query{Text: "molt"})
	var me *molt.Error
	if !errors.As(err, &me) || me.Reason != search.ReasonSearchUnavailable {
		t.Fatalf("err %v", err)
	}
	if r := me.Details.(search.Response); attempts(r) != "tinyfish:failed:http_402" {
		t.Fatalf("attempts %s", attempts(r))
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "credits") {
		t.Fatalf("error leaks: %v", err)
	}
}

// TestTimeoutsPerBackend: two hanging backends each use their own timeout.
func TestTimeoutsPerBackend(t *testing.T) {
	t.Parallel()
	sx := serve(t, hang(nil))
	ddg := serve(t, hang(nil))
	start := time.Now()
	_, err := client(search.Config{SearXNGURL: sx.URL, DuckDuckGoURL: ddg.URL, Timeout: time.Second}).Search(context.Background(), search.Query{Text: "molt"})
	took := time.Since(start)
	var me *molt.Error
	if !errors.As(err, &me) {
		t.Fatalf("err %v", err)
	}
	r := me.Details.(search.Response)
	if attempts(r) != "searxng:failed:timeout duckduckgo:failed:timeout" {
		t.Fatalf("attempts %s", attempts(r))
	}
	for _, a := range r.Attempts {
		if a.MS < 900 || a.MS > 1900 {
			t.Errorf("%s took %d ms, want about its own 1000", a.Backend, a.MS)
		}
	}
	if took < 1800*time.Millisecond || took > 3500*time.Millisecond {
		t.Fatalf("chain took %v, want about 2 × 1 s", took)
	}
}

// TestCancellationStopsEverything: ending ctx ends the request in flight (the
// server sees its connection go) and nothing further is tried.
func TestCancellationStopsEverything(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	sx := serve(t, hang(gone))
	ddg := serve(t, ddgOK(t, "ddg_results.html"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client(search.Config{SearXNGURL: sx.URL, DuckDuckGoURL: ddg.URL, Timeout: 30 * time.Second}).Search(ctx, search.Query{Text: "molt"})
		done <- err
	}()
	for sx.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("search did not stop")
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the SearXNG request was not closed")
	}
	if ddg.calls.Load() != 0 {
		t.Fatal("duckduckgo tried after cancellation")
	}
}

func TestTransportReasons(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	tlsSrv := httptest.NewTLSServer(searxngOK(t, "searxng_results.json")) // self-signed: must not verify
	t.Cleanup(tlsSrv.Close)
	for _, c := range []struct{ url, reason string }{
		{closed, "connect"},
		{"http://molt-no-such-host.invalid", "dns"},
		{tlsSrv.URL, "tls"},
	} {
		_, err := client(search.Config{Backend: "searxng", SearXNGURL: c.url}).Search(context.Background(), search.Query{Text: "molt"})
		var me *molt.Error
		if !errors.As(err, &me) {
			t.Fatalf("%s: err %v", c.url, err)
		}
		if got := attempts(me.Details.(search.Response)); got != "searxng:failed:"+c.reason {
			t.Errorf("%s: %s, want %s", c.url, got, c.reason)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	c := search.ConfigFromEnv([]string{"MOLT_SEARCH_BACKEND=DuckDuckGo", "MOLT_SEARCH_TIMEOUT_SECONDS=7", "TINYFISH_API_KEY=k", "MOLT_SEARXNG_URL=http://127.0.0.1:8888"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Backend != "duckduckgo" || c.Timeout != 7*time.Second || c.TinyfishKey != "k" || c.SearXNGURL != "http://127.0.0.1:8888" {
		t.Fatalf("config %+v", c)
	}
	for _, env := range [][]string{
		{"MOLT_SEARCH_TIMEOUT_SECONDS=0"}, {"MOLT_SEARCH_TIMEOUT_SECONDS=61"}, {"MOLT_SEARCH_TIMEOUT_SECONDS=x"},
		{"MOLT_SEARCH_BACKEND=google"}, {"MOLT_SEARCH_BACKEND=tinyfish"}, {"MOLT_SEARCH_BACKEND=searxng"},
		{"MOLT_SEARXNG_URL=ftp://x"}, {"MOLT_FETCH_ALLOW_HTTP=perhaps"},
	} {
		if err := search.ConfigFromEnv(env).Validate(); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("%v: %v, want invalid", env, err)
		}
	}
	if d := search.New(search.ConfigFromEnv(nil), nil).Config(); d.Timeout != 15*time.Second || d.Backend != "auto" || d.DuckDuckGoURL != search.DefaultDuckDuckGoURL {
		t.Fatalf("defaults %+v", d)
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	ok := serve(t, reply(200, "application/json", []byte(`{"engines":[{"name":"brave","enabled":true}],"categories":["general"],"version":"2026.1.11"}`)))
	if err := search.Probe(context.Background(), client(search.Config{SearXNGURL: ok.URL})); err != nil {
		t.Fatalf("probe: %v", err)
	}
	empty := serve(t, reply(200, "application/json", []byte(`{"engines":[]}`)))
	if err := search.Probe(context.Background(), client(search.Config{SearXNGURL: empty.URL})); search.ReasonOf(err) != "malformed" {
		t.Fatalf("probe of no engines: %v", err)
	}
}
