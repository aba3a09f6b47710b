package search_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/search"
)

// resolver answers from a table; a host with several answers gives them in
// turn (the last one repeats), which is how a rebinding name behaves.
type resolver struct {
	mu    sync.Mutex
	hosts map[string][]string
	calls map[string]int
}

func (r *resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	i := min(r.calls[host], len(answers)-1)
	r.calls[host]++
	return []netip.Addr{netip.MustParseAddr(answers[i])}, nil
}

// fetchEnv is a TLS document server on loopback, a Tinyfish fetch fake, and
// a resolver that maps test names onto them.
type fetchEnv struct {
	doc      *httptest.Server
	port     string
	tf       *provider
	tfBodies chan map[string]any
	res      *resolver
	hits     atomic.Int32
}

func setupFetch(t *testing.T, mux func(*http.ServeMux)) *fetchEnv {
	t.Helper()
	e := &fetchEnv{tfBodies: make(chan map[string]any, 4)}
	m := http.NewServeMux()
	mux(m)
	e.doc = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(e.doc.Close)
	_, e.port, _ = net.SplitHostPort(e.doc.Listener.Addr().String())
	e.tf = serve(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method != http.MethodPost || r.Header.Get("X-API-Key") != testKey || json.NewDecoder(r.Body).Decode(&body) != nil {
			t.Errorf("tinyfish fetch got %s key %q", r.Method, r.Header.Get("X-API-Key"))
		}
		e.tfBodies <- body
		u := body["urls"].([]any)[0].(string)
		reply(200, "application/json", []byte(`{"results":[{"url":"`+u+`","title":"Via Tinyfish","text":"# Doc\n\nRendered by Tinyfish."}],"errors":[]}`))(w, r)
	})
	// example.com is in httptest's certificate.
	e.res = &resolver{hosts: map[string][]string{
		"example.com":        {"127.0.0.1"},
		"private.example":    {"10.0.0.5"},
		"metadata.example":   {"169.254.169.254"},
		"v6private.example":  {"fd00:ec2::254"},
		"cgnat.example":      {"100.64.1.2"},
		"rebind.example.com": {"127.0.0.1", "10.1.2.3"},
	}}
	return e
}

// fetcher trusts the loopback document server (as a public one) when
// loopbackOK, and has a Tinyfish key when tinyfish.
func (e *fetchEnv) fetcher(loopbackOK, tinyfish bool) *search.Fetcher {
	cfg := search.Config{Timeout: 2 * time.Second, FetchAllowHTTP: true}
	if tinyfish {
		cfg.TinyfishKey, cfg.TinyfishFetchURL = testKey, e.tf.URL
	}
	o := search.FetchOptions{Resolver: e.res, RootCAs: certPool(e.doc)}
	if loopbackOK {
		o.Allow = func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }
	}
	return search.NewFetcher(cfg, nil, o)
}

func (e *fetchEnv) url(host, path string) string { return "https://" + host + ":" + e.port + path }

func certPool(s *httptest.Server) *x509.CertPool {
	return s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

func TestPublicAddressClasses(t *testing.T) {
	t.Parallel()
	for _, a := range []string{
		"127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.5.4", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.254", "224.0.0.1", "239.1.1.1",
		"0.0.0.0", "0.1.2.3", "255.255.255.255", "::", "::1", "fe80::1", "fc00::1", "fd00:ec2::254",
		"ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe",
		"::127.0.0.1",
	} {
		if search.Public(netip.MustParseAddr(a)) {
			t.Errorf("%s is public, want refused", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8"} {
		if !search.Public(netip.MustParseAddr(a)) {
			t.Errorf("%s refused, want public", a)
		}
	}
}

func TestFetchReadsHTML(t *testing.T) {
	t.Parallel()
	e := setupFetch(t, func(m *http.ServeMux) {
		m.HandleFunc("/doc", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(`<!doctype html><html><head><title>The Doc</title><style>p{color:red}</style>
<script>var secret = "do not read";</script></head><body><nav>Home | About</nav>
<h1>Heading</h1><p>First <b>para</b>graph.</p><ul><li>one</li><li>two</li></ul></body></html>`))
		})
		m.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/doc", http.StatusFound) })
		m.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("just text"))
		})
	})
	f := e.fetcher(true, false)
	d, err := f.Fetch(context.Background(), e.url("example.com", "/moved#frag"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "The Doc" || d.Text != "# Heading\nFirst paragraph.\n- one\n- two" || d.Via != "native" || !strings.HasSuffix(d.URL, "/doc") {
		t.Fatalf("doc %+v", d)
	}
	if d, err := f.Fetch(context.Background(), e.url("example.com", "/plain")); err != nil || d.Text != "just text" {
		t.Fatalf("plain: %+v, %v", d, err)
	}
}

// TestFetchRefusesUnsafeAddresses: every non-public destination is refused,
// literal or resolved, before any byte reaches it; with a Tinyfish key none of
// them goes to Tinyfish either.
func TestFetchRefusesUnsafeAddresses(t *testing.T) {
	t.Parallel()
	e := setupFetch(t, func(m *http.ServeMux) {
		m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("secret")) })
	})
	f := e.fetcher(false, true)
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://127.0.0.1/",
		"http://[::1]/",
		"https://[fd00:ec2::254]/",
		"http://0.0.0.0/",
		"http://localhost/",
		"https://private.example/",
		"https://metadata.example/",
		"https://v6private.example/",
		"https://cgnat.example/",
		e.url("example.com", "/"), // a public-looking name resolving to 127.0.0.1: refused at dial time
		"https://" + e.doc.Listener.Addr().String() + "/",
	} {
		_, err := f.Fetch(context.Background(), u)
		if search.ReasonOf(err) != search.ReasonBlockedAddress {
			t.Errorf("%s: %v, want blocked_address", u, err)
		}
	}
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests", n)
	}
	if n := e.tf.calls.Load(); n != 0 {
		t.Fatalf("tinyfish got %d unsafe URLs", n)
	}
}

