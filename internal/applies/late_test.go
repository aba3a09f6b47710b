package applies_test

import (
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// TestLateApplyFailure: an apply worker stalls in the regression until the
// tick has timed its claim out; the reviewer then acts on the run (a retry
// after a reviewer apply timed out; a new approval after an auto apply's run
// came back to review). When the stalled worker finally fails, its write is
// refused with its lost claim: it neither fails the timed-out apply nor moves
// the run the reviewer has moved on.
func TestLateApplyFailure(t *testing.T) {
	t.Parallel()
	for _, auto := range []bool{false, true} {
		t.Run(map[bool]string{false: "reviewer", true: "auto"}[auto], func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, open opener) {
				e := setup(t, open)
				e.settings(func(s *settingsT) { s.Evolution.MaxAttempts, s.Evolution.Level = 1, "L2" })
				stalled, release := make(chan struct{}), make(chan struct{})
				e.model.setFail(func(agent string) (model.Response, error, bool) {
					if agent != evolution.AgentScore {
						return model.Response{}, nil, false
					}
					close(stalled)
					<-release
					return model.Response{}, model.Fail(model.ReasonAuth, "refused", nil), true
				})
				run, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "rules"}, auto: auto})
				e.receive(work.KindApply)
				done := make(chan error, 1)
				go func() { done <- e.svc.Handle(e.ctx, wake(id)) }()
				<-stalled

				e.clock.Advance(13 * time.Minute)
				if res := e.tick(); res.Expired != 1 {
					t.Fatalf("tick %+v, want the stalled apply timed out", res)
				}
				e.wantStatus(work.KindApply, id, applies.StatusTimeout)
				var next string
				if auto {
					e.wantStatus(work.KindRun, run, runs.StatusAwaitingReview)
					if _, err := e.app.Runs.Approve(e.ctx, run, ""); err != nil {
						t.Fatal(err)
					}
					next = runs.ApprovedByReviewer
				} else {
					e.wantStatus(work.KindRun, run, runs.StatusApproved)
					if _, err := e.app.Runs.Retry(e.ctx, run, "answer in Spanish"); err != nil {
						t.Fatalf("retry after the apply timed out: %v", err)
					}
				}
				before := e.item(work.KindRun, run)

				close(release)
				if err := <-done; err != nil {
					t.Fatalf("stalled worker: %v", err)
				}
				if it := e.wantStatus(work.KindApply, id, applies.StatusTimeout); it.Active {
					t.Fatal("the timed-out apply is claimed again")
				}
				after := e.item(work.KindRun, run)
				if after.Status != before.Status || after.OpID != before.OpID {
					t.Fatalf("run moved by the late failure: %s → %s", before.Status, after.Status)
				}
				if next != "" {
					d, err := runs.ParseData(after.Data)
					if err != nil || d.LatestApply == id || d.ApprovedBy != next {
						t.Fatalf("run data %+v (%v)", d, err)
					}
					e.wantStatus(work.KindApply, d.LatestApply, applies.StatusPending)
				}
				if h, _ := e.store.LockHolder(e.ctx, applies.LockKey("acme")); h != "" {
					t.Fatalf("lock held by %q", h)
				}
			})
		})
	}
}
