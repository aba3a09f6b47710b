package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/storetest"
)

// TestConformance runs the store conformance suite, each test on a fresh file.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		t.Helper()
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{Clock: o.Clock, IDs: o.IDs, Faults: o.Faults})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		return s
	})
}
