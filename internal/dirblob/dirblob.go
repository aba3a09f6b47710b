// Package dirblob is the folder adapter of the blob port, used by `molt serve` and
// tests: each key is a file under a root folder.
//
// Keys are checked with blob.ValidateKey and every file operation goes through an
// os.Root, so nothing outside the root is ever read or written, not even through a
// symbolic link planted inside it. Writes go to a temporary file that is renamed
// (Put) or hard-linked (PutIfAbsent) into place, so a reader sees the old blob or
// the new one, never a partial one. Temporary names contain '~', which no valid key
// does, so they never collide with keys and List skips them.
package dirblob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/molt"
)

var _ blob.Store = (*Store)(nil)

// Store keeps blobs as files under a root folder. It is safe for concurrent use,
// also by several processes sharing the folder.
type Store struct {
	root *os.Root
}

// New opens (creating it if needed) the folder root. Close releases it.
func New(root string) (*Store, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create blob folder %s: %w", root, err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open blob folder %s: %w", root, err)
	}
	return &Store{root: r}, nil
}

// Close releases the folder.
func (s *Store) Close() error { return s.root.Close() }

// Put writes data at key, replacing what was there. EINVALID for a bad key,
// ETOOLARGE above blob.MaxBlob.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	tmp, err := s.writeTemp(ctx, key, data)
	if err != nil {
		return fmt.Errorf("put blob %s: %w", key, err)
	}
	if err := s.root.Rename(tmp, key); err != nil {
		_ = s.root.Remove(tmp)
		return fmt.Errorf("put blob %s: %w", key, err)
	}
	return nil
}

// PutIfAbsent writes data at key only when no blob is there; ECONFLICT with reason
// "exists" otherwise. Linking the complete temporary file into place makes the
// check and the write one atomic step.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	tmp, err := s.writeTemp(ctx, key, data)
	if err != nil {
		return fmt.Errorf("put blob %s if absent: %w", key, err)
	}
	defer func() { _ = s.root.Remove(tmp) }()
	if err := s.root.Link(tmp, key); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return molt.Conflict("exists", "blob %s already exists", key)
		}
		return fmt.Errorf("put blob %s if absent: %w", key, err)
	}
	return nil
}

// writeTemp validates the write and stores data in a new temporary file beside
// key, returning its name.
func (s *Store) writeTemp(ctx context.Context, key string, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := blob.ValidateKey(key); err != nil {
		return "", err
	}
	if len(data) > blob.MaxBlob {
		return "", &molt.Error{Code: molt.ETOOLARGE, Field: "data", Message: fmt.Sprintf("blob of %d bytes is over the %d byte limit", len(data), blob.MaxBlob)}
	}
	dir := path.Dir(key)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, "~tmp-"+hex.EncodeToString(rnd[:]))
	// A concurrent Delete may remove the (empty) folder between MkdirAll and the
	// create; try again a few times.
	var f *os.File
	var err error
	for range 3 {
		if err = s.root.MkdirAll(dir, 0o700); err != nil {
			continue
		}
		f, err = s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// Get returns the blob at key: ENOTFOUND when absent, EINVALID for a bad key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get blob %s: %w", key, err)
	}
	if err := blob.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get blob %s: %w", key, err)
	}
	f, err := s.root.Open(key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, molt.NotFound("blob %s not found", key)
		}
		return nil, fmt.Errorf("get blob %s: %w", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		return nil, molt.NotFound("blob %s not found", key)
	}
	data, err := io.ReadAll(io.LimitReader(f, blob.MaxBlob+1))
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", key, err)
	}
	if len(data) > blob.MaxBlob {
		return nil, &molt.Error{Code: molt.ETOOLARGE, Message: fmt.Sprintf("blob %s is over the %d byte limit", key, blob.MaxBlob)}
	}
	return data, nil
}

// Delete removes key and then any folders it leaves empty. Deleting an absent key
// is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	if err := blob.ValidateKey(key); err != nil {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	st, err := s.root.Lstat(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	if st.IsDir() {
		return nil // a folder of other keys, not a blob
	}
	if err := s.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	// Prune folders left empty; Remove fails on a folder that still has entries.
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if s.root.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// List returns the keys starting with prefix (a plain string prefix, as on S3),
// sorted. EINVALID for a prefix blob.ValidatePrefix refuses.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list blobs %s: %w", prefix, err)
	}
	if err := blob.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("list blobs %s: %w", prefix, err)
	}
	// Walk the deepest folder that holds every match.
	start := "."
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = prefix[:i]
	}
	keys := []string{}
	err := fs.WalkDir(s.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			// Skip folders that cannot hold a match.
			if p != start && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") && !strings.HasPrefix(p, prefix) {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasPrefix(p, prefix) && blob.ValidateKey(p) == nil {
			keys = append(keys, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs %s: %w", prefix, err)
	}
	sort.Strings(keys)
	return keys, nil
}
