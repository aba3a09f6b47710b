// Package console is molt's web console: a page of plain ES modules, embedded in
// the binary, that drives the UI API from a browser (chat, the evolution review,
// files, settings and tokens). internal/httpapi serves it at GET / and /assets/…, so
// `molt serve` and the api Lambda serve the same bytes.
//
// The assets are written by hand and committed: there is no build step, no npm and
// no bundler, so `make build` embeds exactly what is in assets/. Each asset is served
// under a name that carries the first 12 hex digits of its SHA-256
// (app.3f2a….js), immutable for a year; imports between modules and the
// references of index.html are rewritten to those names when the package loads, so
// a change to any module changes the names of everything that imports it. The index
// itself is no-cache.
//
// Every response carries a strict Content-Security-Policy (no inline script or
// style, no framing, connections only to the page's own origin), X-Frame-Options
// DENY and Referrer-Policy no-referrer. The page keeps the bearer token the user
// pastes in sessionStorage — never a cookie, never a URL — and sends it as an
// Authorization header; signing out removes it.
package console
