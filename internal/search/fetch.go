package search

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Fetch limits.
const (
	MaxFetchBody     = 5 << 20 // bytes of a fetched document
	MaxFetchText     = 100_000 // runes of text handed to the agent
	MaxRedirects     = 5
	MaxFetchURLBytes = 2048
)

// Fetch channels.
const (
	ViaNative   = "native"
	ViaTinyfish = "tinyfish"
)

// Document is a fetched document reduced to text.
type Document struct {
	URL         string `json:"url"` // after redirects
	Title       string `json:"title,omitempty"`
	ContentType string `json:"content_type"`
	Text        string `json:"text"`
	Truncated   bool   `json:"truncated,omitempty"`
	Via         string `json:"via"`
}

// Fetcher reads public documents for agents (web_fetch). It is safe for
// concurrent use.
type Fetcher struct {
	cfg      Config
	guard    *guard
	client   *http.Client // agent-supplied URLs: the dial guard, bounded redirects
	provider *http.Client // the operator's Tinyfish endpoint: trusted
	log      *slog.Logger
}

// FetchOptions are test hooks of a Fetcher; the zero value is production.
type FetchOptions struct {
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver Resolver
	// Allow also permits these addresses (tests: their loopback servers).
	Allow func(netip.Addr) bool
	// RootCAs verifies servers' certificates (default: the system roots).
	RootCAs *x509.CertPool
}

// NewFetcher returns a Fetcher on cfg; logger may be nil.
func NewFetcher(cfg Config, logger *slog.Logger, o FetchOptions) *Fetcher {
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	g := newGuard(o.Resolver, o.Allow)
	tr := guardedTransport(g, o.RootCAs, cfg.Timeout)
	f := &Fetcher{cfg: cfg, guard: g, provider: providerClient(cfg), log: logger}
	f.client = &http.Client{Transport: tr, CheckRedirect: f.checkRedirect}
	return f
}

// Close closes idle connections.
func (f *Fetcher) Close() {
	f.client.CloseIdleConnections()
	f.provider.CloseIdleConnections()
}

// checkRedirect bounds the hops and applies the scheme rule to each; the dial
// guard checks each hop's address.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fail(ReasonRedirectLimit)
	}
	if err := f.checkScheme(req.URL); err != nil {
		return err
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fail(ReasonSchemeRefused) // no downgrade
	}
	return nil
}

func (f *Fetcher) checkScheme(u *url.URL) error {
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && f.cfg.FetchAllowHTTP:
		return nil
	case u.Scheme == "http":
		return fail(ReasonSchemeRefused)
	}
	return fail(ReasonInvalidURL)
}

// parseTarget checks an agent-supplied URL's form.
func (f *Fetcher) parseTarget(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxFetchURLBytes {
		return nil, fail(ReasonInvalidURL)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return nil, fail(ReasonInvalidURL)
	}
	if err := f.checkScheme(u); err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && !f.guard.permitted(a) {
		return nil, errBlocked
	}
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return nil, errBlocked
	}
	u.Fragment = ""
	return u, nil
}

// Fetch reads rawURL (an agent's or a search result's) and returns its text.
// Errors are *Failure with a safe reason (or ctx's error when ctx ends):
// invalid_url, scheme_refused, blocked_address (the URL, a redirect hop or
// the address a name resolved to at dial time is not public), redirect_limit,
// http_<status>, unsupported_type, too_large, timeout, connect, dns, tls. With
// a Tinyfish key a failed native fetch of an https URL whose host resolves
// only to public addresses is retried at once through Tinyfish fetch — never
// for blocked addresses, size refusals or cancellation.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (Document, error) {
	u, err := f.parseTarget(rawURL)
	if err != nil {
		return Document{}, err
	}
	doc, err := f.native(ctx, u)
	if err == nil || ctx.Err() != nil {
		if ctx.Err() != nil {
			return Document{}, ctx.Err()
		}
		return doc, nil
	}
	reason := ReasonOf(err)
	if f.cfg.TinyfishKey == "" || u.Scheme != "https" || !fallbackable(reason) {
		return Document{}, err
	}
	if cerr := f.guard.checkHost(ctx, u.Hostname()); cerr != nil {
		return Document{}, err // not known public: nothing goes to Tinyfish
	}
	f.log.LogAttrs(ctx, slog.LevelInfo, "native fetch failed, trying tinyfish", slog.String("reason", reason))
	tdoc, terr := f.tinyfish(ctx, u)
	if terr != nil {
		if ctx.Err() != nil {
			return Document{}, ctx.Err()
		}
		f.log.LogAttrs(ctx, slog.LevelWarn, "tinyfish fetch failed", slog.String("reason", ReasonOf(terr)))
		return Document{}, err // the native reason is the document's
	}
	return tdoc, nil
}

