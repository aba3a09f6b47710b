package applies_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// TestApplyPublishes: a reviewer apply merges its run's patch, regresses,
// snapshots, publishes and finalizes: the files are live, the manifest names
// each file with its kind and hashes and the created folders deepest first, the
// run is applied in the same write, the lock and slot are free.
func TestApplyPublishes(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.put("global", "agents/helper/AGENT.md", "global helper")
		e.put("acme", "INSTRUCTIONS.md", "# Rules\n- be kind\n")
		runID, id := e.approve(runSpec{files: map[string]string{
			"INSTRUCTIONS.md":              "# Rules\n- be kind\n- answer in French\n",
			"agents/helper/AGENT.md":       "global helper", // a copy of the global file: unchanged
			"agents/helper/notes/style.md": "short answers",
		}, deletes: []string{"USER.md"}})
		e.drainOK()

		e.wantStatus(work.KindApply, id, applies.StatusApplied)
		e.wantStatus(work.KindRun, runID, runs.StatusApplied)
		e.lockFree("acme")
		files := e.files("acme")
		if files["INSTRUCTIONS.md"] != "# Rules\n- be kind\n- answer in French\n" || files["agents/helper/notes/style.md"] != "short answers" ||
			files["agents/helper/AGENT.md"] != "global helper" {
			t.Fatalf("published files = %v", files)
		}
		m, _ := e.manifest(id)
		got := map[string]applies.ManifestFile{}
		for _, f := range m.Files {
			got[f.Rel] = f
		}
		ins := got["INSTRUCTIONS.md"]
		if ins.Kind != applies.KindOverwrite || ins.Before == nil || *ins.Before != applies.Hash([]byte("# Rules\n- be kind\n")) ||
			ins.After != applies.Hash([]byte(files["INSTRUCTIONS.md"])) || ins.Unchanged {
			t.Fatalf("INSTRUCTIONS.md in the manifest = %+v", ins)
		}
		if h := got["agents/helper/AGENT.md"]; h.Kind != applies.KindNew || h.Before != nil || !h.Unchanged {
			t.Fatalf("agents/helper/AGENT.md in the manifest = %+v, want new and unchanged", h)
		}
		if s := got["agents/helper/notes/style.md"]; s.Kind != applies.KindNew || s.Unchanged {
			t.Fatalf("style.md in the manifest = %+v", s)
		}
		if want := []string{"agents/helper/notes", "agents/helper", "agents"}; !reflect.DeepEqual(m.CreatedDirs, want) {
			t.Fatalf("created dirs = %v, want %v (deepest first)", m.CreatedDirs, want)
		}
		if b, ok := e.blob("applies/" + id + "/before/INSTRUCTIONS.md"); !ok || string(b) != "# Rules\n- be kind\n" {
			t.Fatalf("backup of INSTRUCTIONS.md = %q %v", b, ok)
		}
		if _, ok := e.blob("applies/" + id + "/before/agents/helper/AGENT.md"); ok {
			t.Fatal("a new file has a backup")
		}
		d := e.data(id)
		if !reflect.DeepEqual(d.Published, []string{"INSTRUCTIONS.md", "agents/helper/notes/style.md"}) ||
			!reflect.DeepEqual(d.Unchanged, []string{"agents/helper/AGENT.md"}) {
			t.Fatalf("published %v unchanged %v", d.Published, d.Unchanged)
		}
		if !reflect.DeepEqual(d.SkippedDeletes, []string{"USER.md"}) {
			t.Fatalf("skipped deletes = %v", d.SkippedDeletes)
		}
		if len(d.Regress) != 1 || !d.Regress[0].Passed || d.Regress[0].Run != runID {
			t.Fatalf("regress = %+v", d.Regress)
		}
		if _, ok := e.blob("applies/" + id + "/attempt-1/regress/" + runID + "/score.json"); !ok {
			t.Fatal("no regression score artifact under attempt-1")
		}
		v, err := e.svc.View(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != "applied" || v.ApprovedBy != "reviewer" || len(v.Runs) != 1 || v.Runs[0].Status != "applied" ||
			v.Manifest == nil || !v.Manifest.Readable || v.Manifest.Overwrites != 1 || v.Manifest.New != 2 {
			t.Fatalf("view = %+v manifest %+v", v, v.Manifest)
		}
		// A duplicate wake-up of a finished apply does nothing.
		e.receive(work.KindApply)
		if err := e.svc.Handle(e.ctx, wake(id)); err != nil {
			t.Fatal(err)
		}
		e.wantStatus(work.KindApply, id, applies.StatusApplied)
	})
}

// TestApplyRegression: a run whose regression score has lint under 50 fails a
// reviewer apply, nothing is published, and the run stays approved; an auto
// apply's failure sends its run back to awaiting_review in the same write.
func TestApplyRegression(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.put("acme", "INSTRUCTIONS.md", "before")
		runID, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "after"}})
		autoRun, autoID := e.approve(runSpec{files: map[string]string{"INDEX.md": "index"}, auto: true})
		e.mu.Lock()
		e.low[runID], e.low[autoRun] = true, true
		e.mu.Unlock()
		e.drainOK()
		it := e.wantStatus(work.KindApply, id, applies.StatusFailed)
		if !strings.HasPrefix(it.Reason, applies.ReasonRegression+":"+runID) {
			t.Fatalf("reason %q, want regression:%s…", it.Reason, runID)
		}
		e.wantStatus(work.KindRun, runID, runs.StatusApproved)
		e.wantStatus(work.KindApply, autoID, applies.StatusFailed)
		e.wantStatus(work.KindRun, autoRun, runs.StatusAwaitingReview)
		if got := e.files("acme"); got["INSTRUCTIONS.md"] != "before" || got["INDEX.md"] != "" {
			t.Fatalf("files after failed applies = %v", got)
		}
		e.lockFree("acme")
		if _, ok := e.blob("applies/" + id + "/MANIFEST.json"); ok {
			t.Fatal("a failed regression wrote a snapshot")
		}
	})
}