// TestFetchRedirectToPrivate: a redirect hop to a private address is refused
// at its dial, like the first URL.
func TestFetchRedirectToPrivate(t *testing.T) {
	t.Parallel()
	var e *fetchEnv
	e = setupFetch(t, func(m *http.ServeMux) {
		m.HandleFunc("/go", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, e.url("private.example", "/admin"), http.StatusFound)
		})
		m.HandleFunc("/meta", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://169.254.169.254/latest/meta-data/", http.StatusFound)
		})
		m.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
		m.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://example.com/", http.StatusFound)
		})
	})
	f := e.fetcher(true, false)
	for path, want := range map[string]string{"/go": "blocked_address", "/meta": "blocked_address", "/loop": "redirect_limit", "/down": "scheme_refused"} {
		if _, err := f.Fetch(context.Background(), e.url("example.com", path)); search.ReasonOf(err) != want {
			t.Errorf("%s: %v, want %s", path, err, want)
		}
	}
}

// TestFetchRebinding: a name checked at each dial; once it answers a private
// address it is refused, although the same name was fetched a moment before.
func TestFetchRebinding(t *testing.T) {
	t.Parallel()
	e := setupFetch(t, func(m *http.ServeMux) {
		m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("hello"))
		})
	})
	// httptest's certificate names example.com and *.example.com.
	f := e.fetcher(true, false)
	if d, err := f.Fetch(context.Background(), e.url("rebind.example.com", "/")); err != nil || d.Text != "hello" {
		t.Fatalf("first fetch: %+v, %v", d, err)
	}
	f.Close() // no kept-alive connection: the next fetch dials again
	if _, err := f.Fetch(context.Background(), e.url("rebind.example.com", "/")); search.ReasonOf(err) != search.ReasonBlockedAddress {
		t.Fatalf("after rebinding: %v, want blocked_address", err)
	}
}

func TestFetchBoundsAndTypes(t *testing.T) {
	t.Parallel()
	e := setupFetch(t, func(m *http.ServeMux) {
		m.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			chunk := []byte(strings.Repeat("a", 1<<16))
			for i := 0; i < search.MaxFetchBody/len(chunk)+2; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		m.HandleFunc("/png", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG"))
		})
		m.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})
	})
	f := e.fetcher(true, true) // a key: none of these may reach Tinyfish
	if _, err := f.Fetch(context.Background(), e.url("example.com", "/big")); search.ReasonOf(err) != search.ReasonTooLarge {
		t.Errorf("big: %v, want too_large", err)
	}
	if n := e.tf.calls.Load(); n != 0 {
		t.Errorf("a size refusal went to tinyfish")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	if _, err := f.Fetch(ctx, e.url("example.com", "/slow")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if n := e.tf.calls.Load(); n != 0 {
		t.Errorf("a cancelled fetch went to tinyfish")
	}
	plain := e.fetcher(true, false)
	if _, err := plain.Fetch(context.Background(), e.url("example.com", "/png")); search.ReasonOf(err) != search.ReasonUnsupportedType {
		t.Errorf("png: %v, want unsupported_type", err)
	}
	if _, err := plain.Fetch(context.Background(), e.url("example.com", "/slow")); search.ReasonOf(err) != search.ReasonTimeout {
		t.Errorf("slow: %v, want timeout", err)
	}
	strict := search.NewFetcher(search.Config{}, nil, search.FetchOptions{Resolver: e.res})
	for u, want := range map[string]string{
		"http://example.com/":                            "scheme_refused",
		"ftp://example.com/":                             "invalid_url",
		"https://user:pw@example.com/":                   "invalid_url",
		"/relative":                                      "invalid_url",
		"https://" + strings.Repeat("a", 3000) + ".com/": "invalid_url",
	} {
		if _, err := strict.Fetch(context.Background(), u); search.ReasonOf(err) != want {
			t.Errorf("%.40s: %v, want %s", u, err, want)
		}
	}
}

// TestFetchTinyfishFallback: a public HTTPS document the native fetch cannot
// read (here a 403) is fetched through Tinyfish at once, with its wire format.
func TestFetchTinyfishFallback(t *testing.T) {
	t.Parallel()
	e := setupFetch(t, func(m *http.ServeMux) {
		m.HandleFunc("/blocked", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bots go away", http.StatusForbidden) })
	})
	u := e.url("example.com", "/blocked")
	if _, err := e.fetcher(true, false).Fetch(context.Background(), u); search.ReasonOf(err) != "http_403" {
		t.Fatalf("without a key: %v, want http_403", err)
	}
	d, err := e.fetcher(true, true).Fetch(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if d.Via != "tinyfish" || d.Text != "# Doc\n\nRendered by Tinyfish." || d.Title != "Via Tinyfish" {
		t.Fatalf("doc %+v", d)
	}
	body := <-e.tfBodies
	if body["format"] != "markdown" || len(body["urls"].([]any)) != 1 || body["urls"].([]any)[0] != u {
		t.Fatalf("tinyfish body %v", body)
	}
	if _, err := url.Parse(d.URL); err != nil {
		t.Fatal(err)
	}
}
