package runs_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// BenchmarkPickupLatency measures, on the local stack as `molt serve` runs it
// (HTTP API, in-process queues and consumers, SQLite), the time from sending
// POST /evo to the run's claim (pending → running) committing. The tick runs
// once an hour here, so the figure cannot come from it: pickup is the wake-up
// enqueue sends. Each run finishes before the next /evo (budget 1).
func BenchmarkPickupLatency(b *testing.B) {
	e := setup(b, openSQLite)
	full, _, _ := e.tokens()
	a, stop := serve(b, e)
	defer stop()
	sid := a.want(http.StatusCreated, "POST", "/api/workspaces/acme/sessions", full, `{}`)["id"].(string)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		out := a.want(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", full,
			fmt.Sprintf(`{"text":"/evo rule %d"}`, i))
		id := out["run"].(map[string]any)["id"].(string)
		claimed := waitFor(b, e, func() (time.Time, bool) {
			at := e.store.claimedAt(id)
			return at, !at.IsZero()
		})
		lat = append(lat, claimed.Sub(start))
		waitFor(b, e, func() (work.Status, bool) {
			st := e.runStatus(id)
			return st, st != runs.StatusPending && st != runs.StatusRunning
		})
	}
	b.StopTimer()
	slices.Sort(lat)
	med, p90 := lat[len(lat)/2], lat[len(lat)*9/10]
	b.ReportMetric(float64(med.Microseconds())/1000, "ms-pickup-median")
	b.ReportMetric(float64(p90.Microseconds())/1000, "ms-pickup-p90")
	b.Logf("pickup latency /evo → running over %d runs: median %v, p90 %v, max %v (tick interval 1h)",
		len(lat), med, p90, lat[len(lat)-1])
}

// BenchmarkStoreRequestsPerRun counts the store requests of one run's
// lifecycle, from /evo to awaiting_review, on each adapter, against the minimum
// the protocol allows: 3 writes (create the run with its system line, claim,
// the terminal write) and 1 read (the wake-up's read of the run before its
// claim), plus what the work itself must read (the session, its messages, the
// surface once per phase — at enqueue and at the draft, each one ListSurface
// with both stored layers — and the settings).
func BenchmarkStoreRequestsPerRun(b *testing.B) {
	for _, st := range []struct {
		name string
		open opener
	}{{"sqlite", openSQLite}, {"dynamo", openDynamo}} {
		b.Run(st.name, func(b *testing.B) {
			e := setup(b, st.open)
			ss := e.session(fullCaller)
			total := map[string]int{}
			runsDone := 0
			e.store.reset()
			for i := 0; b.Loop(); i++ {
				run := e.evo(ss.ID, fmt.Sprintf("rule %d", i))
				if errs := e.drain(); len(errs) > 0 {
					b.Fatal(errs)
				}
				e.wantStatus(run.ID, runs.StatusAwaitingReview)
				for k, v := range e.store.reset() {
					total[k] += v
				}
				total["GetItem"]-- // wantStatus's own read
				runsDone++
			}
			writes, reads := 0, 0
			var parts []string
			for k, v := range total {
				if k == "Commit" {
					writes += v
					continue
				}
				reads += v
				parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(v)/float64(runsDone)))
			}
			sort.Strings(parts)
			w, r := float64(writes)/float64(runsDone), float64(reads)/float64(runsDone)
			// Two phases read the surface: the enqueue and the worker.
			lf := float64(total["ListFiles"]) / float64(runsDone) / 2
			ls := float64(total["ListSurface"]) / float64(runsDone) / 2
			b.ReportMetric(w, "writes/run")
			b.ReportMetric(r, "reads/run")
			b.ReportMetric(lf, "ListFiles/phase")
			b.Logf("%s: per run phase (enqueue, worker) %.1f ListFiles and %.1f ListSurface", st.name, lf, ls)
			b.Logf("%s: per run %.1f writes (minimum 3: enqueue, claim, end; the claim is re-confirmed before each artifact group by a read, GetItem) and %.1f reads (%s)",
				st.name, w, r, strings.Join(parts, ", "))
		})
	}
}

// ListSurface counts the surface reads (both stored layers in one request) for
// BenchmarkStoreRequestsPerRun.
func (s *signalStore) ListSurface(ctx context.Context, ws string) (global, own []workspace.File, err error) {
	s.count("ListSurface")
	return s.Store.ListSurface(ctx, ws)
}
