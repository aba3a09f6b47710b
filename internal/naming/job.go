package naming

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// Statuses of a naming job (work.KindNaming) beyond the protocol's pending
// and running.
const (
	// StatusDone: the final write saved the title (SaveTitle) in the same
	// write that ended the job.
	StatusDone work.Status = "done"
	// StatusFailed: the job ended without a title, the session's title kept;
	// Reason is one of the Reason* codes. Written by the final write, or by
	// Prepare for a pending job that can no longer run.
	StatusFailed work.Status = "failed"
	// work.StatusTimeout: the tick found the job's heartbeat stale with its
	// attempts spent (its workers kept dying).
)

// Reasons a naming job failed: safe categories, nothing the provider said.
const (
	ReasonTimeout       = "timeout"        // the job's timeout ran out (provider retries included)
	ReasonProviderError = "provider_error" // the model failed
	ReasonInvalidOutput = "invalid_output" // the answer was no usable title
	ReasonStale         = "stale"          // the session changed: gone, re-created, renamed by hand, titled meanwhile
	ReasonSuperseded    = "superseded"     // always mode: a newer job was asked for
	ReasonDisabled      = "disabled"       // naming.mode is disabled for the session's workspace
)

// Data is a naming job's data: which session (and which incarnation of its
// id) and which message sequence it names.
type Data struct {
	SessionID string    `json:"session_id"`
	Created   time.Time `json:"session_created"`
	// Seq is the seq of the session's last message when the job was asked for.
	Seq int `json:"seq"`
	// ByHand: asked for with POST /api/sessions/{id}/name; it may replace an
	// automatic title in once mode (never a manual one).
	ByHand bool   `json:"by_hand,omitempty"`
	Title  string `json:"title,omitempty"` // the title the job saved (done)
}

// ParseData decodes a job's data; EINVALID when it is not a naming job's.
func ParseData(b []byte) (Data, error) {
	var d Data
	if err := json.Unmarshal(b, &d); err != nil || d.SessionID == "" || d.Seq < 1 || d.Created.IsZero() {
		return Data{}, molt.Invalid("data", "not a naming job's data")
	}
	return d, nil
}

func (d Data) encode() []byte {
	b, _ := json.Marshal(d)
	return b
}

// JobID is the id of the naming job of session id, created at created, for
// its messages up to seq: one job per session and sequence, so a duplicate
// request is refused by the create's condition, and a session re-created under
// the same id never meets its predecessor's jobs.
// A session id too long to leave room is replaced by a digest of it.
func JobID(id string, created time.Time, seq int) string {
	out := fmt.Sprintf("%s.%d.%d", id, created.UnixNano(), seq)
	if len(out) > work.MaxIDLen {
		sum := sha256.Sum256([]byte(id))
		out = fmt.Sprintf("h%x.%d.%d", sum[:16], created.UnixNano(), seq)
	}
	return out
}

// LockKey is the lock a session's naming jobs hold while claimed: one job per
// session runs at a time.
func LockKey(sessionID string) string { return "naming/" + sessionID }
