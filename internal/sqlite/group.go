package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// maxGroup bounds the writes committed together in one transaction.
const maxGroup = 64

// groupWriter runs the writes of every goroutine of a Store on its single write
// connection, with group commit: the writes queued when the connection frees up
// (at most maxGroup; a lone write never waits for company) run as one BEGIN
// IMMEDIATE transaction, each inside its own savepoint. A write whose fn fails
// is rolled back to its savepoint and gets its own error; the others are
// released, and the transaction commits once, so the group shares one fsync.
// Every write is still all-or-nothing and sees the writes queued before it, as
// if they had run one after the other.
//
// There is no writer goroutine: the caller that finds the connection free leads
// (runs the group, its own write first), then hands the lead to the first write
// still queued, so a lone write runs on its caller's goroutine.
type groupWriter struct {
	db *sql.DB

	// Owned by the caller that leads: the write connection, held from one
	// group to the next, and its prepared statements by query (SQLite parses
	// a statement in about the time it takes to run it).
	conn  *sql.Conn
	stmts map[string]*sql.Stmt

	mu      sync.Mutex
	queue   []*request
	leading bool       // a caller is running a group, or has been told to
	closed  bool       // no more writes are taken
	idle    *sync.Cond // on mu: leading became false

	groups  atomic.Int64 // transactions committed
	members atomic.Int64 // writes in them (including those rolled back to their savepoint)
}

// unit is one write of writeEach: its fn, and whether it is a single
// statement (request.single).
type unit struct {
	fn     func(q querier) error
	single bool
}

// request is one write waiting for its group.
type request struct {
	ctx context.Context
	fn  func(q querier) error
	// single: fn runs one statement, which SQLite applies or not as a whole,
	// so it needs no savepoint of its own (a condition that fails writes
	// nothing); any error of it other than its *work.ConditionFailed ends the
	// group's transaction (the others run again without it).
	single bool
	done   chan error    // capacity 1: the write's result
	lead   chan struct{} // capacity 1: the caller is to run the next group
}

var errClosed = errors.New("sqlite store is closed")

func newGroupWriter(db *sql.DB) *groupWriter {
	g := &groupWriter{db: db}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// write queues fn and waits for its result, running the group itself when the
// connection is free or the lead is handed to it. A write whose context ends
// while it is queued is dropped with EUNAVAILABLE (nothing written); once a
// group has taken it, it waits for the group's outcome, which does not take
// long.
func (g *groupWriter) write(ctx context.Context, fn func(q querier) error) error {
	return g.writeEach(ctx, []unit{{fn: fn}})[0]
}

// writeEach is write for several independent writes, queued together so that
// they share a group (one transaction, each in its own savepoint) unless the
// group is full: errs[i] is fns[i]'s result.
func (g *groupWriter) writeEach(ctx context.Context, fns []unit) []error {
	errs := make([]error, len(fns))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = molt.Unavailable(err, "no sqlite connection")
		}
		return errs
	}
	rs := make([]*request, len(fns))
	for i, u := range fns {
		rs[i] = &request{ctx: ctx, fn: u.fn, single: u.single, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		for i := range errs {
			errs[i] = molt.Unavailable(errClosed, "no sqlite connection")
		}
		return errs
	}
	g.queue = append(g.queue, rs...)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		g.lead()
	}
	// The results come in queue order, and a group delivers its results before
	// it hands the lead on, so waiting for each in turn cannot miss a lead
	// handed to a later one.
	for i, r := range rs {
		select {
		case errs[i] = <-r.done:
		case <-r.lead:
			g.lead()
			errs[i] = <-r.done
		case <-ctx.Done():
			if g.dequeue(r) {
				errs[i] = molt.Unavailable(ctx.Err(), "no sqlite connection")
				continue
			}
			// Taken by a group: its result, or the lead, comes soon.
			select {
			case errs[i] = <-r.done:
			case <-r.lead:
				g.lead()
				errs[i] = <-r.done
			}
		}
	}
	return errs
}

