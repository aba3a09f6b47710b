package search

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// duckduckgo is DuckDuckGo's HTML endpoint: POST {base} with the form q.
type duckduckgo struct {
	base string
	http *http.Client
}

func (d *duckduckgo) name() string     { return BackendDuckDuckGo }
func (d *duckduckgo) configured() bool { return d.base != "" }

func (d *duckduckgo) search(ctx context.Context, q string, max int) ([]Result, error) {
	form := url.Values{"q": {q}, "kl": {"wt-wt"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fail(ReasonMalformed)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; molt)")
	body, _, err := do(d.http, req, MaxSearchBody, func(status int) string {
		if status == http.StatusAccepted {
			// The anti-bot page comes with 202.
			return ReasonChallenge
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	return parseDuckDuckGo(body, max)
}

// parseDuckDuckGo reads a result page: organic results are div.web-result
// (never .result--ad) with a.result__a and .result__snippet; the no-result page
// has .result--no-result; the anti-bot page (also served with 200) has
// form#challenge-form or anomaly-modal classes. A page with none of these is
// malformed.
func parseDuckDuckGo(body []byte, max int) ([]Result, error) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fail(ReasonMalformed)
	}
	var (
		results   []Result
		challenge bool
		noResult  bool
	)
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			cls := classes(n)
			switch {
			case n.Data == "form" && attr(n, "id") == "challenge-form":
				challenge = true
			case hasPrefix(cls, "anomaly-modal"):
				challenge = true
			case cls["result--no-result"]:
				noResult = true
			case n.Data == "div" && cls["web-result"] && !cls["result--ad"]:
				if r, ok := ddgResult(n); ok {
					results = append(results, r)
				}
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	switch {
	case challenge:
		return nil, fail(ReasonChallenge)
	case len(results) > 0:
		if len(results) > max {
			results = results[:max]
		}
		return results, nil
	case noResult:
		return []Result{}, nil
	}
	return nil, fail(ReasonMalformed)
}

// ddgResult reads one div.web-result.
func ddgResult(n *html.Node) (Result, bool) {
	var r Result
	var found bool
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			cls := classes(n)
			if n.Data == "a" && cls["result__a"] && !found {
				found = true
				r.Title = textOf(n)
				r.URL = ddgTarget(attr(n, "href"))
				return
			}
			if cls["result__snippet"] && r.Snippet == "" {
				r.Snippet = textOf(n)
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return r, found && r.URL != ""
}

// ddgTarget unwraps DuckDuckGo's redirect links (//duckduckgo.com/l/?uddg=…)
// to the result's own URL.
func ddgTarget(href string) string {
	p, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(p.Hostname(), "duckduckgo.com") && strings.HasPrefix(p.Path, "/l/") {
		return p.Query().Get("uddg")
	}
	if p.Scheme == "" {
		return ""
	}
	return href
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func classes(n *html.Node) map[string]bool {
	c := attr(n, "class")
	if c == "" {
		return nil
	}
	m := map[string]bool{}
	for _, f := range strings.Fields(c) {
		m[f] = true
	}
	return m
}

func hasPrefix(cls map[string]bool, prefix string) bool {
	for c := range cls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// textOf is n's text with whitespace collapsed.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}
