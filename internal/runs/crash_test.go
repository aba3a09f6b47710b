package runs_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// holder blocks the first caller of hold until release is closed; later callers
// pass. blocked is closed when the first caller is held.
type holder struct {
	taken   atomic.Bool
	blocked chan struct{}
	release chan struct{}
}

func newHolder() *holder {
	return &holder{blocked: make(chan struct{}), release: make(chan struct{})}
}

func (h *holder) hold() {
	if h.taken.CompareAndSwap(false, true) {
		close(h.blocked)
		<-h.release
	}
}

// killAt makes the first attempt of the run stop at phase (a model call of that
// phase, or the Put of that artifact) until h releases it.
func killAt(e *env, phase string) *holder {
	h := newHolder()
	switch phase {
	case "draft", "dryrun", "score":
		e.model.setBefore(func(_ context.Context, ph string, _ model.Request) error {
			if ph == phase {
				h.hold()
			}
			return nil
		})
	default:
		e.blobs.setBefore(func(_ context.Context, key string) error {
			if strings.HasSuffix(key, "/"+phase) {
				h.hold()
			}
			return nil
		})
	}
	return h
}

// TestKilledInEachPhase: a worker stopped in each phase (it stops
// heartbeating, as a killed one does) loses its run to the tick after
// run_timeout_minutes; the next attempt runs from the draft to review without
// reading any artifact of the first; when the first worker wakes up after the
// re-claim it writes nothing more.
func TestKilledInEachPhase(t *testing.T) {
	t.Parallel()
	phases := []string{"draft", "dryrun", "score", runs.ArtifactVerdict}
	eachStore(t, func(t *testing.T, open opener) {
		for _, ph := range phases {
			t.Run(ph, func(t *testing.T) {
				e := setup(t, open)
				ss := e.session(fullCaller)
				run := e.evo(ss.ID, "always answer in French")
				h := killAt(e, ph)
				wake := e.receive(work.KindRun)
				if len(wake) != 1 {
					t.Fatalf("wake-ups %+v", wake)
				}
				done := make(chan error, 1)
				go func() { done <- e.runs.Handle(e.ctx, wake[0]) }()
				<-h.blocked
				if it := e.wantStatus(run.ID, runs.StatusRunning); it.Attempts != 1 {
					t.Fatalf("attempts %d", it.Attempts)
				}

				// Not stale before run_timeout_minutes (12): the tick leaves it.
				e.clock.Advance(11 * time.Minute)
				if res := e.tick(); res.Requeued != 0 {
					t.Fatalf("tick before the timeout %+v", res)
				}
				e.clock.Advance(2 * time.Minute)
				if res := e.tick(); res.Requeued != 1 || res.Resent < 1 {
					t.Fatalf("tick after the timeout %+v", res)
				}
				if it := e.wantStatus(run.ID, runs.StatusPending); it.Used() != 1 {
					t.Fatalf("used %d after the requeue", it.Used())
				}

				// The second attempt, woken by the tick, runs to review.
				if errs := e.drain(); len(errs) > 0 {
					t.Fatalf("handler errors: %v", errs)
				}
				second := e.wantStatus(run.ID, runs.StatusAwaitingReview)
				d := e.detail(run.ID)
				if second.Attempts != 2 || d.Attempt != 2 || d.Attempts != 2 || d.Score == nil || d.Verdict == nil {
					t.Fatalf("after the second attempt: item %+v detail %+v", second, d)
				}
				puts, gets := e.blobs.log()
				for _, k := range gets {
					if strings.Contains(k, "/attempt-1/") {
						t.Fatalf("attempt 2 read %s", k)
					}
				}
				for _, name := range []string{runs.ArtifactPatch, runs.ArtifactPatchMD, runs.ArtifactDryRun, runs.ArtifactScore, runs.ArtifactVerdict} {
					found := false
					for _, k := range puts {
						found = found || k == runs.AttemptKey(run.ID, 2, name)
					}
					if !found {
						t.Fatalf("attempt 2 did not write %s", name)
					}
				}

				// The first worker wakes up: it writes nothing more.
				nPuts := len(puts)
				close(h.release)
				if err := <-done; err != nil {
					t.Fatalf("stale worker returned %v", err)
				}
				after := e.item(work.KindRun, run.ID)
				if after.OpID != second.OpID || after.Status != runs.StatusAwaitingReview {
					t.Fatalf("the stale worker wrote the run: %+v", after)
				}
				puts, _ = e.blobs.log()
				extra := puts[nPuts:]
				// A Put already in flight when it was stopped may land (under its own
				// attempt's key); nothing else does.
				if ph == runs.ArtifactVerdict {
					if len(extra) > 1 || (len(extra) == 1 && extra[0] != runs.AttemptKey(run.ID, 1, runs.ArtifactVerdict)) {
						t.Fatalf("the stale worker wrote %v", extra)
					}
				} else if len(extra) != 0 {
					t.Fatalf("the stale worker wrote %v", extra)
				}
				if len(e.applies()) != 0 || len(e.receive(work.KindRun)) != 0 {
					t.Fatal("the stale worker created an apply or sent a wake-up")
				}
			})
		}
	})
}

