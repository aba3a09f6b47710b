// Package buildinfo carries the version and git SHA stamped at build time:
//
//	go build -ldflags "-X github.com/molt-dev/molt/internal/buildinfo.Version=v1.2.3 \
//	  -X github.com/molt-dev/molt/internal/buildinfo.SHA=abc123"
package buildinfo

// Stamped by the linker; "dev"/"unknown" in an unstamped build.
var (
	Version = "dev"
	SHA     = "unknown"
)
