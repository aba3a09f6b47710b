package app_test

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/molt"
)

func TestRequestTimeoutFromEnv(t *testing.T) {
	t.Parallel()
	if c := app.ConfigFromEnv([]string{"MOLT_REQUEST_TIMEOUT=5s"}); c.Validate() != nil || c.RequestTimeout != 5*time.Second {
		t.Fatalf("MOLT_REQUEST_TIMEOUT=5s: timeout %v, err %v", c.RequestTimeout, c.Validate())
	}
	if c := app.ConfigFromEnv(nil); c.RequestTimeout != 0 {
		t.Fatalf("unset: timeout %v, want 0 (the default)", c.RequestTimeout)
	}
	for _, bad := range []string{"soon", "-1s", "31s"} {
		c := app.ConfigFromEnv([]string{"MOLT_REQUEST_TIMEOUT=" + bad})
		if err := c.Validate(); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("MOLT_REQUEST_TIMEOUT=%s: Validate() = %v, want EINVALID", bad, err)
		}
	}
}
