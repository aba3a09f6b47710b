package search

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// searxng is a SearXNG instance's JSON API: GET {base}/search?q=…&format=json.
type searxng struct {
	base string
	http *http.Client
}

func (s *searxng) name() string     { return BackendSearXNG }
func (s *searxng) configured() bool { return s.base != "" }

// searxngAnswer is the part of SearXNG's JSON answer molt reads. Results is a
// pointer so that an answer without the key is malformed, not empty;
// number_of_results is optional and not read.
type searxngAnswer struct {
	Results *[]struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
	// UnresponsiveEngines are [name, reason] pairs, e.g. ["google", "timeout"].
	UnresponsiveEngines []json.RawMessage `json:"unresponsive_engines"`
}

func (s *searxng) search(ctx context.Context, q string, _ int) ([]Result, error) {
	u := strings.TrimRight(s.base, "/") + "/search?" + url.Values{"q": {q}, "format": {"json"}, "pageno": {"1"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil, fail(ReasonMalformed)
	}
	req.Header.Set("Accept", "application/json")
	body, resp, err := do(s.http, req, MaxSearchBody, func(status int) string {
		if status == http.StatusForbidden {
			// SearXNG answers an output format missing from search.formats
			// with an HTML 403.
			return ReasonJSONDisabled
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, fail(ReasonMalformed)
	}
	var a searxngAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Results == nil {
		return nil, fail(ReasonMalformed)
	}
	// An empty answer while engines failed is an outage, not "nothing found":
	// with engines down SearXNG still answers 200 with results: [].
	if len(*a.Results) == 0 && len(a.UnresponsiveEngines) > 0 {
		return nil, fail(ReasonEnginesUnresponsive)
	}
	out := make([]Result, 0, len(*a.Results))
	for _, r := range *a.Results {
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}

// Probe asks a SearXNG instance for /config and reports whether it answered
// 200 with JSON listing at least one engine (its engine registry is loaded).
// The reason of a failure is safe to log.
func Probe(ctx context.Context, c *Client) error {
	s, ok := c.backends[BackendSearXNG].(*searxng)
	if !ok || !s.configured() {
		return fail(ReasonNotConfigured)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.base, "/")+"/config", http.NoBody)
	if err != nil {
		return fail(ReasonMalformed)
	}
	req.Header.Set("Accept", "application/json")
	body, _, err := do(s.http, req, MaxSearchBody, nil)
	if err != nil {
		return err
	}
	var cfg struct {
		Engines []json.RawMessage `json:"engines"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil || len(cfg.Engines) == 0 {
		return fail(ReasonMalformed)
	}
	return nil
}