// lead runs one group of what is queued, then hands the lead on.
func (g *groupWriter) lead() {
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	batch := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	g.mu.Unlock()
	g.run(batch)
	g.mu.Lock()
	g.handOffLocked()
	g.mu.Unlock()
}

// handOffLocked gives the lead to the first queued write, or frees it.
func (g *groupWriter) handOffLocked() {
	if len(g.queue) > 0 {
		g.queue[0].lead <- struct{}{}
		return
	}
	g.leading = false
	g.idle.Broadcast()
}

// dequeue removes r from the queue; false when a group has already taken it.
// When r had been handed the lead, it passes it on.
func (g *groupWriter) dequeue(r *request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.queue, r)
	if i < 0 {
		return false
	}
	g.queue = slices.Delete(g.queue, i, i+1)
	select {
	case <-r.lead:
		g.handOffLocked()
	default:
	}
	return true
}

// close stops taking writes and waits until those queued are done.
func (g *groupWriter) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for g.leading {
		g.idle.Wait()
	}
	g.dropConn()
}

// connection returns the held write connection, opening it when needed.
func (g *groupWriter) connection() (*sql.Conn, error) {
	if g.conn != nil {
		return g.conn, nil
	}
	c, err := g.db.Conn(context.Background())
	if err != nil {
		return nil, err
	}
	g.conn, g.stmts = c, map[string]*sql.Stmt{}
	return c, nil
}

// dropConn closes the held connection and its statements, after a failure
// that may have left it unusable (the next group opens another).
func (g *groupWriter) dropConn() {
	if g.conn == nil {
		return
	}
	for _, st := range g.stmts {
		_ = st.Close()
	}
	_ = g.conn.Close()
	g.conn, g.stmts = nil, nil
}

// maxStmts bounds the prepared statements kept.
const maxStmts = 256

// stmt returns query prepared on the held connection, or nil (then the caller
// runs it unprepared, which reports any error of the query itself).
func (g *groupWriter) stmt(query string) *sql.Stmt {
	if st, ok := g.stmts[query]; ok {
		return st
	}
	if g.conn == nil || len(g.stmts) >= maxStmts {
		return nil
	}
	st, err := g.conn.PrepareContext(context.Background(), query)
	if err != nil {
		return nil
	}
	g.stmts[query] = st
	return st
}

// run commits batch, retrying (from scratch) while another process holds the
// write lock past the busy timeout, and at once, without the write at fault,
// when one write's failure ended the whole transaction.
func (g *groupWriter) run(batch []*request) {
	deadline := time.Now().Add(maxBusyWait)
	delay := 2 * time.Millisecond
	for len(batch) > 0 {
		rest, busy := g.once(batch)
		if busy == nil {
			batch = rest
			continue
		}
		// Busy before anything was committed: the transaction was rolled back.
		if time.Now().After(deadline) {
			deliver(rest, busy)
			return
		}
		time.Sleep(delay)
		delay = min(delay*2, 200*time.Millisecond)
		batch = rest
	}
}

// deliver gives every request of rs the result err.
func deliver(rs []*request, err error) {
	for _, r := range rs {
		r.done <- err
	}
}

