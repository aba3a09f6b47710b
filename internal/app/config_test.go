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

func TestSQLiteSyncFromEnv(t *testing.T) {
	t.Parallel()
	cases := map[string]string{"": app.SyncFull, "full": app.SyncFull, "FULL": app.SyncFull, "normal": app.SyncNormal, " Normal ": app.SyncNormal}
	for v, want := range cases {
		c := app.ConfigFromEnv([]string{"MOLT_SQLITE_SYNC=" + v})
		if err := c.Validate(); err != nil || c.SQLiteSync != want {
			t.Errorf("MOLT_SQLITE_SYNC=%q: sync %q, err %v; want %q", v, c.SQLiteSync, err, want)
		}
	}
	if c := app.ConfigFromEnv(nil); c.SQLiteSync != app.SyncFull {
		t.Errorf("unset: sync %q, want %q (durable by default)", c.SQLiteSync, app.SyncFull)
	}
	for _, bad := range []string{"off", "extra", "1"} {
		c := app.ConfigFromEnv([]string{"MOLT_SQLITE_SYNC=" + bad})
		if err := c.Validate(); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("MOLT_SQLITE_SYNC=%s: Validate() = %v, want EINVALID", bad, err)
		}
	}
}
