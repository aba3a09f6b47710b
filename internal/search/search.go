package search

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/molt"
)

// Backends.
const (
	BackendAuto       = "auto"       // the chain Config.Chain builds
	BackendSearXNG    = "searxng"    // a SearXNG JSON API (MOLT_SEARXNG_URL)
	BackendDuckDuckGo = "duckduckgo" // DuckDuckGo's HTML endpoint
	BackendTinyfish   = "tinyfish"   // Tinyfish search (TINYFISH_API_KEY)
)

// Outcomes of one attempt.
const (
	OutcomeOK      = "ok"      // the backend answered (perhaps with no result)
	OutcomeFailed  = "failed"  // the backend failed; Reason says how
	OutcomeSkipped = "skipped" // the backend is in the chain but not configured
)

// Reasons are the safe codes of a failed attempt or fetch. They never carry a
// response body, a URL's query or a credential. A non-2xx status is
// "http_<status>" (HTTPReason).
const (
	ReasonTimeout             = "timeout"              // the backend's own timeout passed
	ReasonConnect             = "connect"              // no connection (refused, reset, the 3 s cap)
	ReasonDNS                 = "dns"                  // the name did not resolve
	ReasonTLS                 = "tls"                  // the certificate did not verify
	ReasonMalformed           = "malformed"            // the answer is not the provider's format
	ReasonChallenge           = "challenge"            // DuckDuckGo's anti-bot (anomaly) page
	ReasonJSONDisabled        = "json_disabled"        // SearXNG answered 403: format=json not enabled
	ReasonRedirectRefused     = "redirect_refused"     // the provider redirected (e.g. a SearXNG bang)
	ReasonEnginesUnresponsive = "engines_unresponsive" // SearXNG: no result, engines down
	ReasonTooLarge            = "too_large"            // the answer exceeds its size limit
	ReasonNotConfigured       = "not_configured"       // skipped: no URL or key
	// Fetch only.
	ReasonInvalidURL      = "invalid_url"      // not an absolute http(s) URL without credentials
	ReasonSchemeRefused   = "scheme_refused"   // http:// while the operator allows only https
	ReasonBlockedAddress  = "blocked_address"  // the host is (or resolves to) a non-public address
	ReasonRedirectLimit   = "redirect_limit"   // too many redirect hops
	ReasonUnsupportedType = "unsupported_type" // not a text document
	ReasonProvider        = "provider_error"   // Tinyfish fetch reported the URL failed
)

// HTTPReason is the reason of a non-2xx answer.
func HTTPReason(status int) string { return "http_" + strconv.Itoa(status) }

// ReasonSearchUnavailable is the molt error reason Search returns when every
// backend of the chain failed.
const ReasonSearchUnavailable = "search_unavailable"

// Limits.
const (
	DefaultMaxResults = 8
	MaxMaxResults     = 20
	MaxQueryLen       = 500     // bytes
	MaxSearchBody     = 2 << 20 // bytes of one provider answer
	maxTitle          = 300     // runes kept of a title
	maxSnippet        = 1000    // runes kept of a snippet
	connectCap        = 3 * time.Second
)

