package runs_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/consumer"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
)

// TestBudget: 20 /evo posted at once with max_concurrent_run=2, worked by 4
// consumers: never more than 2 runs hold a slot, are running, or call the model
// at once (sampled at every model call, each held until the test lets it go),
// and every run reaches review. Wake-ups refused by the full budget are parked
// (an hour's backoff): finishing runs wake the next ones, not the tick.
func TestBudget(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		const n, budget = 20, 2
		e.settings(func(ev *settings.Evolution) { ev.MaxConcurrentRun = budget })
		var sessions []string
		for range n {
			sessions = append(sessions, e.session(fullCaller).ID)
		}

		var inflight, maxInflight atomic.Int32
		waiting := make(chan struct{}, 3*n)
		tokens := make(chan struct{})
		e.model.setBefore(func(ctx context.Context, _ string, _ model.Request) error {
			cur := inflight.Add(1)
			defer inflight.Add(-1)
			for {
				old := maxInflight.Load()
				if cur <= old || maxInflight.CompareAndSwap(old, cur) {
					break
				}
			}
			waiting <- struct{}{}
			select {
			case <-tokens:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})

		var wg sync.WaitGroup
		for _, id := range sessions {
			wg.Go(func() {
				if _, err := e.app.Chat.Post(e.ctx, fullCaller, id, "/evo be brief"); err != nil {
					t.Errorf("/evo: %v", err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}

		ctx, cancel := context.WithCancel(e.ctx)
		c := &consumer.Consumer{Receiver: e.q.Receiver(string(work.KindRun)), Handler: e.runs, Workers: 4,
			Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Wait: time.Second,
			Backoff: func(int) time.Duration { return time.Hour }}
		var cw sync.WaitGroup
		cw.Go(func() { _ = c.Run(ctx) })
		defer func() { cancel(); cw.Wait() }()

		maxSlots, maxRunning := 0, 0
		sample := func() {
			t.Helper()
			slots, err := e.store.ActiveCount(e.ctx, work.KindRun)
			if err != nil {
				t.Fatal(err)
			}
			pg, err := e.store.ListItems(e.ctx, work.ListQuery{Kind: work.KindRun, Status: runs.StatusRunning,
				Page: page.Query{Limit: 100}})
			if err != nil {
				t.Fatal(err)
			}
			maxSlots, maxRunning = max(maxSlots, slots), max(maxRunning, len(pg.Items))
			if slots > budget || len(pg.Items) > budget {
				t.Fatalf("%d slots taken, %d runs running; budget %d", slots, len(pg.Items), budget)
			}
		}
		// Every run makes three model calls: draft, dry-run, score.
		for range 3 * n {
			select {
			case <-waiting:
			case <-time.After(30 * time.Second):
				t.Fatalf("no model call waiting; %d in flight", inflight.Load())
			}
			sample()
			tokens <- struct{}{}
		}
		for {
			changed := e.store.changes()
			pg, err := e.store.ListItems(e.ctx, work.ListQuery{Kind: work.KindRun, Status: runs.StatusAwaitingReview,
				Page: page.Query{Limit: 100}})
			if err != nil {
				t.Fatal(err)
			}
			if len(pg.Items) == n {
				break
			}
			select {
			case <-changed:
			case <-time.After(30 * time.Second):
				t.Fatalf("%d of %d runs reached review", len(pg.Items), n)
			}
		}
		sample()
		if got := maxInflight.Load(); got > budget {
			t.Fatalf("%d model calls at once; budget %d", got, budget)
		}
		if slots, _ := e.store.ActiveCount(e.ctx, work.KindRun); slots != 0 {
			t.Fatalf("%d slots still taken", slots)
		}
		t.Logf("max slots taken %d, max running %d, max model calls at once %d (budget %d)",
			maxSlots, maxRunning, maxInflight.Load(), budget)
		if maxSlots < budget {
			t.Errorf("never more than %d run at once; the budget of %d was not used", maxSlots, budget)
		}
	})
}
