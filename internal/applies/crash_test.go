package applies_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// crashFixture is the workspace an apply of three files starts from: one file
// it overwrites, a global file it copies (unchanged) and a new file, the last
// two in a folder it creates.
type crashFixture struct {
	*env
	patch   map[string]string
	run, id string
	initial map[string]string
	want    map[string]string // the workspace after the apply
}

var crashPatch = map[string]string{
	"INSTRUCTIONS.md":        "# Rules\n- be kind\n- answer in French\n",
	"agents/helper/AGENT.md": "global helper",
	"agents/helper/notes.md": "notes",
}

func newCrashFixture(t *testing.T, open opener, auto bool) *crashFixture {
	e := setup(t, open)
	e.put("global", "agents/helper/AGENT.md", "global helper")
	e.put("acme", "INSTRUCTIONS.md", "# Rules\n- be kind\n")
	e.put("acme", "USER.md", "me")
	f := &crashFixture{env: e, initial: e.files("acme")}
	f.patch = crashPatch
	if auto {
		// A new file in an agent folder is a manual change: an auto apply
		// writes a prompt instead.
		e.settings(func(s *settingsT) { s.Evolution.Level = "L2" })
		f.patch = map[string]string{"INSTRUCTIONS.md": crashPatch["INSTRUCTIONS.md"],
			"agents/helper/AGENT.md": "global helper", "prompts/all/style.md": "short"}
	}
	f.run, f.id = e.approve(runSpec{files: f.patch, auto: auto})
	f.want = map[string]string{"USER.md": "me"}
	for p, c := range f.patch {
		f.want[p] = c
	}
	return f
}

// stale moves the clock past the apply timeout (12 minutes by default).
func (f *crashFixture) stale() { f.clock.Advance(13 * time.Minute) }

// rollbackRestores rolls the apply back and checks the workspace is exactly as
// before the apply (the snapshot of the first preflight is the one used).
func (f *crashFixture) rollbackRestores(t *testing.T) {
	t.Helper()
	res, err := f.svc.Rollback(f.ctx, f.id, false)
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if got := f.files("acme"); !reflect.DeepEqual(got, f.initial) {
		t.Fatalf("after rollback the workspace is %v, want %v", got, f.initial)
	}
	if !reflect.DeepEqual(res.Restored, []string{"INSTRUCTIONS.md"}) ||
		!reflect.DeepEqual(res.Removed, []string{"agents/helper/AGENT.md", "agents/helper/notes.md"}) ||
		!reflect.DeepEqual(res.RemovedDirs, []string{"agents/helper", "agents"}) || len(res.KeptDirs) != 0 {
		t.Fatalf("rollback result = %+v", res)
	}
}

// TestCrashAtEveryStep: the worker dies after each step of an apply; the tick
// requeues a running apply (merge and everything after run again, with a fresh
// snapshot) or resumes a syncing one at publish without any model call. At the
// end the apply is applied with every file published and recorded; the
// snapshot of the preflight before the checkpoint is the one kept, and a
// rollback with it restores the exact previous workspace.
func TestCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	steps := []struct {
		step      string
		syncing   bool // the crash leaves it syncing
		published int  // files published at the crash
	}{
		{"claim", false, 0}, {"merge", false, 0}, {"regress", false, 0}, {"preflight", false, 0},
		{"checkpoint", true, 0}, {"publish:1", true, 1}, {"publish:2", true, 2}, {"published", true, 3},
	}
	for _, tc := range steps {
		t.Run(strings.ReplaceAll(tc.step, ":", "-"), func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, open opener) {
				f := newCrashFixture(t, open, false)
				f.crashAt(tc.step, f.id, 1)
				errs := f.drain()
				if len(errs) != 1 || !errors.Is(errs[0], errCrash) {
					t.Fatalf("handler errors %v, want the injected crash", errs)
				}
				want := applies.StatusRunning
				if tc.syncing {
					want = applies.StatusSyncing
				}
				f.wantStatus(work.KindApply, f.id, want)
				// Files are published in path order: the first k are live, the rest untouched.
				now := f.files("acme")
				for i, p := range []string{"INSTRUCTIONS.md", "agents/helper/AGENT.md", "agents/helper/notes.md"} {
					if i < tc.published && now[p] != crashPatch[p] {
						t.Fatalf("%s not published at the crash: %q", p, now[p])
					}
					if i >= tc.published && now[p] != f.initial[p] {
						t.Fatalf("%s touched before its turn: %q", p, now[p])
					}
				}
				var first []byte
				if tc.syncing {
					_, first = f.manifest(f.id)
				}
				// Within the timeout the tick leaves it alone.
				f.clock.Advance(time.Minute)
				f.tick()
				f.drainOK()
				f.wantStatus(work.KindApply, f.id, want)

				f.stale()
				calls := f.model.calls.Load()
				res := f.tick()
				if tc.syncing && res.Resumed != 1 || !tc.syncing && res.Requeued != 1 {
					t.Fatalf("tick = %+v, want the apply resumed (syncing) or requeued (running)", res)
				}
				f.drainOK()
				it := f.wantStatus(work.KindApply, f.id, applies.StatusApplied)
				if it.Attempts != 2 {
					t.Fatalf("attempts = %d, want 2", it.Attempts)
				}
				if tc.syncing && f.model.calls.Load() != calls {
					t.Fatalf("the resume called the model %d times", f.model.calls.Load()-calls)
				}
				f.wantStatus(work.KindRun, f.run, runs.StatusApplied)
				f.lockFree("acme")
				if got := f.files("acme"); !reflect.DeepEqual(got, f.want) {
					t.Fatalf("workspace = %v, want %v", got, f.want)
				}
				d := f.data(f.id)
				if !reflect.DeepEqual(d.Published, []string{"INSTRUCTIONS.md", "agents/helper/notes.md"}) {
					t.Fatalf("recorded %v", d.Published)
				}
				m, b := f.manifest(f.id)
				switch {
				case tc.syncing && !bytes.Equal(b, first):
					t.Fatal("the resume rewrote the snapshot")
				case tc.syncing && m.Attempt != 1, !tc.syncing && m.Attempt != 2:
					t.Fatalf("snapshot of attempt %d", m.Attempt)
				}
				if d.Snapshot == nil || d.Snapshot.ManifestSHA256 != applies.Hash(b) {
					t.Fatal("the checkpoint did not record the manifest's hash")
				}
				f.rollbackRestores(t)
			})
		})
	}
}

