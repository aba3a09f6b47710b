package search

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// noRedirects makes a client return a redirect as the answer: a provider's
// redirect is refused (redirect_refused), never followed.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// providerClient is the client of the operator's provider endpoints: verified
// TLS (the system roots), the environment's proxy, a 3 s cap on connecting and
// on the TLS handshake, no redirects. Timeouts per request come from the
// request's context.
func providerClient(cfg Config) *http.Client {
	d := &net.Dialer{Timeout: connectCap, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   connectCap,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       60 * time.Second,
		ResponseHeaderTimeout: cfg.withDefaults().Timeout,
	}
	return &http.Client{Transport: tr, CheckRedirect: noRedirects}
}

// transportReason names a transport failure of a request made under ctx (the
// attempt's own context): its timeout, a DNS failure, a certificate that did
// not verify, or no connection.
func transportReason(ctx context.Context, err error) string {
	if r := ReasonOf(err); r != "" {
		return r
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ReasonTimeout
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return ReasonDNS
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) {
		return ReasonTLS
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return ReasonConnect
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ReasonTimeout
	}
	return ReasonConnect
}

// readBounded reads at most max bytes of r; more is too_large. A read that
// fails (the timeout passing mid-body) is a transport failure.
func readBounded(ctx context.Context, r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fail(transportReason(ctx, err))
	}
	if int64(len(b)) > max {
		return nil, fail(ReasonTooLarge)
	}
	return b, nil
}

// statusReason is the reason of a provider answer that is not 200: a redirect
// is refused, anything else is its status.
func statusReason(status int) string {
	if status >= 300 && status < 400 {
		return ReasonRedirectRefused
	}
	return HTTPReason(status)
}

// do sends req and returns the answer when it is 200 with its body read
// (bounded by max); otherwise the reason. onStatus may claim a status first
// (SearXNG's 403, DuckDuckGo's 202).
func do(hc *http.Client, req *http.Request, max int64, onStatus func(int) string) ([]byte, *http.Response, error) {
	ctx := req.Context()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fail(transportReason(ctx, err))
	}
	defer resp.Body.Close()
	if onStatus != nil {
		if r := onStatus(resp.StatusCode); r != "" {
			return nil, resp, fail(r)
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp, fail(statusReason(resp.StatusCode))
	}
	if resp.ContentLength > max {
		return nil, resp, fail(ReasonTooLarge)
	}
	b, err := readBounded(ctx, resp.Body, max)
	return b, resp, err
}
