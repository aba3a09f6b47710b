// Package blobtest is the conformance suite of the blob port. Every adapter
// (internal/dirblob, internal/s3blob) runs it, so the folder and S3 agree on what
// artifacts, snapshots and archives rely on.
package blobtest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/molt"
)

// Factory returns a fresh, empty store, registering any cleanup with t.
type Factory func(t *testing.T) blob.Store

// Run runs the suite. Subtests run in parallel, each on its own store.
func Run(t *testing.T, factory Factory) {
	setup := func(t *testing.T) blob.Store {
		t.Helper()
		t.Parallel()
		return factory(t)
	}

	t.Run("PutGetOverwrite", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		put(t, s, "runs/r1/patch.json", []byte(`{"a":1}`))
		expect(t, s, "runs/r1/patch.json", []byte(`{"a":1}`))
		put(t, s, "runs/r1/patch.json", []byte("second"))
		expect(t, s, "runs/r1/patch.json", []byte("second"))
		bin := []byte{0, 1, 2, 0xff, '\n', 0}
		put(t, s, "bin", bin)
		expect(t, s, "bin", bin)
		put(t, s, "empty", nil)
		expect(t, s, "empty", []byte{})
		if _, err := s.Get(ctx, "runs/r1"); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("get of a key's parent: %v, want %s", err, molt.ENOTFOUND)
		}
	})

	t.Run("PutIfAbsent", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		if err := s.PutIfAbsent(ctx, "snap/MANIFEST.json", []byte("first")); err != nil {
			t.Fatalf("first put if absent: %v", err)
		}
		err := s.PutIfAbsent(ctx, "snap/MANIFEST.json", []byte("second"))
		if molt.ErrorCode(err) != molt.ECONFLICT || molt.ErrorReason(err) != "exists" {
			t.Errorf("second put if absent: %v, want %s exists", err, molt.ECONFLICT)
		}
		expect(t, s, "snap/MANIFEST.json", []byte("first"))
		put(t, s, "plain", []byte("x"))
		if err := s.PutIfAbsent(ctx, "plain", []byte("y")); molt.ErrorCode(err) != molt.ECONFLICT {
			t.Errorf("put if absent over a put: %v, want %s", err, molt.ECONFLICT)
		}
		expect(t, s, "plain", []byte("x"))
	})

	t.Run("PutIfAbsentRace", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = s.PutIfAbsent(ctx, "race/key", []byte{byte('a' + i)}) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch molt.ErrorCode(err) {
			case "":
				if winner >= 0 {
					t.Errorf("writers %d and %d both won", winner, i)
				}
				winner = i
			case molt.ECONFLICT, molt.EUNAVAILABLE:
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer won")
		}
		expect(t, s, "race/key", []byte{byte('a' + winner)})
	})

	t.Run("NotFound", func(t *testing.T) {
		s := setup(t)
		_, err := s.Get(t.Context(), "missing/key")
		if molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("get missing: %v, want %s", err, molt.ENOTFOUND)
		}
	})

	t.Run("DeleteIdempotent", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		if err := s.Delete(ctx, "never/there"); err != nil {
			t.Errorf("delete of an absent key: %v", err)
		}
		put(t, s, "d/one", []byte("1"))
		put(t, s, "d/two", []byte("2"))
		for range 2 {
			if err := s.Delete(ctx, "d/one"); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		if _, err := s.Get(ctx, "d/one"); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("get after delete: %v, want %s", err, molt.ENOTFOUND)
		}
		expect(t, s, "d/two", []byte("2"))
		// A deleted key can be created again, also conditionally.
		if err := s.PutIfAbsent(ctx, "d/one", []byte("again")); err != nil {
			t.Errorf("put if absent after delete: %v", err)
		}
		expect(t, s, "d/one", []byte("again"))
	})

	t.Run("ListByPrefixSorted", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		keys := []string{"b", "a/b", "a-c", "a/a/x", "ab", "runs/r1/x", "runs/r10/y", "runs/r2/z"}
		for _, k := range keys {
			put(t, s, k, []byte(k))
		}
		all := slices.Clone(keys)
		slices.Sort(all)
		for _, c := range []struct {
			prefix string
			want   []string
		}{
			{"", all},
			{"a", []string{"a-c", "a/a/x", "a/b", "ab"}},
			{"a/", []string{"a/a/x", "a/b"}},
			{"runs/r1", []string{"runs/r1/x", "runs/r10/y"}},
			{"runs/r1/", []string{"runs/r1/x"}},
			{"runs/r3", []string{}},
			{"zzz/", []string{}},
		} {
			got, err := s.List(ctx, c.prefix)
			if err != nil {
				t.Errorf("list %q: %v", c.prefix, err)
				continue
			}
			if got == nil || !slices.Equal(got, c.want) {
				t.Errorf("list %q = %#v, want %#v", c.prefix, got, c.want)
			}
		}
		if _, err := s.List(ctx, "../"); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("list ../: %v, want %s", err, molt.EINVALID)
		}
	})

	t.Run("InvalidKeysRefused", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		for _, k := range []string{"../x", "/abs", "a//b", "", "a/../b", "./a", "a/", "a b", `a\b`} {
			if err := s.Put(ctx, k, []byte("x")); molt.ErrorCode(err) != molt.EINVALID {
				t.Errorf("put %q: %v, want %s", k, err, molt.EINVALID)
			}
			if err := s.PutIfAbsent(ctx, k, []byte("x")); molt.ErrorCode(err) != molt.EINVALID {
				t.Errorf("put if absent %q: %v, want %s", k, err, molt.EINVALID)
			}
			if _, err := s.Get(ctx, k); molt.ErrorCode(err) != molt.EINVALID {
				t.Errorf("get %q: %v, want %s", k, err, molt.EINVALID)
			}
			if err := s.Delete(ctx, k); molt.ErrorCode(err) != molt.EINVALID {
				t.Errorf("delete %q: %v, want %s", k, err, molt.EINVALID)
			}
		}
		got, err := s.List(ctx, "")
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(got) != 0 {
			t.Errorf("invalid keys wrote %v", got)
		}
	})

	t.Run("TooLarge", func(t *testing.T) {
		s := setup(t)
		ctx := t.Context()
		big := make([]byte, blob.MaxBlob+1)
		if err := s.Put(ctx, "big", big); molt.ErrorCode(err) != molt.ETOOLARGE {
			t.Errorf("put over the limit: %v, want %s", err, molt.ETOOLARGE)
		}
		if err := s.PutIfAbsent(ctx, "big", big); molt.ErrorCode(err) != molt.ETOOLARGE {
			t.Errorf("put if absent over the limit: %v, want %s", err, molt.ETOOLARGE)
		}
		if _, err := s.Get(ctx, "big"); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("get after refused put: %v, want %s", err, molt.ENOTFOUND)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.Put(ctx, "c/k", []byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("put with a cancelled context: %v, want %v", err, context.Canceled)
		}
		if _, err := s.Get(t.Context(), "c/k"); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("get after a cancelled put: %v, want %s", err, molt.ENOTFOUND)
		}
	})
}

func put(t *testing.T, s blob.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func expect(t *testing.T, s blob.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("get %s = %q, want %q", key, got, want)
	}
}
