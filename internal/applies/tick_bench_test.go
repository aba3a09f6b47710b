package applies_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// tickHistoryEnv sets the large history of BenchmarkTick: terminal items of
// each of runs, applies and turns (default 10 000; the goal is stated for
// 100 000, which takes minutes to seed on the emulator).
const tickHistoryEnv = "MOLT_BENCH_TICK_HISTORY"

// BenchmarkTick measures one tick pass as app.App.Tick runs it — the
// maintenance pass over every kind's policy (turns, runs, applies,
// rollbacks), the auto-apply notices, and the retention pass (normally once
// an hour, here every pass) — with a small history (100 terminal runs,
// applies and turns each) and a large one (MOLT_BENCH_TICK_HISTORY, default
// 10 000), on each store adapter: store requests, items listed and time per
// pass, for the whole tick ("tick"), its maintenance and notices alone
// ("maintain") and retention alone ("retain"). Nothing is due in either
// history (half of it terminal for a day, half archived five days ago), so a
// pass finds no work and its cost is what finding out costs; the goal is the
// same cost whatever the history (large/small ≤ 1.1). After timing, one run
// made due for archiving among the history must be found by the next pass.
//
// On the emulator only the requests and items listed say what DynamoDB would
// do: kumo answers a Query by scanning the whole table, so its time per query
// grows with the table whatever the index (a Query of DynamoDB reads only the
// items it returns).
func BenchmarkTick(b *testing.B) {
	large := 10_000
	if v := os.Getenv(tickHistoryEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			b.Fatalf("%s=%q: want a number of items ≥ 100", tickHistoryEnv, v)
		}
		large = n
	}
	type figures struct{ reqs, listed, ms float64 }
	for _, st := range []struct {
		name string
		open opener
	}{{"sqlite", openSQLite}, {"dynamo", openDynamo}} {
		got := map[string]map[int]figures{} // pass → history → figures
		sizes := []int{100, large}
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/history=%d", st.name, n), func(b *testing.B) {
				e := setup(b, st.open)
				// Seeding and a pass over a large history on the emulator
				// take longer than the harness's three minutes.
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				e.ctx = ctx
				seedHistory(b, e, n)
				m := e.app.Maintainer()
				passes := []struct {
					name string
					run  func() error
				}{
					{"tick", func() error {
						if _, err := m.RunOnce(e.ctx); err != nil {
							return err
						}
						if _, err := e.svc.Notify(e.ctx); err != nil {
							return err
						}
						res, err := e.svc.RetainNow(e.ctx)
						if err == nil && res.Archived+res.Purged+res.Raced > 0 {
							err = fmt.Errorf("retention did work in a history with nothing due: %+v", res)
						}
						return err
					}},
					{"maintain", func() error {
						if _, err := m.RunOnce(e.ctx); err != nil {
							return err
						}
						_, err := e.svc.Notify(e.ctx)
						return err
					}},
					{"retain", func() error {
						res, err := e.svc.RetainNow(e.ctx)
						if err == nil && res.Archived+res.Purged+res.Raced > 0 {
							err = fmt.Errorf("retention did work in a history with nothing due: %+v", res)
						}
						return err
					}},
				}
				for _, p := range passes {
					b.Run(p.name, func(b *testing.B) {
						// One pass first, untimed: the store's caches after
						// seeding are not a tick's.
						if err := p.run(); err != nil {
							b.Fatal(err)
						}
						e.store.reset()
						listed := e.store.listed.Load()
						start := time.Now()
						for b.Loop() {
							if err := p.run(); err != nil {
								b.Fatal(err)
							}
						}
						elapsed := time.Since(start)
						iters := float64(b.N)
						f := figures{reqs: float64(total(e.store.reset())) / iters,
							listed: float64(e.store.listed.Load()-listed) / iters,
							ms:     float64(elapsed.Microseconds()) / 1000 / iters}
						b.ReportMetric(f.reqs, "store-req/pass")
						b.ReportMetric(f.listed, "items-listed/pass")
						b.ReportMetric(f.ms, "ms/pass")
						if got[p.name] == nil {
							got[p.name] = map[int]figures{}
						}
						got[p.name][n] = f
					})
				}
				// What is due must still be found: one run terminal for 15
				// days, its id between the archived half's and the rest's.
				due := e.clock.Now().Add(-15 * day)
				seedItems(b, e, []work.Item{{Kind: work.KindRun, ID: idsAt(due).NewID(), Workspace: "acme",
					Status: runs.StatusRejected, Attempts: 1, Data: []byte(`{"workspace":"acme"}`),
					CreatedAt: due, UpdatedAt: due, OpID: e.ids.NewID()}})
				if res, err := e.svc.RetainNow(e.ctx); err != nil || res.Archived != 1 {
					b.Fatalf("retention after a run became due = %+v %v, want it archived", res, err)
				}
			})
		}
		for _, pass := range []string{"tick", "maintain", "retain"} {
			small, big := got[pass][sizes[0]], got[pass][sizes[1]]
			if small.reqs == 0 || big.reqs == 0 {
				continue
			}
			b.Run(fmt.Sprintf("%s/ratio/%s", st.name, pass), func(b *testing.B) {
				for b.Loop() {
				}
				b.ReportMetric(big.reqs/small.reqs, "req-ratio")
				b.ReportMetric(big.ms/small.ms, "time-ratio")
				b.Logf("%s %s: history %d: %.1f store requests (%.0f items listed), %.2f ms per pass; "+
					"history %d: %.1f requests (%.0f items), %.2f ms; ratio requests %.2f, time %.2f (goal ≤ 1.1)",
					st.name, pass, sizes[0], small.reqs, small.listed, small.ms, sizes[1], big.reqs, big.listed, big.ms,
					big.reqs/small.reqs, big.ms/small.ms)
			})
		}
	}
}

