package search

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// blockedPrefixes are the destinations an agent-supplied URL may never reach.
var blockedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",      // "this network", unspecified
		"10.0.0.0/8",     // private
		"100.64.0.0/10",  // CGNAT (shared address space)
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local, incl. the metadata address 169.254.169.254
		"172.16.0.0/12",  // private
		"192.0.0.0/24",   // IETF protocol assignments (incl. 192.0.0.192 metadata on some clouds)
		"192.168.0.0/16", // private
		"198.18.0.0/15",  // benchmarking
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, broadcast
		"::/128",         // unspecified
		"::1/128",        // loopback
		"64:ff9b:1::/48", // local-use NAT64
		"100::/64",       // discard
		"fc00::/7",       // unique-local, incl. the metadata address fd00:ec2::254
		"fe80::/10",      // link-local
		"fec0::/10",      // deprecated site-local
		"ff00::/8",       // multicast
		"2001:db8::/32",  // documentation
		"2002::/16",      // 6to4: may embed any IPv4 address
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// Public reports whether an agent-supplied URL may reach a. IPv4-mapped and
// IPv4-compatible IPv6 addresses are judged as the IPv4 address they carry;
// NAT64 (64:ff9b::/96) by the embedded IPv4 address.
func Public(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		nat64 := netip.MustParsePrefix("64:ff9b::/96")
		compat := b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[4] == 0 && b[5] == 0 &&
			b[6] == 0 && b[7] == 0 && b[8] == 0 && b[9] == 0 && b[10] == 0 && b[11] == 0
		if nat64.Contains(a) || compat {
			v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
			if compat && v4.Compare(netip.AddrFrom4([4]byte{0, 0, 0, 1})) <= 0 {
				return false // :: and ::1
			}
			return Public(v4)
		}
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return !a.IsUnspecified() && !a.IsLoopback() && !a.IsPrivate() && !a.IsLinkLocalUnicast() &&
		!a.IsLinkLocalMulticast() && !a.IsInterfaceLocalMulticast() && !a.IsMulticast()
}

// errBlocked is the dial guard's refusal.
var errBlocked = &Failure{Reason: ReasonBlockedAddress}

// Resolver resolves a host name; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// guard is the dialer of agent-supplied URLs: it resolves the host, then dials
// each address through a net.Dialer whose Control refuses a non-public address
// at the moment of connecting — the address actually dialled, so a name that
// resolves to a public address when checked and to a private one when dialled
// (DNS rebinding) is still refused.
type guard struct {
	resolver Resolver
	allow    func(netip.Addr) bool // tests: also allow these (loopback servers)
	dialer   *net.Dialer
}

func newGuard(r Resolver, allow func(netip.Addr) bool) *guard {
	if r == nil {
		r = net.DefaultResolver
	}
	g := &guard{resolver: r, allow: allow}
	g.dialer = &net.Dialer{Timeout: connectCap, KeepAlive: 30 * time.Second, Control: g.control}
	return g
}

func (g *guard) permitted(a netip.Addr) bool {
	return Public(a) || (g.allow != nil && g.allow(a.Unmap()))
}

// control runs after the address is chosen and before connect(2).
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !g.permitted(ap.Addr()) {
		return errBlocked
	}
	return nil
}

// DialContext resolves address's host and dials its addresses in turn.
func (g *guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		if errors.Is(err, errBlocked) {
			return nil, err // one non-public address refuses the host
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// lookup returns host's addresses (a literal address as itself).
func (g *guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// checkHost resolves host and reports blocked_address when any of its
// addresses is not public (used before handing a URL to Tinyfish and on the
// URL Tinyfish returns; the dial guard covers native fetches).
func (g *guard) checkHost(ctx context.Context, host string) error {
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return fail(transportReason(ctx, err))
	}
	for _, a := range addrs {
		if !g.permitted(a) {
			return errBlocked
		}
	}
	return nil
}

// GuardedTransport returns an HTTP transport whose every dial goes through
// the dial guard of agent-supplied URLs (no proxy: a proxy would dial past
// it), for other clients of URLs molt's users name: the supervisor's remote
// agents on AWS. A refused dial fails with a *Failure of reason
// blocked_address. allow also permits these addresses (tests: their loopback
// servers); nil permits only public ones.
func GuardedTransport(allow func(netip.Addr) bool) *http.Transport {
	return guardedTransport(newGuard(nil, allow), nil, 0)
}

// guardedTransport is a transport whose every dial goes through g, with no
// proxy (a proxy would dial for us, past the guard); roots, when set, are the
// TLS roots (tests), headerTimeout, when positive, bounds the wait for a
// response's headers.
func guardedTransport(g *guard, roots *x509.CertPool, headerTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		TLSHandshakeTimeout:   connectCap,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
	}
}