// fallbackable reports whether a native failure may go to Tinyfish.
func fallbackable(reason string) bool {
	switch reason {
	case ReasonBlockedAddress, ReasonTooLarge, ReasonInvalidURL, ReasonSchemeRefused, "":
		return false
	}
	return true
}

func (f *Fetcher) native(ctx context.Context, u *url.URL) (Document, error) {
	fctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return Document{}, fail(ReasonInvalidURL)
	}
	req.Header.Set("Accept", "text/html, text/plain;q=0.9, text/markdown;q=0.9, application/xhtml+xml, application/json;q=0.8, */*;q=0.1")
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; molt web_fetch)")
	resp, err := f.client.Do(req)
	if err != nil {
		if r := ReasonOf(err); r != "" {
			return Document{}, fail(r)
		}
		return Document{}, fail(transportReason(fctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Document{}, fail(HTTPReason(resp.StatusCode))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	kind := textKind(ct)
	if kind == "" {
		return Document{}, fail(ReasonUnsupportedType)
	}
	if resp.ContentLength > MaxFetchBody {
		return Document{}, fail(ReasonTooLarge)
	}
	body, err := readBounded(fctx, resp.Body, MaxFetchBody)
	if err != nil {
		return Document{}, err
	}
	doc := Document{URL: resp.Request.URL.String(), ContentType: ct, Via: ViaNative}
	if kind == "html" {
		doc.Title, doc.Text = htmlText(body)
	} else {
		doc.Text = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	doc.Text, doc.Truncated = truncate(doc.Text, MaxFetchText)
	return doc, nil
}

func (f *Fetcher) tinyfish(ctx context.Context, u *url.URL) (Document, error) {
	tctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	d, err := tinyfishFetch(tctx, f.provider, f.cfg.TinyfishFetchURL, f.cfg.TinyfishKey, u.String(), MaxFetchBody)
	if err != nil {
		if ReasonOf(err) == "" {
			err = fail(transportReason(tctx, err))
		}
		return Document{}, err
	}
	final := u.String()
	if d.URL != "" {
		// The URL Tinyfish says it read must be as public as the one asked for.
		ru, perr := f.parseTarget(d.URL)
		if perr != nil || ru.Scheme != "https" {
			return Document{}, errBlocked
		}
		if err := f.guard.checkHost(tctx, ru.Hostname()); err != nil {
			return Document{}, errBlocked
		}
		final = ru.String()
	}
	text, cut := truncate(strings.ToValidUTF8(d.Text, "\uFFFD"), MaxFetchText)
	return Document{URL: final, Title: bound(d.Title, maxTitle), ContentType: "text/markdown", Text: text, Truncated: cut, Via: ViaTinyfish}, nil
}

// textKind sorts a media type: "html", "text" or "" (refused).
func textKind(ct string) string {
	switch {
	case ct == "text/html" || ct == "application/xhtml+xml":
		return "html"
	case strings.HasPrefix(ct, "text/"), ct == "application/json", ct == "application/xml",
		strings.HasSuffix(ct, "+json"), strings.HasSuffix(ct, "+xml"):
		return "text"
	}
	return ""
}

// truncate keeps at most n runes of s.
func truncate(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	return string([]rune(s)[:n]), true
}

// IsFailure reports whether err is a search or fetch failure (not a bug).
func IsFailure(err error) bool {
	var f *Failure
	return errors.As(err, &f)
}