// TestAutoRecheck: an auto apply is classified again against the live surface
// with the level read again: lowered to L1, it fails with auto_recheck:level
// and publishes nothing; its run goes back to review.
func TestAutoRecheck(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(s *settingsT) { s.Evolution.Level = "L1" })
		runID, id := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "new rules"}, auto: true})
		e.drainOK()
		it := e.wantStatus(work.KindApply, id, applies.StatusFailed)
		if it.Reason != "auto_recheck:level" {
			t.Fatalf("reason %q, want auto_recheck:level", it.Reason)
		}
		e.wantStatus(work.KindRun, runID, runs.StatusAwaitingReview)
		if _, ok := e.files("acme")["INSTRUCTIONS.md"]; ok {
			t.Fatal("a blocked auto apply published")
		}
		// At L2 a prompt change passes; a manual one (USER.md) is blocked.
		e.settings(func(s *settingsT) { s.Evolution.Level = "L2" })
		_, ok := e.approve(runSpec{files: map[string]string{"INSTRUCTIONS.md": "new rules"}, auto: true})
		_, manual := e.approve(runSpec{files: map[string]string{"USER.md": "me"}, auto: true})
		e.drainOK()
		e.wantStatus(work.KindApply, ok, applies.StatusApplied)
		if it := e.wantStatus(work.KindApply, manual, applies.StatusFailed); !strings.HasPrefix(it.Reason, "auto_recheck:category_manual:USER.md") {
			t.Fatalf("reason %q", it.Reason)
		}
	})
}

// TestModelFailures: an unavailable model gives the claim back (pending, the
// attempt counted) for the tick to wake again, and the apply succeeds when the
// model is back; when every attempt meets it, the apply fails with the model's
// reason (an auto apply's run back to review). An unusable merge answer fails
// the apply at once.
func TestModelFailures(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		down := func(agent string) (model.Response, error, bool) {
			if agent == evolution.AgentScore {
				return model.Response{}, model.Fail(model.ReasonServerError, "down", nil), true
			}
			return model.Response{}, nil, false
		}
		e.model.setFail(down)
		_, id := e.approve(runSpec{files: map[string]string{"INDEX.md": "x"}})
		e.drainOK()
		it := e.wantStatus(work.KindApply, id, applies.StatusPending)
		if it.Reason != "model:server_error" || it.Attempts != 1 {
			t.Fatalf("given back with reason %q at attempt %d", it.Reason, it.Attempts)
		}
		e.lockFree("acme")
		e.model.setFail(nil)
		e.clock.Advance(2 * time.Minute) // the tick re-sends a pending apply's wake-up after a minute
		e.tick()
		e.drainOK()
		if it := e.wantStatus(work.KindApply, id, applies.StatusApplied); it.Attempts != 2 {
			t.Fatalf("applied at attempt %d, want 2", it.Attempts)
		}

		e.settings(func(s *settingsT) { s.Evolution.Level = "L2" })
		e.model.setFail(down)
		run, auto := e.approve(runSpec{files: map[string]string{"prompts/all/a.md": "a"}, auto: true})
		for range 3 {
			e.drainOK()
			e.clock.Advance(2 * time.Minute)
			e.tick()
		}
		it = e.wantStatus(work.KindApply, auto, applies.StatusFailed)
		if it.Reason != "model:server_error" || it.Attempts != 3 {
			t.Fatalf("failed with %q at attempt %d", it.Reason, it.Attempts)
		}
		e.wantStatus(work.KindRun, run, runs.StatusAwaitingReview)

		// Two runs writing one file differently: the agent's answer is garbage.
		e.model.setFail(func(agent string) (model.Response, error, bool) {
			if agent == evolution.AgentApply {
				return model.Response{Text: "no json here"}, nil, true
			}
			return model.Response{}, nil, false
		})
		ids := e.approveAll(runSpec{files: map[string]string{"INDEX.md": "one"}}, runSpec{files: map[string]string{"INDEX.md": "two"}})
		e.drainOK()
		it = e.wantStatus(work.KindApply, ids[2], applies.StatusFailed)
		if !strings.HasPrefix(it.Reason, applies.ReasonMergeFailed) {
			t.Fatalf("reason %q", it.Reason)
		}
		e.wantStatus(work.KindRun, ids[0], runs.StatusApproved)
		e.lockFree("acme")
	})
}

// TestRunMissing: an apply whose run has lost its patch fails run_missing.
func TestRunMissing(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite)
	run, id := e.approve(runSpec{files: map[string]string{"INDEX.md": "x"}})
	if err := e.blobs.Delete(e.ctx, runs.AttemptKey(run, 1, runs.ArtifactPatch)); err != nil {
		t.Fatal(err)
	}
	e.drainOK()
	if it := e.wantStatus(work.KindApply, id, applies.StatusFailed); !strings.HasPrefix(it.Reason, applies.ReasonRunMissing) {
		t.Fatalf("reason %q", it.Reason)
	}
	e.lockFree("acme")
}
