package applies_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/work"
)

// TestOneApplyPerWorkspace: 8 runs of one workspace and 3 of another, approved
// at once, handled by four concurrent workers with max_concurrent_apply 4: at
// no moment are two applies of one workspace running or syncing (checked at
// every step of every worker and by a sampler), never more than 4 hold a slot,
// and all end applied. The 8 runs each add a rule to the same INSTRUCTIONS.md
// from the same base, so every apply after the first merges with the
// __apply_agent__: the file ends with all 8 rules.
func TestOneApplyPerWorkspace(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(s *settingsT) { s.Evolution.MaxConcurrentApply = 4 })
		base := "# Instructions\n\n## Rules\n- be kind\n"
		e.put("acme", "INSTRUCTIONS.md", base)
		wsOf := map[string]string{}
		var ids []string
		for i := range 8 {
			rule := fmt.Sprintf("rule number %d", i)
			_, id := e.approve(runSpec{ws: "acme", files: map[string]string{
				"INSTRUCTIONS.md":                   offlineevo.AddRule(base, rule),
				fmt.Sprintf("prompts/all/%d.md", i): rule}})
			wsOf[id], ids = "acme", append(ids, id)
		}
		for i := range 3 {
			_, id := e.approve(runSpec{ws: "beta", files: map[string]string{fmt.Sprintf("prompts/all/b%d.md", i): "b"}})
			wsOf[id], ids = "beta", append(ids, id)
		}

		var violations atomic.Int32
		// The sampler lists running and syncing applies (two reads), then reads
		// each again: two applies of one workspace still in flight under the same
		// claim token were both in flight at the moment between the listing and
		// the re-reads (a claim is continuous while its token stays).
		check := func(where string) {
			for _, ws := range []string{"acme", "beta"} {
				in := e.inFlight(ws)
				if len(in) < 2 {
					continue
				}
				still := map[string]bool{} // an apply can be listed twice: running, then syncing
				for _, it := range in {
					if cur := e.item(work.KindApply, it.ID); cur.Active && cur.Token == it.Token {
						still[it.ID] = true
					}
				}
				if len(still) > 1 {
					violations.Add(1)
					t.Errorf("%s: %d applies of %s in flight at once", where, len(still), ws)
				}
			}
			if n, err := e.store.ActiveCount(e.ctx, work.KindApply); err == nil && n > 4 {
				violations.Add(1)
				t.Errorf("%s: %d apply slots taken, budget 4", where, n)
			}
		}
		var steps atomic.Int32
		e.mu.Lock()
		e.onStep = func(step, id string) error {
			steps.Add(1)
			if in := e.inFlight(wsOf[id]); len(in) != 1 || in[0].ID != id {
				violations.Add(1)
				t.Errorf("step %s of %s: in flight in %s = %d items", step, id, wsOf[id], len(in))
			}
			return nil
		}
		e.mu.Unlock()

		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() { // sampler
			for ctx.Err() == nil {
				check("sampler")
			}
		})
		var handled atomic.Int32
		progress := make(chan struct{}, 1)
		for range 4 {
			wg.Go(func() {
				rcv := e.q.Receiver(string(work.KindApply))
				for ctx.Err() == nil {
					ds, err := rcv.Receive(ctx, 1, 20*time.Millisecond)
					if err != nil {
						return
					}
					for _, d := range ds {
						if err := e.svc.Handle(ctx, d.Message); err != nil && ctx.Err() == nil {
							t.Errorf("handle %s: %v", d.Message.ID, err)
						}
						handled.Add(1)
						_ = rcv.Delete(ctx, d)
						select {
						case progress <- struct{}{}:
						default:
						}
					}
				}
			})
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			done := 0
			for _, id := range ids {
				if e.item(work.KindApply, id).Status == applies.StatusApplied {
					done++
				}
			}
			if done == len(ids) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d applies applied after 90s", done, len(ids))
			}
			select { // a worker handled a wake-up
			case <-progress:
			case <-time.After(time.Second):
			}
		}
		cancel()
		wg.Wait()
		if violations.Load() > 0 {
			t.Fatalf("%d violations", violations.Load())
		}
		if steps.Load() < int32(len(ids)*5) {
			t.Fatalf("only %d steps were checked", steps.Load())
		}
		e.lockFree("acme")
		e.lockFree("beta")
		ins := e.files("acme")["INSTRUCTIONS.md"]
		for i := range 8 {
			if !strings.Contains(ins, fmt.Sprintf("- rule number %d\n", i)) {
				t.Fatalf("INSTRUCTIONS.md lost rule %d:\n%s", i, ins)
			}
		}
		merged := 0
		for _, id := range ids {
			if d := e.data(id); d.Merge != nil && len(d.Merge.Overlapping) > 0 {
				merged++
			}
		}
		if merged < 7 {
			t.Fatalf("%d applies merged with the apply agent, want at least 7", merged)
		}
		t.Logf("%d wake-ups handled, %d steps checked", handled.Load(), steps.Load())
	})
}