// seedHistory writes n terminal runs, n terminal applies and n terminal turns
// (their statuses in turn), none due for retention: half terminal for a day,
// half archived five days ago after 20 days terminal. Ids are made at each
// item's creation, so the older half sorts first by id, as in a real store.
func seedHistory(b *testing.B, e *env, n int) {
	b.Helper()
	now := e.clock.Now()
	kinds := []struct {
		kind     work.Kind
		statuses []work.Status
		data     []byte
	}{
		{work.KindRun, []work.Status{runs.StatusApplied, runs.StatusRolledBack, runs.StatusRejected,
			runs.StatusSkipped, runs.StatusFailed, runs.StatusTimeout}, []byte(`{"workspace":"acme","agent":"main"}`)},
		{work.KindApply, []work.Status{applies.StatusApplied, applies.StatusFailed, applies.StatusTimeout,
			applies.StatusRolledBack}, []byte(`{"workspace":"acme","runs":["r"],"approved_by":"reviewer"}`)},
		{work.KindTurn, []work.Status{chat.StatusDone, chat.StatusFailed, work.StatusTimeout},
			[]byte(`{"session_id":"s","user_seq":1}`)},
	}
	old, recent := idsAt(now.Add(-21*day)), idsAt(now.Add(-2*day))
	var items []work.Item
	for _, k := range kinds {
		for i := 0; i < n; i++ {
			it := work.Item{Kind: k.kind, ID: recent.NewID(), Workspace: "acme", Status: k.statuses[i%len(k.statuses)],
				Attempts: 1, Data: k.data, CreatedAt: now.Add(-2 * day), UpdatedAt: now.Add(-day), OpID: e.ids.NewID()}
			if i%2 == 1 && k.kind != work.KindTurn {
				archived := now.Add(-5 * day)
				it.ID, it.CreatedAt, it.UpdatedAt = old.NewID(), now.Add(-21*day), now.Add(-20*day)
				it.Data, it.ArchivedAt = withArchived(b, k.data, archived), archived
				it.ExpiresAt = archived.Add(32 * day)
			}
			items = append(items, it)
		}
	}
	seedItems(b, e, items)
}

// idsAt returns an id generator stuck at t.
func idsAt(t time.Time) molt.IDs { return &molt.SortableIDs{Clock: molt.NewManualClock(t)} }

func withArchived(b testing.TB, data []byte, at time.Time) []byte {
	b.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(data, &m); err != nil {
		b.Fatal(err)
	}
	m["archived_at"] = at.UTC()
	out, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// seedItems creates items with the store's own commits, 100 per commit (a
// DynamoDB transaction's limit), 8 commits at a time.
func seedItems(b testing.TB, e *env, items []work.Item) {
	b.Helper()
	batches := make(chan []work.Item)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for batch := range batches {
				ops := make([]work.Op, len(batch))
				for i, it := range batch {
					ops[i] = work.CreateItem{Item: it}
				}
				if err := e.store.Store.Commit(e.ctx, ops...); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := 0; i < len(items); i += work.MaxOps {
		batches <- items[i:min(len(items), i+work.MaxOps)]
	}
	close(batches)
	wg.Wait()
	if first != nil {
		b.Fatalf("seed: %v", first)
	}
}
