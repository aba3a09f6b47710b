package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqlite"
)

// TestSync: durable (FULL) by default, NORMAL on request, anything else refused.
func TestSync(t *testing.T) {
	t.Parallel()
	for sync, want := range map[sqlite.Sync]int{"": 2, sqlite.SyncFull: 2, sqlite.SyncNormal: 1} {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{Sync: sync})
		if err != nil {
			t.Fatalf("open with sync %q: %v", sync, err)
		}
		got, err := sqlite.SyncSetting(s)
		_ = s.Close()
		if err != nil || got != want {
			t.Errorf("sync %q: PRAGMA synchronous = %d (%v), want %d", sync, got, err, want)
		}
	}
	if _, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{Sync: "off"}); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("open with sync off: %v, want EINVALID", err)
	}
	if _, err := sqlite.ParseSync("extra"); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("ParseSync(extra): %v, want EINVALID", err)
	}
}
