package dirblob_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/blobtest"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/molt"
)

func newStore(t *testing.T, root string) *dirblob.Store {
	t.Helper()
	s, err := dirblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		return newStore(t, filepath.Join(t.TempDir(), "blobs"))
	})
}

// files lists every file and folder under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSymlinksCannotEscape(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, root)
	if err := os.Symlink(outside, filepath.Join(root, "dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "file")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "dir/x", []byte("x")); err == nil {
		t.Error("put through a symlinked folder succeeded")
	}
	if err := s.PutIfAbsent(ctx, "dir/y", []byte("y")); err == nil {
		t.Error("put if absent through a symlinked folder succeeded")
	}
	if data, err := s.Get(ctx, "dir/secret"); err == nil {
		t.Errorf("get through a symlinked folder returned %q", data)
	}
	if data, err := s.Get(ctx, "file"); err == nil {
		t.Errorf("get of a symlink to an outside file returned %q", data)
	}
	if err := s.Delete(ctx, "dir/secret"); err == nil {
		t.Error("delete through a symlinked folder succeeded")
	}
	if got, want := files(t, outside), []string{"secret"}; !slices.Equal(got, want) {
		t.Errorf("outside folder holds %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("outside file changed to %q", b)
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("list shows %v; symlinks are not blobs", keys)
	}
}

func TestNoLeftoversAndPruning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	s := newStore(t, root)
	if err := s.PutIfAbsent(ctx, "snap/a1/MANIFEST.json", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "snap/a1/MANIFEST.json", []byte("2")); molt.ErrorCode(err) != molt.ECONFLICT {
		t.Fatalf("second put if absent: %v", err)
	}
	if err := s.Put(ctx, "snap/a1/MANIFEST.json", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, root), []string{"snap", "snap/a1", "snap/a1/MANIFEST.json"}; !slices.Equal(got, want) {
		t.Errorf("folder holds %v, want %v (no temporary files)", got, want)
	}
	if err := s.Delete(ctx, "snap/a1/MANIFEST.json"); err != nil {
		t.Fatal(err)
	}
	if got := files(t, root); len(got) != 0 {
		t.Errorf("folder holds %v after deleting its only blob, want nothing", got)
	}
	for _, name := range []string{"~tmp-stale", "has space"} {
		if err := os.WriteFile(filepath.Join(root, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := s.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Errorf("list = %v, %v; files that are not valid keys must not be listed", keys, err)
	}
}

func TestFilePermissions(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newStore(t, root)
	if err := s.Put(t.Context(), "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("blob file mode %v, want private to its owner", perm)
	}
}

func TestNewOnAFile(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dirblob.New(f); err == nil || !strings.Contains(err.Error(), f) {
		t.Errorf("New on a file: %v, want an error naming it", err)
	}
}
