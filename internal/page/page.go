// Package page is cursor pagination shared by every listing: newest first, with an
// opaque cursor that stays valid (and skips nothing, repeats nothing) while new items
// are inserted concurrently, because listings sort by time-ordered keys and a new
// key always sorts above every cursor taken before it.
package page

import (
	"encoding/base64"

	"github.com/molt-dev/molt/internal/molt"
)

// Default and maximum page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Query asks for one page. Cursor is "" for the first page.
type Query struct {
	Cursor string
	Limit  int
}

// Page is one page of results, newest first. Next is "" on the last page.
type Page[T any] struct {
	Items []T
	Next  string
}

// Normalize returns the query with Limit clamped to [1, MaxLimit] (0 → DefaultLimit)
// and the cursor decoded to the sort key it stands for.
// It returns an EINVALID error naming "cursor" or "limit" for bad input.
func (q Query) Normalize() (limit int, after string, err error) {
	limit = q.Limit
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return 0, "", molt.Invalid("limit", "limit must be between 1 and %d", MaxLimit)
	}
	if q.Cursor == "" {
		return limit, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(raw) == 0 || len(raw) > 512 {
		return 0, "", molt.Invalid("cursor", "malformed cursor")
	}
	return limit, string(raw), nil
}

// Cursor encodes the sort key of the last item of a page as an opaque cursor.
func Cursor(sortKey string) string {
	if sortKey == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(sortKey))
}
