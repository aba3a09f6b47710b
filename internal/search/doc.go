// Package search gives agents bounded, honest web search and fetch.
//
// Client.Search tries a chain of backends (SearXNG, Tinyfish, DuckDuckGo's HTML
// endpoint; see Config.Chain), each under its own timeout, and stops at the
// first that answers. An empty answer is a success; an outage (SearXNG with
// every engine down, DuckDuckGo's anomaly page) is not, and no result is ever
// made up. Every attempt is reported with a safe reason code (the Reason*
// constants) that never carries a response body or a credential.
//
// Fetcher.Fetch reads one public document for an agent. Addresses an agent or
// a search result supplies are untrusted: the guard runs at dial time on the
// resolved address (so DNS rebinding does not pass) and refuses loopback,
// private, link-local, unique-local, CGNAT, multicast, cloud metadata and
// unspecified addresses, for the URL and for every redirect hop. Provider
// endpoints the operator configures are trusted and dialled without the
// guard (they may be on loopback, e.g. `molt serve --searxng`).
package search