// once runs batch in one transaction and delivers the results it can. rest are
// the writes to run again (nothing of theirs was committed, and they have no
// result yet); busy is set when that is because SQLite stayed busy (the caller
// backs off) rather than because one write ended the transaction.
func (g *groupWriter) once(batch []*request) (rest []*request, busy error) {
	bg := context.Background()
	live := make([]*request, 0, len(batch))
	for _, r := range batch {
		// A write whose caller gave up before it started is not started: nothing
		// of it is written, and the caller may simply retry.
		if err := r.ctx.Err(); err != nil {
			r.done <- molt.Unavailable(err, "no sqlite connection")
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil, nil
	}
	// Until BEGIN succeeds nothing can have been written: such failures are
	// EUNAVAILABLE, which tells the caller it may simply retry.
	c, err := g.connection()
	if err != nil {
		deliver(live, molt.Unavailable(err, "no sqlite connection"))
		return nil, nil
	}
	q := detached{c: c, g: g}
	if _, err := q.ExecContext(bg, "BEGIN IMMEDIATE"); err != nil {
		err = molt.Unavailable(err, "begin transaction")
		if isBusy(err) {
			return live, err
		}
		g.dropConn()
		deliver(live, err)
		return nil, nil
	}
	results := make([]error, len(live))
	for i, r := range live {
		err := g.member(q, r, len(live) == 1)
		if err == nil {
			continue
		}
		var aborted *abortError
		if !errors.As(err, &aborted) {
			results[i] = translate(err)
			continue
		}
		// The write's failure ended the shared transaction (SQLite rolls a
		// transaction back on some errors; a lone write's failure ends its own):
		// nothing of the group was written.
		rollback(bg, c)
		if isBusy(aborted.err) {
			return live, translate(aborted.err)
		}
		g.dropConn()
		r.done <- translate(aborted.err)
		return slices.Delete(slices.Clone(live), i, i+1), nil
	}
	// Once the work is done, finish the commit even if callers give up now: that
	// keeps the outcome known more often.
	if _, err := q.ExecContext(bg, "COMMIT"); err != nil {
		rollback(bg, c)
		g.dropConn()
		// The outcome of every write of the group is unknown, even of one whose
		// condition failed against another's writes.
		deliver(live, fmt.Errorf("commit transaction: %w", translate(err)))
		return nil, nil
	}
	g.groups.Add(1)
	g.members.Add(int64(len(live)))
	for i, r := range live {
		r.done <- results[i]
	}
	return nil, nil
}

// abortError is a write's failure that also ended the shared transaction.
type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }

// member runs r's fn inside a savepoint of the group's transaction and keeps
// its writes (RELEASE) when it returns nil, or undoes them (ROLLBACK TO) and
// returns its error. The error is an *abortError when the transaction itself
// is gone, or has to go: a lone write runs without a savepoint (saving two
// statements), so its failure rolls back the whole transaction; so does a
// single statement's failure other than its condition (see request.single).
func (g *groupWriter) member(q detached, r *request, lone bool) error {
	bg := context.Background()
	if lone || r.single {
		err := r.fn(q)
		var cf *work.ConditionFailed
		if err == nil || (!lone && errors.As(err, &cf)) {
			return err
		}
		return &abortError{err}
	}
	if _, err := q.ExecContext(bg, "SAVEPOINT member"); err != nil {
		return &abortError{fmt.Errorf("savepoint: %w", err)}
	}
	err := r.fn(q)
	if err == nil {
		if _, rerr := q.ExecContext(bg, "RELEASE member"); rerr != nil {
			return &abortError{fmt.Errorf("release savepoint: %w", rerr)}
		}
		return nil
	}
	if _, rerr := q.ExecContext(bg, "ROLLBACK TO member"); rerr != nil {
		return &abortError{err}
	}
	if _, rerr := q.ExecContext(bg, "RELEASE member"); rerr != nil {
		return &abortError{err}
	}
	return err
}

// detached runs a write's statements without its context's cancellation: a
// cancelled statement interrupts the connection, which would roll back the
// whole group's transaction, not only that write. It runs them prepared,
// through the writer's statements.
type detached struct {
	c *sql.Conn
	g *groupWriter
}

func (d detached) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	if st := d.g.stmt(query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return d.c.ExecContext(ctx, query, args...)
}

func (d detached) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if st := d.g.stmt(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return d.c.QueryContext(ctx, query, args...)
}

func (d detached) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if st := d.g.stmt(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.c.QueryRowContext(ctx, query, args...)
}
