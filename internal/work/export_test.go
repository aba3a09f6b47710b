package work

import "time"

// SetReadBackTimeout shortens the read-back of abandoned writes for tests; call
// it before any test runs.
func SetReadBackTimeout(d time.Duration) { readBackTimeout = d }

// ReadBackTimeout returns the bound.
func ReadBackTimeout() time.Duration { return readBackTimeout }