// TestTickTimeout: with its attempts spent, a stale run ends as timeout; the
// stale worker then writes nothing, and a retry starts a new round.
func TestTickTimeout(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(ev *settings.Evolution) { ev.MaxAttempts = 1 })
		ss := e.session(fullCaller)
		run := e.evo(ss.ID, "be brief")
		h := killAt(e, "score")
		wake := e.receive(work.KindRun)
		done := make(chan error, 1)
		go func() { done <- e.runs.Handle(e.ctx, wake[0]) }()
		<-h.blocked
		e.clock.Advance(13 * time.Minute)
		if res := e.tick(); res.Expired != 1 {
			t.Fatalf("tick %+v; want one expired", res)
		}
		it := e.wantStatus(run.ID, runs.StatusTimeout)
		if !strings.HasPrefix(it.Reason, "timeout") {
			t.Fatalf("reason %q", it.Reason)
		}
		if n, _ := e.store.ActiveCount(e.ctx, work.KindRun); n != 0 {
			t.Fatalf("slots %d after the timeout", n)
		}
		close(h.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if after := e.item(work.KindRun, run.ID); after.OpID != it.OpID {
			t.Fatalf("the stale worker wrote the run: %+v", after)
		}
		if _, err := e.runs.Retry(e.ctx, run.ID, "be briefer"); err != nil {
			t.Fatal(err)
		}
		e.drain()
		if it := e.wantStatus(run.ID, runs.StatusAwaitingReview); it.Used() != 1 || it.Attempts != 2 {
			t.Fatalf("after the retry: %+v", it)
		}
	})
}

// TestDeadline: an attempt that reaches the handler's deadline (a Lambda
// invocation's, minus the commit margin) gives the run back and wakes it while
// attempts are left; on the last attempt it ends as timeout.
func TestDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	e.settings(func(ev *settings.Evolution) { ev.MaxAttempts = 2 })
	ss := e.session(fullCaller)
	run := e.evo(ss.ID, "be brief")
	e.model.setBefore(func(ctx context.Context, ph string, _ model.Request) error {
		if ph == "dryrun" {
			<-ctx.Done() // a model call slower than the invocation
			return model.ContextFailure(ctx, ctx, "slow model")
		}
		return nil
	})
	invoke := func() error {
		ms := e.receive(work.KindRun)
		if len(ms) != 1 {
			t.Fatalf("wake-ups %+v", ms)
		}
		ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second+50*time.Millisecond) // commit margin 15 s
		defer cancel()
		return e.runs.Handle(ctx, ms[0])
	}
	if err := invoke(); err != nil {
		t.Fatal(err)
	}
	if it := e.wantStatus(run.ID, runs.StatusPending); it.Reason != runs.ReasonDeadline || it.Used() != 1 {
		t.Fatalf("after the first deadline: %+v", it)
	}
	if err := invoke(); err != nil {
		t.Fatal(err)
	}
	if it := e.wantStatus(run.ID, runs.StatusTimeout); it.Reason != "timeout: "+runs.ReasonDeadline {
		t.Fatalf("after the last deadline: %+v", it)
	}
}

// TestDuplicateWakeups: the same wake-up delivered many times at once claims
// the run once and runs it once.
func TestDuplicateWakeups(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		ss := e.session(fullCaller)
		run := e.evo(ss.ID, "be brief")
		m := queue.Message{Kind: string(work.KindRun), ID: run.ID}
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				if err := e.runs.Handle(e.ctx, m); err != nil {
					t.Errorf("handle: %v", err)
				}
			})
		}
		wg.Wait()
		e.drain()
		// Late duplicates after the end change nothing.
		end := e.wantStatus(run.ID, runs.StatusAwaitingReview)
		for range 2 {
			if err := e.runs.Handle(e.ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if it := e.item(work.KindRun, run.ID); it.Attempts != 1 || it.OpID != end.OpID {
			t.Fatalf("after duplicates: %+v", it)
		}
		if n := e.model.count("draft"); n != 1 {
			t.Fatalf("%d drafts, want 1", n)
		}
	})
}

// TestHeartbeat: a running run heartbeats on its own claim, so the tick leaves
// it however long it runs; when a heartbeat finds the claim gone, the model call
// in flight is cancelled and the worker writes nothing more.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open, func(c *app.Config) { c.Runs.HeartbeatEvery = 5 * time.Millisecond })
		ss := e.session(fullCaller)
		run := e.evo(ss.ID, "be brief")
		held := make(chan struct{})
		cancelled := make(chan struct{})
		e.model.setBefore(func(ctx context.Context, ph string, _ model.Request) error {
			if ph == "dryrun" {
				close(held)
				<-ctx.Done()
				close(cancelled)
				return model.ContextFailure(ctx, ctx, "dry-run")
			}
			return nil
		})
		wake := e.receive(work.KindRun)
		done := make(chan error, 1)
		go func() { done <- e.runs.Handle(e.ctx, wake[0]) }()
		<-held

		// Time passes; the heartbeat keeps the claim fresh: the tick leaves it.
		e.clock.Advance(13 * time.Minute)
		now := e.clock.Now()
		seen := waitFor(t, e, func() (work.Item, bool) {
			it := e.item(work.KindRun, run.ID)
			return it, !it.HeartbeatAt.Before(now)
		})
		if res := e.tick(); res.Requeued != 0 || res.Expired != 0 {
			t.Fatalf("tick took a heartbeating run: %+v", res)
		}
		// Someone else takes the claim (a tick that judged it stale).
		if _, err := e.app.Protocol.Requeue(e.ctx, seen, now.Add(time.Hour), 3, runs.StatusTimeout); err != nil {
			t.Fatal(err)
		}
		taken := e.item(work.KindRun, run.ID)
		<-cancelled
		if err := <-done; err != nil {
			t.Fatalf("worker: %v", err)
		}
		if after := e.item(work.KindRun, run.ID); after.OpID != taken.OpID || after.Status != runs.StatusPending {
			t.Fatalf("the worker wrote after losing its claim: %+v", after)
		}
		puts, _ := e.blobs.log()
		for _, k := range puts {
			if k == runs.AttemptKey(run.ID, 1, runs.ArtifactDryRun) || k == runs.AttemptKey(run.ID, 1, runs.ArtifactScore) {
				t.Fatalf("the worker wrote %s after losing its claim", k)
			}
		}
	})
}
