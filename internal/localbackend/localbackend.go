// Package localbackend builds the adapters of `molt serve` on one machine: a SQLite
// file, a blob folder and in-process queues under the data directory.
package localbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/app/modelenv"
	"github.com/molt-dev/molt/internal/awsenv"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqlite"
)

// NewApp builds an App on the local adapters: what `molt serve` runs on.
func NewApp(cfg app.Config, logger *slog.Logger) (*app.App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	// The model first: a bad MOLT_MODEL fails before anything is opened.
	m, err := modelenv.FromEnv(context.Background(), os.Getenv, awsenv.Load)
	if err != nil {
		return nil, err
	}
	d, err := Open(cfg, clock, ids)
	if err != nil {
		return nil, err
	}
	d.Clock, d.IDs, d.Model = clock, ids, m
	d.Models = modelenv.Named(os.Getenv, awsenv.Load)
	return app.New(cfg, d, logger), nil
}

// Open builds the local adapters under cfg.DataDir: created 0700 if missing,
// and made 0700 if it exists with access for others (it holds the admin token
// and every secret of the store).
func Open(cfg app.Config, clock molt.Clock, ids molt.IDs) (app.Deps, error) {
	for _, dir := range []string{cfg.DataDir, cfg.BlobDir()} {
		if err := private(dir); err != nil {
			return app.Deps{}, fmt.Errorf("create data dir: %w", err)
		}
	}
	sync, err := sqlite.ParseSync(cfg.SQLiteSync)
	if err != nil {
		return app.Deps{}, fmt.Errorf("open store: %w", err)
	}
	st, err := sqlite.Open(cfg.DBPath(), sqlite.Options{Clock: clock, IDs: ids, Sync: sync})
	if err != nil {
		return app.Deps{}, fmt.Errorf("open store: %w", err)
	}
	blobs, err := dirblob.New(cfg.BlobDir())
	if err != nil {
		_ = st.Close()
		return app.Deps{}, fmt.Errorf("open blobs: %w", err)
	}
	q := memqueue.New()
	return app.Deps{Store: st, Blobs: blobs, Queue: q, Local: q,
		Close: func() error { return errors.Join(blobs.Close(), st.Close()) }}, nil
}

// private creates dir 0700, or takes group and other access away from it when
// it exists.
func private(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, fi.Mode().Perm()&0o700)
	}
	return nil
}