// TestCrashTakeover: a resume that dies right after taking over is resumed
// again by the next tick.
func TestCrashTakeover(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		f := newCrashFixture(t, open, false)
		f.crashAt("publish:1", f.id, 1)
		f.crashAt("takeover", f.id, 1)
		f.drain()
		f.stale()
		f.tick()
		if errs := f.drain(); len(errs) != 1 {
			t.Fatalf("errors %v, want the takeover crash", errs)
		}
		f.wantStatus(work.KindApply, f.id, applies.StatusSyncing)
		f.stale()
		f.tick()
		f.drainOK()
		if it := f.wantStatus(work.KindApply, f.id, applies.StatusApplied); it.Attempts != 3 {
			t.Fatalf("attempts %d, want 3", it.Attempts)
		}
		f.rollbackRestores(t)
	})
}

// TestRetriesSpent: a publish that dies every time ends failed once the
// attempts are spent (the tick's expiry), with the reason; a reviewer apply's
// run stays approved, an auto apply's goes back to review. What was published
// is in the manifest; the rest is untouched.
func TestRetriesSpent(t *testing.T) {
	t.Parallel()
	for _, auto := range []bool{false, true} {
		name := map[bool]string{false: "reviewer", true: "auto"}[auto]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, open opener) {
				f := newCrashFixture(t, open, auto)
				f.crashAt("publish:1", f.id, -1)
				f.drain()
				for range 2 { // attempts 2 and 3
					f.stale()
					f.tick()
					f.drain()
				}
				f.wantStatus(work.KindApply, f.id, applies.StatusSyncing)
				f.stale()
				if res := f.tick(); res.Expired != 1 {
					t.Fatalf("tick = %+v, want the apply expired", res)
				}
				it := f.wantStatus(work.KindApply, f.id, applies.StatusFailed)
				if !strings.HasPrefix(it.Reason, applies.ReasonTimeout) {
					t.Fatalf("reason %q", it.Reason)
				}
				wantRun := runs.StatusApproved
				if auto {
					wantRun = runs.StatusAwaitingReview
				}
				f.wantStatus(work.KindRun, f.run, wantRun)
				f.lockFree("acme")
				got := f.files("acme")
				_, third := got["agents/helper/notes.md"]
				if _, p := got["prompts/all/style.md"]; p {
					third = true
				}
				if got["INSTRUCTIONS.md"] != crashPatch["INSTRUCTIONS.md"] || third {
					t.Fatalf("files = %v: want the first published, the rest untouched", got)
				}
				m, _ := f.manifest(f.id)
				if len(m.Files) != 3 || m.Files[0].Rel != "INSTRUCTIONS.md" {
					t.Fatalf("manifest %+v", m)
				}
				_, err := f.svc.Rollback(f.ctx, f.id, false)
				wantReason(t, err, applies.CodeNotApplied)
			})
		})
	}
}

// TestPublishFailureReleases: a publish that fails (the store refuses a file)
// releases the syncing apply with the failure as its reason and a cleared
// heartbeat: the next tick resumes it at once, and with the fault gone it ends
// applied.
func TestPublishFailureReleases(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		f := newCrashFixture(t, open, false)
		f.store.setFailPut(func(file workspace.File) error {
			if file.Path == "agents/helper/notes.md" {
				return molt.Unavailable(errors.New("injected"), "store down")
			}
			return nil
		})
		f.drainOK()
		it := f.wantStatus(work.KindApply, f.id, applies.StatusSyncing)
		if !strings.HasPrefix(it.Reason, applies.ReasonPublish+": agents/helper/notes.md") || !it.HeartbeatAt.IsZero() {
			t.Fatalf("released with reason %q heartbeat %v", it.Reason, it.HeartbeatAt)
		}
		if d := f.data(f.id); d.FailureReason != it.Reason {
			t.Fatalf("failure_reason %q", d.FailureReason)
		}
		// The next tick resumes it without waiting for the timeout; it fails
		// again (resume_failed) while the fault lasts.
		if res := f.tick(); res.Resumed != 1 {
			t.Fatalf("tick = %+v, want a resume", res)
		}
		f.drainOK()
		it = f.wantStatus(work.KindApply, f.id, applies.StatusSyncing)
		if !strings.HasPrefix(it.Reason, applies.ReasonResumeFailed) {
			t.Fatalf("reason %q", it.Reason)
		}
		f.store.setFailPut(nil)
		f.tick()
		f.drainOK()
		it = f.wantStatus(work.KindApply, f.id, applies.StatusApplied)
		if it.Reason != "" || f.data(f.id).FailureReason != "" {
			t.Fatalf("reason %q kept after success", it.Reason)
		}
		if got := f.files("acme"); !reflect.DeepEqual(got, f.want) {
			t.Fatalf("workspace = %v", got)
		}
	})
}
