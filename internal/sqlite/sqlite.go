package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/store"
)

var _ store.Store = (*Store)(nil)

// Options configures a Store. Every field is optional.
type Options struct {
	Clock  molt.Clock       // nil → molt.SystemClock{}
	IDs    molt.IDs         // nil → &molt.SortableIDs{Clock: Clock}
	Faults *faults.Injector // nil → no faults
	// Sync is the durability of a commit: SyncFull (the default, for "") or
	// SyncNormal.
	Sync Sync
}

// Sync is SQLite's synchronous setting for the write connection.
type Sync string

// The durability settings (MOLT_SQLITE_SYNC).
const (
	// SyncFull fsyncs the write-ahead log at every commit: an acknowledged write
	// survives a power loss.
	SyncFull Sync = "full"
	// SyncNormal fsyncs only at checkpoints: faster, but the last acknowledged
	// writes can be lost on a power loss or OS crash (not on a process crash).
	SyncNormal Sync = "normal"
)

// ParseSync reads a durability setting: "" (SyncFull), "full" or "normal", in
// any case; EINVALID otherwise.
func ParseSync(v string) (Sync, error) {
	switch s := Sync(strings.ToLower(strings.TrimSpace(v))); s {
	case "":
		return SyncFull, nil
	case SyncFull, SyncNormal:
		return s, nil
	}
	return "", molt.Invalid("sync", "sqlite sync must be %q or %q, not %q", SyncFull, SyncNormal, v)
}

// Store is the state port on one SQLite file. It is safe for concurrent use, and
// several Stores (in one process or several) may share one file.
type Store struct {
	clock molt.Clock
	ids   molt.IDs

	rdb *sql.DB // reads: a pool of query-only connections
	// getItem is GetItem's query, prepared once (and on each read connection
	// as it first runs there), the hottest read of the claim path.
	getItem *sql.Stmt
	// getItems holds GetItems' queries by their number of ids (*sql.Stmt).
	getItems sync.Map
	wdb      *sql.DB      // writes: one connection
	g        *groupWriter // runs the writes on wdb, in groups
	w        writer       // every write goes through w (g, wrapped with faults when set)
}

// busyTimeout is how long SQLite itself waits for another connection's lock before
// a statement fails with SQLITE_BUSY; maxBusyWait bounds the retries of a write
// after that (and the context bounds both).
const (
	busyTimeout = 5 * time.Second
	maxBusyWait = 60 * time.Second
)

