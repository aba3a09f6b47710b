package workspace

import (
	"slices"

	"github.com/molt-dev/molt/internal/molt"
)

// ReasonPrecondition is the ECONFLICT reason of a conditional file write whose
// Match does not hold for the file as stored.
const ReasonPrecondition = "precondition_failed"

// Match is a condition on the stored file a write replaces or deletes (HTTP's
// If-Match and If-None-Match: *). The zero Match always holds. Adapters check
// it inside the write itself, never by a read before it.
type Match struct {
	// Exists requires the file to exist (If-Match: *).
	Exists bool
	// SHA256, when not empty, requires the file to exist with one of these
	// hashes (If-Match: "<sha256>", …).
	SHA256 []string
	// Absent requires the file not to exist (If-None-Match: *).
	Absent bool
}

// IsZero reports whether m is no condition at all.
func (m Match) IsZero() bool { return !m.Exists && len(m.SHA256) == 0 && !m.Absent }

// Holds reports whether m holds for a file that exists with hash sha, or does
// not exist.
func (m Match) Holds(exists bool, sha string) bool {
	switch {
	case m.Absent && exists:
		return false
	case (m.Exists || len(m.SHA256) > 0) && !exists:
		return false
	case len(m.SHA256) > 0 && !slices.Contains(m.SHA256, sha):
		return false
	}
	return true
}

// PreconditionFailed is the error of a write whose Match does not hold:
// ECONFLICT with reason ReasonPrecondition.
func PreconditionFailed(ws, path string) error {
	return molt.Conflict(ReasonPrecondition, "file %s of %s is not as the condition requires", path, ws)
}
