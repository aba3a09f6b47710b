// Package blob is the port for artifacts (patches, transcripts, snapshots,
// archives): S3 on AWS (internal/s3blob), a folder on disk in process
// (internal/dirblob).
package blob

import (
	"context"
	"regexp"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
)

// Store keeps blobs by key.
type Store interface {
	// Put writes data at key, replacing what was there.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes data at key only when nothing is there; ECONFLICT
	// (reason "exists") otherwise. Snapshots use it so a resume never overwrites
	// the first one.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Get returns ENOTFOUND when absent.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key; deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys under prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// MaxBlob is the largest blob accepted (bytes).
const MaxBlob = 64 << 20

var keyRe = regexp.MustCompile(`^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$`)

// ValidateKey returns EINVALID unless key is a relative, slash-separated key with
// no empty, "." or ".." segments (so a folder adapter can never escape its root).
func ValidateKey(key string) error {
	if key == "" || len(key) > 900 || !keyRe.MatchString(key) {
		return molt.Invalid("key", "blob key %q is not valid", key)
	}
	for _, s := range strings.Split(key, "/") {
		if s == "." || s == ".." {
			return molt.Invalid("key", "blob key %q escapes its root", key)
		}
	}
	return nil
}

// ValidatePrefix is ValidateKey for list prefixes; "" (everything) and a trailing
// slash are allowed.
func ValidatePrefix(prefix string) error {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return nil
	}
	return ValidateKey(p)
}
