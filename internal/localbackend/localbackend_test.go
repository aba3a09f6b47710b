package localbackend_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
)

// TestDataFilesPrivate: even when the data directory already exists with
// access for others, the store file is created 0600 and the folders end 0700.
func TestDataFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := app.Config{Backend: app.BackendLocal, DataDir: dir}
	d, err := localbackend.Open(cfg, molt.SystemClock{}, &molt.SortableIDs{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for path, want := range map[string]os.FileMode{dir: 0o700, cfg.BlobDir(): 0o700, cfg.DBPath(): 0o600, cfg.DBPath() + "-wal": 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(path), got, want)
		}
	}
}
