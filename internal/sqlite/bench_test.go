package sqlite_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/storetest"
)

// BenchmarkClaims: claim cycle cost and 16 concurrent claimers on a SQLite file,
// at the durability MOLT_SQLITE_SYNC names (default full).
func BenchmarkClaims(b *testing.B) {
	sync, err := sqlite.ParseSync(os.Getenv("MOLT_SQLITE_SYNC"))
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchClaims(b, func(b *testing.B, o storetest.Options) (store.Store, storetest.Counter) {
		s, err := sqlite.Open(filepath.Join(b.TempDir(), "molt.db"), sqlite.Options{Clock: o.Clock, IDs: o.IDs, Sync: sync})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, nil
	})
}

// BenchmarkPeer: molt's side of the peer benchmark against River
// (`make bench-peer`): jobs/s of 16 workers and pickup latency on a SQLite
// file, at the durability MOLT_SQLITE_SYNC names (default full), through the
// consumer and the executor with batches of storetest.PeerBatch wake-ups
// (MOLT_PEER_BATCH overrides it; 1: one at a time).
func BenchmarkPeer(b *testing.B) {
	sync, err := sqlite.ParseSync(os.Getenv("MOLT_SQLITE_SYNC"))
	if err != nil {
		b.Fatal(err)
	}
	batch := storetest.PeerBatch
	if v := os.Getenv("MOLT_PEER_BATCH"); v != "" {
		if batch, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	if v := os.Getenv("MOLT_PEER_GATHER"); v != "" {
		if storetest.PeerGather, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	storetest.BenchPeer(b, func(b *testing.B, o storetest.Options) (store.Store, storetest.Counter) {
		s, err := sqlite.Open(filepath.Join(b.TempDir(), "molt.db"), sqlite.Options{Clock: o.Clock, IDs: o.IDs, Sync: sync})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, nil
	}, batch)
}