// Result is one search hit as the provider gave it.
type Result struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// Attempt is what one backend of the chain did.
type Attempt struct {
	Backend string `json:"backend"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	MS      int64  `json:"ms"`
}

// Response is a search's answer: the backend that answered (empty when none
// did), its results (never nil) and every attempt in order.
type Response struct {
	Backend  string    `json:"backend"`
	Results  []Result  `json:"results"`
	Attempts []Attempt `json:"attempts"`
}

// Query is one search.
type Query struct {
	Text string
	Max  int // results wanted; 0: DefaultMaxResults; at most MaxMaxResults
	// Backend overrides the configured choice for this query ("" keeps it).
	Backend string
}

// Failure is a failed attempt or fetch with its safe reason; its message is
// safe to show to an agent or an API client.
type Failure struct {
	Reason string
}

func (f *Failure) Error() string { return f.Reason }

func fail(reason string) error { return &Failure{Reason: reason} }

// ReasonOf returns the reason of a *Failure in err's chain, or "".
func ReasonOf(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return ""
}

// backend is one search provider.
type backend interface {
	name() string
	configured() bool
	search(ctx context.Context, q string, max int) ([]Result, error)
}

// Client searches through the configured chain. It is safe for concurrent use.
type Client struct {
	cfg      Config
	http     *http.Client // provider endpoints: trusted, no redirects, 3 s connect cap
	backends map[string]backend
	clock    molt.Clock
	log      *slog.Logger
}

// New returns a Client on cfg (see Config.Validate; defaults filled in). logger
// may be nil.
func New(cfg Config, logger *slog.Logger) *Client {
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	hc := providerClient(cfg)
	c := &Client{cfg: cfg, http: hc, clock: molt.SystemClock{}, log: logger}
	sx := &searxng{base: cfg.SearXNGURL, http: hc}
	if cfg.SearXNGTransport != nil {
		sx.http = &http.Client{Transport: cfg.SearXNGTransport, CheckRedirect: noRedirects}
		if sx.base == "" {
			// The transport picks the destination (on AWS, the function); the
			// URL only carries the path and query.
			sx.base = searxngTransportBase
		}
	}
	c.backends = map[string]backend{
		BackendSearXNG:    sx,
		BackendDuckDuckGo: &duckduckgo{base: cfg.DuckDuckGoURL, http: hc},
		BackendTinyfish:   &tinyfish{searchURL: cfg.TinyfishSearchURL, key: cfg.TinyfishKey, http: hc},
	}
	return c
}

// searxngTransportBase is the base URL of SearXNG requests when
// Config.SearXNGTransport carries them and no URL is configured.
const searxngTransportBase = "http://searxng.invalid"

// Config returns the client's configuration, defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Close closes the idle provider connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Search runs q through the chain (Config.Chain of q.Backend or the configured
// backend): each backend gets its own timeout, a failure moves on to the next,
// the first answer (results or none) ends the chain. It returns EINVALID for a
// bad query or backend; EUNAVAILABLE with reason search_unavailable and the
// Response as Details when every backend failed; ctx's error when ctx ends
// (nothing further is tried).
func (c *Client) Search(ctx context.Context, q Query) (Response, error) {
	text := strings.TrimSpace(q.Text)
	switch {
	case text == "":
		return Response{}, molt.Invalid("q", "the query is empty")
	case len(text) > MaxQueryLen:
		return Response{}, molt.Invalid("q", "the query is longer than %d bytes", MaxQueryLen)
	case !utf8.ValidString(text):
		return Response{}, molt.Invalid("q", "the query is not valid UTF-8")
	}
	max := q.Max
	if max <= 0 {
		max = DefaultMaxResults
	}
	if max > MaxMaxResults {
		max = MaxMaxResults
	}
	choice := q.Backend
	if choice == "" {
		choice = c.cfg.Backend
	}
	chain, err := c.cfg.Chain(choice)
	if err != nil {
		return Response{}, err
	}
	resp := Response{Results: []Result{}, Attempts: []Attempt{}}
	for _, name := range chain {
		b := c.backends[name]
		if !b.configured() {
			resp.Attempts = append(resp.Attempts, Attempt{Backend: name, Outcome: OutcomeSkipped, Reason: ReasonNotConfigured})
			continue
		}
		start := c.clock.Now()
		results, err := c.attempt(ctx, b, text, max)
		ms := c.clock.Now().Sub(start).Milliseconds()
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		if err != nil {
			reason := ReasonOf(err)
			if reason == "" {
				reason = ReasonConnect
			}
			resp.Attempts = append(resp.Attempts, Attempt{Backend: name, Outcome: OutcomeFailed, Reason: reason, MS: ms})
			c.log.LogAttrs(ctx, slog.LevelWarn, "search backend failed",
				slog.String("backend", name), slog.String("reason", reason), slog.Int64("ms", ms))
			continue
		}
		resp.Attempts = append(resp.Attempts, Attempt{Backend: name, Outcome: OutcomeOK, MS: ms})
		resp.Backend = name
		resp.Results = clean(results, max)
		return resp, nil
	}
	return resp, &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonSearchUnavailable,
		Message: "every search backend failed: " + summary(resp.Attempts), Details: resp}
}

// attempt runs one backend under its own timeout and turns a transport error
// into its reason.
func (c *Client) attempt(ctx context.Context, b backend, q string, max int) ([]Result, error) {
	bctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	results, err := b.search(bctx, q, max)
	if err != nil && ReasonOf(err) == "" {
		err = fail(transportReason(bctx, err))
	}
	return results, err
}

// summary lists the attempts as backend=reason pairs.
func summary(as []Attempt) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		parts = append(parts, a.Backend+"="+a.Reason)
	}
	return strings.Join(parts, ", ")
}

// clean keeps the results with an absolute http(s) URL, trims and bounds their
// text, drops duplicates and keeps at most max. Nothing is invented: a result
// without a title keeps an empty title.
func clean(rs []Result, max int) []Result {
	out := make([]Result, 0, min(len(rs), max))
	seen := map[string]bool{}
	for _, r := range rs {
		u := strings.TrimSpace(r.URL)
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, Result{Title: bound(r.Title, maxTitle), URL: u, Snippet: bound(r.Snippet, maxSnippet)})
		if len(out) == max {
			break
		}
	}
	return out
}

// bound collapses whitespace and keeps at most n runes, marking a cut.
func bound(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
