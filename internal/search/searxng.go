package search

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// searxng is a SearXNG instance's JSON API: GET {base}/search?q=…&format=json.
type searxng struct {
	base string
	http *http.Client

	mu      sync.Mutex
	general map[string]bool // the enabled engines of category general, from /config
	readAt  time.Time
}

// configEvery is how long the engine list read from /config is trusted.
const configEvery = 10 * time.Minute

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
	// An empty answer while every engine failed is an outage, not "nothing
	// found": with its engines down SearXNG still answers 200 with
	// results: []. An empty answer with some engines up is a success.
	if len(*a.Results) == 0 && len(a.UnresponsiveEngines) > 0 && s.allDown(ctx, a.UnresponsiveEngines) {
		return nil, fail(ReasonEnginesUnresponsive)
	}
	out := make([]Result, 0, len(*a.Results))
	for _, r := range *a.Results {
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}

// allDown reports whether the unresponsive engines (["name", "reason"]
// pairs) are every engine a query without categories asks: the enabled
// engines of category general, as /config lists them. When /config cannot
// be read it reports true: an answer it cannot tell from an outage falls
// back rather than pass for an empty success.
func (s *searxng) allDown(ctx context.Context, unresponsive []json.RawMessage) bool {
	general := s.engines(ctx)
	if len(general) == 0 {
		return true
	}
	down := map[string]bool{}
	for _, raw := range unresponsive {
		var pair []string
		if json.Unmarshal(raw, &pair) == nil && len(pair) > 0 {
			down[pair[0]] = true
		}
	}
	for name := range general {
		if !down[name] {
			return false
		}
	}
	return true
}

// engines returns the enabled engines of category general from /config,
// read at most every configEvery; nil when it cannot be read.
func (s *searxng) engines(ctx context.Context) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.general != nil && time.Since(s.readAt) < configEvery {
		return s.general
	}
	cfg, err := s.config(ctx)
	if err != nil {
		return nil
	}
	general := map[string]bool{}
	for _, e := range cfg.Engines {
		if e.Enabled && slices.Contains(e.Categories, "general") {
			general[e.Name] = true
		}
	}
	s.general, s.readAt = general, time.Now()
	return general
}

// searxngConfig is the part of SearXNG's /config molt reads.
type searxngConfig struct {
	Engines []struct {
		Name       string   `json:"name"`
		Categories []string `json:"categories"`
		Enabled    bool     `json:"enabled"`
	} `json:"engines"`
}

// config reads /config; it fails with reason malformed unless the answer is
// JSON listing at least one engine.
func (s *searxng) config(ctx context.Context) (searxngConfig, error) {
	var cfg searxngConfig
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.base, "/")+"/config", http.NoBody)
	if err != nil {
		return cfg, fail(ReasonMalformed)
	}
	req.Header.Set("Accept", "application/json")
	body, _, err := do(s.http, req, MaxSearchBody, nil)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(body, &cfg); err != nil || len(cfg.Engines) == 0 {
		return cfg, fail(ReasonMalformed)
	}
	return cfg, nil
}

// Probe asks a SearXNG instance for /config and reports whether it answered
// 200 with JSON listing at least one engine (its engine registry is loaded).
// The reason of a failure is safe to log.
func Probe(ctx context.Context, c *Client) error {
	s, ok := c.backends[BackendSearXNG].(*searxng)
	if !ok || !s.configured() {
		return fail(ReasonNotConfigured)
	}
	_, err := s.config(ctx)
	return err
}
