package search

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// tinyfish is Tinyfish's search API: GET {searchURL}?query=… with X-API-Key.
type tinyfish struct {
	searchURL string
	key       string
	http      *http.Client
}

func (t *tinyfish) name() string     { return BackendTinyfish }
func (t *tinyfish) configured() bool { return t.key != "" }

func (t *tinyfish) search(ctx context.Context, q string, _ int) ([]Result, error) {
	u, err := withQuery(t.searchURL, url.Values{"query": {q}})
	if err != nil {
		return nil, fail(ReasonMalformed)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil, fail(ReasonMalformed)
	}
	req.Header.Set("X-API-Key", t.key)
	req.Header.Set("Accept", "application/json")
	body, _, err := do(t.http, req, MaxSearchBody, nil)
	if err != nil {
		return nil, err
	}
	var a struct {
		Results *[]struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Snippet string `json:"snippet"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.Results == nil {
		return nil, fail(ReasonMalformed)
	}
	out := make([]Result, 0, len(*a.Results))
	for _, r := range *a.Results {
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Snippet})
	}
	return out, nil
}

// tinyfishDoc is one document Tinyfish fetch returned.
type tinyfishDoc struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// tinyfishFetch asks Tinyfish fetch for u as Markdown: POST {fetchURL} with
// {"urls":[u],"format":"markdown"} and X-API-Key. A URL Tinyfish reports in
// errors (or no text) is provider_error.
func tinyfishFetch(ctx context.Context, hc *http.Client, fetchURL, key, u string, max int64) (tinyfishDoc, error) {
	payload, _ := json.Marshal(map[string]any{"urls": []string{u}, "format": "markdown"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fetchURL, bytes.NewReader(payload))
	if err != nil {
		return tinyfishDoc{}, fail(ReasonMalformed)
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	body, _, err := do(hc, req, max, nil)
	if err != nil {
		return tinyfishDoc{}, err
	}
	var a struct {
		Results *[]tinyfishDoc    `json:"results"`
		Errors  []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.Results == nil {
		return tinyfishDoc{}, fail(ReasonMalformed)
	}
	if len(a.Errors) > 0 || len(*a.Results) == 0 || strings.TrimSpace((*a.Results)[0].Text) == "" {
		return tinyfishDoc{}, fail(ReasonProvider)
	}
	return (*a.Results)[0], nil
}

// withQuery adds q to base's query string.
func withQuery(base string, q url.Values) (string, error) {
	p, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	v := p.Query()
	for k, vs := range q {
		v[k] = vs
	}
	p.RawQuery = v.Encode()
	return p.String(), nil
}
