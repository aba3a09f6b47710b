package work_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// signalling is a Backend that reports the outcome of every commit, in order
// (each waits until the test takes it, or its context ends).
type signalling struct {
	*blindReads
	commits chan error
}

func (s signalling) Commit(ctx context.Context, ops ...work.Op) error {
	err := s.blindReads.Commit(ctx, ops...)
	select {
	case s.commits <- err:
	case <-ctx.Done():
	}
	return err
}

// syncBuffer is a log sink safe for the heartbeat goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKeepAlive: the heartbeat loop keeps the claim fresh, rides out a store
// that is briefly down (logged, not a lost claim), and, once the claim is taken
// from it, marks it lost, cancels the owner and stops; stop waits for it.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := signalling{blindReads: e.s, commits: make(chan error)}
	p := &work.Protocol{Backend: b, Clock: e.clock, IDs: &molt.SortableIDs{Clock: e.clock}}
	c, _, err := e.p.ClaimSeen(e.ctx, e.create(""), 0)
	if err != nil {
		t.Fatal(err)
	}
	owner, cancel := context.WithCancel(e.ctx)
	var lost atomic.Bool
	logs := &syncBuffer{}
	stop := p.KeepAlive(owner, c, 2*time.Millisecond, func() { lost.Store(true); cancel() }, slog.New(slog.NewJSONHandler(logs, nil)))
	defer stop()
	defer cancel() // first: a beat waiting to report gives up
	next := func() error {
		t.Helper()
		select {
		case err := <-b.commits:
			return err
		case <-owner.Done():
			return nil
		case <-e.ctx.Done():
			t.Fatal("no heartbeat")
			return nil
		}
	}

	// Beats land at the clock's time.
	e.clock.Advance(time.Minute)
	for e.get(c.ID).HeartbeatAt.Before(e.clock.Now()) {
		if err := next(); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}

	// The store is down for one beat (every try of it): logged, the claim kept.
	e.faults.Next(faults.Before, faults.Before, faults.Before)
	for e.faults.Pending() > 0 {
		next()
	}
	for i := 0; i < 3; i++ {
		if next() == nil {
			break // the beats after it go through
		}
		if i == 2 {
			t.Fatal("heartbeats still fail after the outage")
		}
	}
	if lost.Load() || owner.Err() != nil {
		t.Fatal("a store outage was taken for a lost claim")
	}
	if !strings.Contains(logs.String(), "heartbeat failed") {
		t.Fatalf("the failed heartbeat was not logged: %s", logs.String())
	}

	// The tick takes the claim away (requeue as if stale) and another worker
	// claims it: the loop marks the claim lost, cancels the owner and stops.
	for {
		seen := e.get(c.ID)
		if _, err := e.p.Requeue(e.ctx, seen, e.clock.Now().Add(time.Hour), 5, work.StatusTimeout); err == nil {
			break
		} else if molt.ErrorCode(err) != molt.ECONFLICT {
			t.Fatal(err)
		}
	}
	other, _, err := e.p.ClaimSeen(e.ctx, e.get(c.ID), 0)
	if err != nil {
		t.Fatal(err)
	}
	for owner.Err() == nil { // the beats before the loss, then the loss
		next()
	}
	if !lost.Load() {
		t.Fatal("owner cancelled without the claim marked lost")
	}
	stop()
	if got := e.get(c.ID); got.Token != other.Token {
		t.Fatalf("the lost claim's loop wrote after losing it: %+v", got)
	}
}
