package applies_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/work"
)

// BenchmarkApply measures one reviewer apply of 1, 10 and 100 changed files
// (half overwritten, half new; 100 files come from two runs of 50, a patch's
// limit) from its wake-up to applied, on each store adapter with a blob folder
// and the offline model: wall time, store requests (reads and writes) and blob
// requests, per apply and per file. The minimum store writes of an apply are
// n + 3: the claim, the checkpoint, one write per file, the finalize.
func BenchmarkApply(b *testing.B) {
	stores := []struct {
		name string
		open opener
	}{{"sqlite", openSQLite}, {"dynamo", openDynamo}}
	for _, st := range stores {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/files=%d", st.name, n), func(b *testing.B) {
				e := setup(b, st.open)
				var store, writes, blobs int
				var elapsed time.Duration
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					var specs []runSpec
					for k := 0; k < n; k += evolution.MaxPatchFiles {
						files := map[string]string{}
						for j := k; j < min(n, k+evolution.MaxPatchFiles); j++ {
							files[fmt.Sprintf("prompts/all/f%03d.md", j)] = fmt.Sprintf("version %d of file %d", i, j)
						}
						specs = append(specs, runSpec{files: files})
					}
					if i == 0 { // half of the files exist before the first apply
						for j := 0; j < n/2; j++ {
							e.put("acme", fmt.Sprintf("prompts/all/f%03d.md", j), "old")
						}
					}
					ids := e.approveAll(specs...)
					msgs := e.receive(work.KindApply)
					e.store.reset()
					e.blobs.reset()
					b.StartTimer()
					start := time.Now()
					for _, m := range msgs {
						if err := e.svc.Handle(e.ctx, m); err != nil {
							b.Fatal(err)
						}
					}
					elapsed += time.Since(start)
					b.StopTimer()
					sc := e.store.reset()
					store += total(sc)
					writes += sc["Commit"] + sc["PutFile"] + sc["DeleteFile"]
					blobs += total(e.blobs.reset())
					if it := e.item(work.KindApply, ids[len(ids)-1]); it.Status != applies.StatusApplied {
						b.Fatalf("apply %s is %s (%s)", it.ID, it.Status, it.Reason)
					}
					e.receive(work.KindApply)
					b.StartTimer()
				}
				b.StopTimer()
				iters := float64(b.N)
				minWrites := float64(n + 3)
				b.ReportMetric(float64(store)/iters, "store-req/apply")
				b.ReportMetric(float64(writes)/iters, "store-writes/apply")
				b.ReportMetric(float64(writes)/iters/minWrites, "writes/min")
				b.ReportMetric(float64(blobs)/iters, "blob-req/apply")
				b.ReportMetric(float64(elapsed.Microseconds())/1000/iters/float64(n), "ms/file")
				b.Logf("%s, %d files: %.1f ms per apply (%.2f ms per file); store %.0f requests (%.1f per file), "+
					"%.0f writes = %.2f × the minimum %d; blobs %.0f requests (%.1f per file)",
					st.name, n, float64(elapsed.Microseconds())/1000/iters, float64(elapsed.Microseconds())/1000/iters/float64(n),
					float64(store)/iters, float64(store)/iters/float64(n), float64(writes)/iters, float64(writes)/iters/minWrites,
					n+3, float64(blobs)/iters, float64(blobs)/iters/float64(n))
			})
		}
	}
}
