package search_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/search"
)

// TestGuardedTransport: a client on the guarded transport cannot reach a
// loopback server unless the test allows loopback explicitly.
func TestGuardedTransport(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, target := range []string{srv.URL, "http://localhost:" + port,
		"http://169.254.169.254/latest/meta-data/", "http://[::1]:9/"} {
		c := &http.Client{Transport: search.GuardedTransport(nil), Timeout: 5 * time.Second}
		_, err := c.Get(target)
		var f *search.Failure
		if !errors.As(err, &f) || f.Reason != search.ReasonBlockedAddress {
			t.Errorf("GET %s: %v; want blocked_address", target, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times through the guard", n)
	}
	c := &http.Client{Transport: search.GuardedTransport(func(a netip.Addr) bool { return a.IsLoopback() })}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("loopback allowed explicitly: %v", err)
	}
	resp.Body.Close()
	if n := hits.Load(); n != 1 {
		t.Errorf("hits = %d, want 1", n)
	}
}
