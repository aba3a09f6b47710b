package runs_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// TestServeRestart: `molt serve` stopped while a run is drafting gives the run
// back (or, with its attempts spent, ends it as timeout); a new process on the
// same store and blobs — whose in-process queue lost every message — picks it up
// from its first tick and finishes it.
func TestServeRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		maxAttempts int
		want        work.Status
	}{{"attempts left", 2, runs.StatusAwaitingReview}, {"attempts spent", 1, runs.StatusTimeout}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, openSQLite)
			e.settings(func(ev *settings.Evolution) { ev.MaxAttempts = c.maxAttempts })
			full, _, _ := e.tokens()
			drafting := make(chan struct{}, 1)
			e.model.setBefore(func(ctx context.Context, ph string, _ model.Request) error {
				if ph == "draft" {
					drafting <- struct{}{}
					<-ctx.Done() // the draft outlives the process
					return model.ContextFailure(ctx, ctx, "draft")
				}
				return nil
			})
			a, stop := serve(t, e)
			sid := a.want(http.StatusCreated, "POST", "/api/workspaces/acme/sessions", full, `{}`)["id"].(string)
			out := a.want(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", full, `{"text":"/evo be brief"}`)
			id := out["run"].(map[string]any)["id"].(string)
			<-drafting
			stop()
			it := e.item(work.KindRun, id)
			if c.want == runs.StatusTimeout {
				if it.Status != runs.StatusTimeout || it.Reason != "timeout: "+runs.ReasonInterrupted {
					t.Fatalf("after the stop: %+v", it)
				}
				return
			}
			if it.Status != runs.StatusPending || it.Reason != runs.ReasonInterrupted || it.Used() != 1 {
				t.Fatalf("after the stop: %+v", it)
			}

			// A new process: same store and blobs, a fresh (empty) in-process queue.
			e.clock.Advance(2 * time.Minute) // the tick re-sends wake-ups untouched for a minute
			q := memqueue.New()
			e.app = app.New(app.Config{Backend: app.BackendLocal, DataDir: t.TempDir(), Runs: runs.Config{HeartbeatEvery: time.Hour}},
				app.Deps{Store: e.store, Blobs: e.blobs, Queue: q, Local: q, Clock: e.clock,
					IDs: &molt.SortableIDs{Clock: e.clock}, Model: offlineevo.New()},
				slog.New(slog.NewJSONHandler(io.Discard, nil)))
			e.q, e.runs = q, e.app.Runs
			_, stop = serve(t, e)
			defer stop()
			got := waitFor(t, e, func() (work.Status, bool) {
				st := e.runStatus(id)
				return st, st != runs.StatusPending && st != runs.StatusRunning
			})
			if it := e.item(work.KindRun, id); got != c.want || it.Used() != 2 {
				t.Fatalf("after the restart: %+v", it)
			}
		})
	}
}