// Open opens (creating when needed, mode 0600) the SQLite file at path, with its
// folder (0700), and brings its schema up to date. Migrations are idempotent: reopening a file, or two
// processes opening it at once, is safe. Close the Store when done.
func Open(path string, o Options) (*Store, error) {
	if path == "" || strings.ContainsRune(path, 0) {
		return nil, molt.Invalid("path", "database path is empty or malformed")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// SQLite would create the file with the umask's mode (0644, typically), and
	// gives its -wal and -shm files the mode of the database: create it 0600.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	_ = f.Close()
	sync, err := ParseSync(string(o.Sync))
	if err != nil {
		return nil, err
	}
	s := &Store{clock: o.Clock, ids: o.IDs}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	if s.ids == nil {
		s.ids = &molt.SortableIDs{Clock: s.clock}
	}

	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds())
	s.wdb, err = sql.Open("sqlite", dsn(abs, busy, "_pragma=journal_mode(WAL)",
		"_pragma=synchronous("+strings.ToUpper(string(sync))+")", "_pragma=foreign_keys(1)", "_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// One write connection: writers of this process queue for it in Go.
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	s.wdb.SetConnMaxLifetime(0)
	s.g = newGroupWriter(s.wdb)
	if err := migrate(context.Background(), s.g); err != nil {
		s.g.close()
		_ = s.wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}

	// The journal mode is persistent and set above; readers only need the timeout.
	s.rdb, err = sql.Open("sqlite", dsn(abs, busy, "_pragma=query_only(1)"))
	if err != nil {
		s.g.close()
		_ = s.wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(8)
	s.rdb.SetMaxIdleConns(8)
	if err := s.rdb.Ping(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if s.getItem, err = s.rdb.Prepare(`SELECT ` + itemCols + ` FROM items WHERE kind = ? AND id = ?`); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}

	s.w = s.g
	if o.Faults != nil {
		s.w = faultWriter{next: s.g, faults: o.Faults}
	}
	return s, nil
}

// Close finishes the writes already queued and closes the file's connections;
// later writes fail with EUNAVAILABLE.
func (s *Store) Close() error {
	if s.g != nil {
		s.g.close()
	}
	var errs []error
	if s.getItem != nil {
		errs = append(errs, s.getItem.Close())
	}
	s.getItems.Range(func(_, st any) bool {
		errs = append(errs, st.(*sql.Stmt).Close())
		return true
	})
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite: %w", err)
	}
	return nil
}

// dsn returns a file: URI for abs (escaped, so a '?' or '%' in the path is not
// taken for parameters) with the driver parameters.
func dsn(abs string, params ...string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	return u.String() + "?" + strings.Join(params, "&")
}

// querier is what a write transaction may run.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// writer is the narrow interface around the database connection that every write
// of the Store goes through: one call is all-or-nothing (one savepoint of a group
// transaction, see groupWriter), and one write as far as fault injection is
// concerned.
type writer interface {
	// write runs fn in a write transaction and commits its writes when fn
	// returns nil; otherwise it undoes them and returns fn's error.
	write(ctx context.Context, fn func(q querier) error) error
	// writeEach runs each of fns as write would, independently, in one round
	// trip (one group): errs[i] is fns[i]'s result.
	writeEach(ctx context.Context, fns []unit) []error
}

// rollback ends c's transaction without writing it.
func rollback(ctx context.Context, c *sql.Conn) {
	// The transaction may already be gone (an interrupted statement rolls back);
	// the error then says so and there is nothing to undo.
	_, _ = c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
}

// faultWriter injects faults.Injector's faults around every write.
type faultWriter struct {
	next   writer
	faults *faults.Injector
}

func (f faultWriter) write(ctx context.Context, fn func(q querier) error) error {
	switch f.faults.Take() {
	case faults.Before:
		return fmt.Errorf("sqlite write not sent: %w", faults.ErrInjected)
	case faults.After:
		// The transaction runs (and commits when its conditions hold), but the
		// caller only learns that the response was lost: never its outcome.
		_ = f.next.write(ctx, fn)
		return fmt.Errorf("sqlite write sent, response lost: %w", faults.ErrInjected)
	}
	return f.next.write(ctx, fn)
}

// writeEach takes one fault for the whole round trip: Before fails every write
// unsent, After runs them all and loses every response.
func (f faultWriter) writeEach(ctx context.Context, fns []unit) []error {
	var err error
	switch f.faults.Take() {
	case faults.Before:
		err = fmt.Errorf("sqlite write not sent: %w", faults.ErrInjected)
	case faults.After:
		_ = f.next.writeEach(ctx, fns)
		err = fmt.Errorf("sqlite write sent, response lost: %w", faults.ErrInjected)
	default:
		return f.next.writeEach(ctx, fns)
	}
	errs := make([]error, len(fns))
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// isBusy reports whether err is SQLite's "database is locked" (or "table locked").
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// translate turns SQLite constraint violations into ECONFLICT, and a statement
// that stayed busy or locked past the busy timeout into EUNAVAILABLE (its
// transaction is rolled back: nothing was written).
func translate(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return &molt.Error{Code: molt.ECONFLICT, Reason: "constraint", Message: "the write conflicts with stored data", Err: err}
	}
	if isBusy(err) {
		return molt.Unavailable(err, "sqlite is busy")
	}
	return err
}

// tsLayout writes times in UTC with a fixed width, so their text sorts in time
// order (conditions compare heartbeats in SQL). The zero time is stored as "",
// which sorts before every other time, as time.Time{} does.
const tsLayout = "2006-01-02T15:04:05.000000000Z"

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(tsLayout)
}

func parseTS(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(tsLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}
