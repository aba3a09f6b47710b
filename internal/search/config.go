package search

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvBackend        = "MOLT_SEARCH_BACKEND"         // auto (default), searxng, duckduckgo, tinyfish
	EnvSearXNGURL     = "MOLT_SEARXNG_URL"            // base URL of a SearXNG JSON API
	EnvDuckDuckGoURL  = "MOLT_DUCKDUCKGO_URL"         // default DefaultDuckDuckGoURL
	EnvTinyfishKey    = "TINYFISH_API_KEY"            // enables Tinyfish search and fetch fallback
	EnvTinyfishSearch = "MOLT_TINYFISH_SEARCH_URL"    // default DefaultTinyfishSearchURL
	EnvTinyfishFetch  = "MOLT_TINYFISH_FETCH_URL"     // default DefaultTinyfishFetchURL
	EnvTimeout        = "MOLT_SEARCH_TIMEOUT_SECONDS" // per backend, 1–60, default 15
	EnvFetchAllowHTTP = "MOLT_FETCH_ALLOW_HTTP"       // "true": web_fetch may read http:// URLs
)

// Provider defaults.
const (
	DefaultDuckDuckGoURL     = "https://html.duckduckgo.com/html/"
	DefaultTinyfishSearchURL = "https://api.search.tinyfish.ai"
	DefaultTinyfishFetchURL  = "https://api.fetch.tinyfish.ai"
	DefaultTimeout           = 15 * time.Second
	MinTimeout               = time.Second
	MaxTimeout               = 60 * time.Second
)

// Config configures search and fetch. The provider URLs are the operator's and
// trusted (they may be on loopback); nothing an agent supplies reaches them
// except the query or the URL to fetch.
type Config struct {
	Backend           string        // BackendAuto ("" too), BackendSearXNG, BackendDuckDuckGo, BackendTinyfish
	SearXNGURL        string        // "" leaves SearXNG out (skipped in auto)
	DuckDuckGoURL     string        // "" is DefaultDuckDuckGoURL
	TinyfishKey       string        // "" leaves Tinyfish out; never logged
	TinyfishSearchURL string        // "" is DefaultTinyfishSearchURL
	TinyfishFetchURL  string        // "" is DefaultTinyfishFetchURL
	Timeout           time.Duration // per backend (and per fetch); 0 is DefaultTimeout
	// FetchAllowHTTP lets web_fetch read http:// URLs (the guard still applies).
	FetchAllowHTTP bool
	// SearXNGTransport, when set, carries the SearXNG requests instead of the
	// network (on AWS: the SearXNG function invoked through the Lambda API).
	SearXNGTransport http.RoundTripper

	envErr error
}

// ConfigFromEnv reads the configuration from environ (os.Environ()); a
// malformed value is reported by Validate.
func ConfigFromEnv(environ []string) Config {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	c := Config{
		Backend:           strings.ToLower(strings.TrimSpace(env[EnvBackend])),
		SearXNGURL:        strings.TrimSpace(env[EnvSearXNGURL]),
		DuckDuckGoURL:     strings.TrimSpace(env[EnvDuckDuckGoURL]),
		TinyfishKey:       strings.TrimSpace(env[EnvTinyfishKey]),
		TinyfishSearchURL: strings.TrimSpace(env[EnvTinyfishSearch]),
		TinyfishFetchURL:  strings.TrimSpace(env[EnvTinyfishFetch]),
	}
	if v := strings.TrimSpace(env[EnvTimeout]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 60 {
			c.envErr = molt.Invalid(EnvTimeout, "%s must be a whole number of seconds from 1 to 60", EnvTimeout)
		} else {
			c.Timeout = time.Duration(n) * time.Second
		}
	}
	if v := strings.TrimSpace(env[EnvFetchAllowHTTP]); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			c.envErr = molt.Invalid(EnvFetchAllowHTTP, "%s must be true or false", EnvFetchAllowHTTP)
		}
		c.FetchAllowHTTP = b
	}
	return c
}

func (c Config) withDefaults() Config {
	if c.Backend == "" {
		c.Backend = BackendAuto
	}
	if c.DuckDuckGoURL == "" {
		c.DuckDuckGoURL = DefaultDuckDuckGoURL
	}
	if c.TinyfishSearchURL == "" {
		c.TinyfishSearchURL = DefaultTinyfishSearchURL
	}
	if c.TinyfishFetchURL == "" {
		c.TinyfishFetchURL = DefaultTinyfishFetchURL
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// Validate returns EINVALID naming the bad setting: an unknown backend, an
// explicit backend without its URL or key, a URL that is not absolute http(s),
// a timeout outside 1–60 s.
func (c Config) Validate() error {
	if c.envErr != nil {
		return c.envErr
	}
	c = c.withDefaults()
	if _, err := c.Chain(c.Backend); err != nil {
		var me *molt.Error
		if errors.As(err, &me) {
			me.Field = EnvBackend
		}
		return err
	}
	if c.Timeout < MinTimeout || c.Timeout > MaxTimeout {
		return molt.Invalid(EnvTimeout, "%s must be from 1 to 60 seconds", EnvTimeout)
	}
	for _, u := range []struct{ env, v string }{
		{EnvSearXNGURL, c.SearXNGURL}, {EnvDuckDuckGoURL, c.DuckDuckGoURL},
		{EnvTinyfishSearch, c.TinyfishSearchURL}, {EnvTinyfishFetch, c.TinyfishFetchURL},
	} {
		if u.v == "" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
			return molt.Invalid(u.env, "%s must be an absolute http(s) URL without credentials", u.env)
		}
	}
	return nil
}

// Chain returns the backends tried for choice, in order: auto is SearXNG then
// DuckDuckGo, or SearXNG, Tinyfish, DuckDuckGo with a Tinyfish key; an explicit
// searxng or duckduckgo is followed by Tinyfish when it has a key; tinyfish is
// Tinyfish alone. EINVALID for an unknown choice, for tinyfish without a key
// and for searxng without a URL.
func (c Config) Chain(choice string) ([]string, error) {
	tf := c.TinyfishKey != ""
	switch choice {
	case "", BackendAuto:
		if tf {
			return []string{BackendSearXNG, BackendTinyfish, BackendDuckDuckGo}, nil
		}
		return []string{BackendSearXNG, BackendDuckDuckGo}, nil
	case BackendSearXNG, BackendDuckDuckGo:
		if choice == BackendSearXNG && c.SearXNGURL == "" && c.SearXNGTransport == nil {
			return nil, molt.Invalid("backend", "backend searxng needs %s", EnvSearXNGURL)
		}
		if tf {
			return []string{choice, BackendTinyfish}, nil
		}
		return []string{choice}, nil
	case BackendTinyfish:
		if !tf {
			return nil, molt.Invalid("backend", "backend tinyfish needs %s", EnvTinyfishKey)
		}
		return []string{BackendTinyfish}, nil
	}
	return nil, molt.Invalid("backend", "backend must be auto, searxng, duckduckgo or tinyfish")
}
