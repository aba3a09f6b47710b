package applies_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// applied returns a fixture whose apply is applied.
func applied(t *testing.T, open opener) *crashFixture {
	t.Helper()
	f := newCrashFixture(t, open, false)
	f.drainOK()
	f.wantStatus(work.KindApply, f.id, applies.StatusApplied)
	return f
}

// untouched checks that a refused rollback wrote nothing: the workspace is as
// the apply left it, no rollback-pre/ or ROLLBACK.json, the apply still
// applied, the lock free.
func (f *crashFixture) untouched(t *testing.T, files map[string]string) {
	t.Helper()
	if got := f.files("acme"); !reflect.DeepEqual(got, files) {
		t.Fatalf("a refused rollback changed the workspace: %v, want %v", got, files)
	}
	keys, err := f.blobs.List(f.ctx, "applies/"+f.id+"/rollback-pre/")
	if err != nil || len(keys) != 0 {
		t.Fatalf("rollback-pre/ = %v (%v), want nothing", keys, err)
	}
	if _, ok := f.blob("applies/" + f.id + "/ROLLBACK.json"); ok {
		t.Fatal("a refused rollback wrote ROLLBACK.json")
	}
	f.wantStatus(work.KindApply, f.id, applies.StatusApplied)
	f.wantStatus(work.KindRun, f.run, runs.StatusApplied)
	f.lockFree("acme")
}

func conflicts(t *testing.T, err error) []applies.Conflict {
	t.Helper()
	me := wantReason(t, err, applies.CodeConflict)
	d, ok := me.Details.(map[string]any)
	if !ok {
		t.Fatalf("conflict details %T", me.Details)
	}
	cs, _ := d["conflicts"].([]applies.Conflict)
	return cs
}

func TestRollback(t *testing.T) {
	t.Parallel()
	t.Run("clean", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			f.rollbackRestores(t)
			f.wantStatus(work.KindApply, f.id, applies.StatusRolledBack)
			f.wantStatus(work.KindRun, f.run, runs.StatusRolledBack)
			f.lockFree("acme")
			b, ok := f.blob("applies/" + f.id + "/ROLLBACK.json")
			if !ok || !strings.Contains(string(b), `"state": "clean"`) {
				t.Fatalf("ROLLBACK.json = %s", b)
			}
			v, err := f.svc.View(f.ctx, f.id)
			if err != nil || v.Status != "rolled_back" || v.Rollback == nil || len(v.Rollback.Restored) != 1 {
				t.Fatalf("view %+v (%v)", v, err)
			}
			// The rollback item ended done, holding nothing.
			pg, err := f.store.ListItems(f.ctx, work.ListQuery{Kind: applies.KindRollback, Page: page.Query{Limit: 10}})
			if err != nil || len(pg.Items) != 1 || pg.Items[0].Status != "done" || pg.Items[0].Active {
				t.Fatalf("rollback items %+v (%v)", pg.Items, err)
			}
			// A second call: not_applied.
			_, err = f.svc.Rollback(f.ctx, f.id, true)
			wantReason(t, err, applies.CodeNotApplied)
		})
	})
	t.Run("already reverted", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			f.put("acme", "INSTRUCTIONS.md", f.initial["INSTRUCTIONS.md"])
			if err := f.store.DeleteFile(f.ctx, "acme", "agents/helper/notes.md"); err != nil {
				t.Fatal(err)
			}
			res, err := f.svc.Rollback(f.ctx, f.id, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Restored) != 0 || !reflect.DeepEqual(res.Removed, []string{"agents/helper/AGENT.md"}) {
				t.Fatalf("result %+v: reverted files must be skipped", res)
			}
			if got := f.files("acme"); !reflect.DeepEqual(got, f.initial) {
				t.Fatalf("workspace %v", got)
			}
		})
	})
	t.Run("modified", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			f.put("acme", "agents/helper/notes.md", "my own notes")
			now := f.files("acme")
			_, err := f.svc.Rollback(f.ctx, f.id, false)
			cs := conflicts(t, err)
			if !reflect.DeepEqual(cs, []applies.Conflict{{Rel: "agents/helper/notes.md", Reason: applies.StateModified}}) {
				t.Fatalf("conflicts %+v", cs)
			}
			f.untouched(t, now)
			if _, err := f.svc.Rollback(f.ctx, f.id, true); err != nil {
				t.Fatalf("forced rollback: %v", err)
			}
			if got := f.files("acme"); !reflect.DeepEqual(got, f.initial) {
				t.Fatalf("workspace %v", got)
			}
			if b, ok := f.blob("applies/" + f.id + "/rollback-pre/agents/helper/notes.md"); !ok || string(b) != "my own notes" {
				t.Fatalf("rollback-pre holds %q %v, want the edit", b, ok)
			}
		})
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			if err := f.store.DeleteFile(f.ctx, "acme", "INSTRUCTIONS.md"); err != nil {
				t.Fatal(err)
			}
			now := f.files("acme")
			_, err := f.svc.Rollback(f.ctx, f.id, false)
			if cs := conflicts(t, err); len(cs) != 1 || cs[0].Reason != applies.StateMissing {
				t.Fatalf("conflicts %+v", cs)
			}
			f.untouched(t, now)
			res, err := f.svc.Rollback(f.ctx, f.id, true)
			if err != nil || !reflect.DeepEqual(res.Restored, []string{"INSTRUCTIONS.md"}) {
				t.Fatalf("forced: %+v %v", res, err)
			}
			if got := f.files("acme"); !reflect.DeepEqual(got, f.initial) {
				t.Fatalf("workspace %v", got)
			}
		})
	})
	t.Run("backup tampered", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			if err := f.blobs.Put(f.ctx, "applies/"+f.id+"/before/INSTRUCTIONS.md", []byte("something else")); err != nil {
				t.Fatal(err)
			}
			now := f.files("acme")
			for _, force := range []bool{false, true} {
				_, err := f.svc.Rollback(f.ctx, f.id, force)
				me := wantReason(t, err, applies.CodeBackupMismatch)
				if d, _ := me.Details.(map[string]any); !reflect.DeepEqual(d["files"], []string{"INSTRUCTIONS.md"}) {
					t.Fatalf("details %v", me.Details)
				}
				f.untouched(t, now)
			}
		})
	})
	t.Run("no snapshot", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			now := f.files("acme")
			backup := "applies/" + f.id + "/before/INSTRUCTIONS.md"
			b, _ := f.blob(backup)
			if err := f.blobs.Delete(f.ctx, backup); err != nil {
				t.Fatal(err)
			}
			_, err := f.svc.Rollback(f.ctx, f.id, true)
			wantReason(t, err, applies.CodeNoSnapshot)
			f.untouched(t, now)
			if err := f.blobs.Put(f.ctx, backup, b); err != nil {
				t.Fatal(err)
			}
			// A manifest that is not the one the checkpoint recorded (a path
			// rewritten to escape the surface).
			_, mb := f.manifest(f.id)
			bad := strings.Replace(string(mb), `"rel": "INSTRUCTIONS.md"`, `"rel": "../etc/passwd"`, 1)
			if err := f.blobs.Put(f.ctx, "applies/"+f.id+"/MANIFEST.json", []byte(bad)); err != nil {
				t.Fatal(err)
			}
			_, err = f.svc.Rollback(f.ctx, f.id, true)
			wantReason(t, err, applies.CodeNoSnapshot)
			if err := f.blobs.Delete(f.ctx, "applies/"+f.id+"/MANIFEST.json"); err != nil {
				t.Fatal(err)
			}
			_, err = f.svc.Rollback(f.ctx, f.id, true)
			wantReason(t, err, applies.CodeNoSnapshot)
			f.untouched(t, now)
		})
	})
	t.Run("created folder gained a file", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			f.put("acme", "agents/helper/extra.md", "mine")
			res, err := f.svc.Rollback(f.ctx, f.id, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.KeptDirs, []string{"agents/helper", "agents"}) || len(res.RemovedDirs) != 0 {
				t.Fatalf("kept %v removed %v", res.KeptDirs, res.RemovedDirs)
			}
			want := map[string]string{"agents/helper/extra.md": "mine"}
			for p, c := range f.initial {
				want[p] = c
			}
			if got := f.files("acme"); !reflect.DeepEqual(got, want) {
				t.Fatalf("workspace %v", got)
			}
		})
	})
	t.Run("apply in flight", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			now := f.files("acme")
			// A pending apply of the workspace.
			_, next := f.approve(runSpec{files: map[string]string{"prompts/all/z.md": "z"}})
			_, err := f.svc.Rollback(f.ctx, f.id, true)
			wantReason(t, err, applies.CodeApplyInFlight)
			f.untouched(t, now)
			// Running (its worker died after the merge).
			f.crashAt("merge", next, 1)
			f.drain()
			f.wantStatus(work.KindApply, next, applies.StatusRunning)
			_, err = f.svc.Rollback(f.ctx, f.id, true)
			wantReason(t, err, applies.CodeApplyInFlight)
			f.stale()
			f.tick()
			f.drainOK()
			f.wantStatus(work.KindApply, next, applies.StatusApplied)
			// A pending apply of another workspace does not matter.
			f.approve(runSpec{ws: "beta", files: map[string]string{"prompts/all/z.md": "z"}})
			if _, err := f.svc.Rollback(f.ctx, f.id, false); err != nil {
				t.Fatalf("rollback after the other apply: %v", err)
			}
		})
	})
	t.Run("crashed rollback", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			f := applied(t, open)
			// The rollback dies after restoring the first file, holding the lock.
			f.crashAt("rollback:file:1", f.id, 1)
			if _, err := f.svc.Rollback(f.ctx, f.id, false); !errors.Is(err, errCrash) {
				t.Fatalf("rollback = %v, want the crash", err)
			}
			if h, _ := f.store.LockHolder(f.ctx, applies.LockKey("acme")); !strings.HasPrefix(h, string(applies.KindRollback)+"/") {
				t.Fatalf("lock holder %q, want the rollback", h)
			}
			// An apply approved meanwhile cannot start: the lock is the rollback's.
			_, next := f.approve(runSpec{files: map[string]string{"prompts/all/z.md": "z"}})
			f.drainOK()
			f.wantStatus(work.KindApply, next, applies.StatusPending)
			_, err := f.svc.Rollback(f.ctx, f.id, false)
			wantReason(t, err, applies.CodeApplyInFlight)
			// The tick ends the dead rollback (its claim timed out), releasing the
			// lock, and re-sends the waiting apply's wake-up.
			f.clock.Advance(3 * time.Minute)
			if res := f.tick(); res.Expired != 1 {
				t.Fatalf("tick %+v, want the rollback expired", res)
			}
			f.drainOK()
			f.wantStatus(work.KindApply, next, applies.StatusApplied)
			// Rolling back again finishes the job: the restored file is reverted.
			res, err := f.svc.Rollback(f.ctx, f.id, false)
			if err != nil {
				t.Fatalf("second rollback: %v", err)
			}
			if len(res.Restored) != 0 || len(res.Removed) != 2 {
				t.Fatalf("result %+v", res)
			}
			want := map[string]string{"prompts/all/z.md": "z"}
			for p, c := range f.initial {
				want[p] = c
			}
			if got := f.files("acme"); !reflect.DeepEqual(got, want) {
				t.Fatalf("workspace %v", got)
			}
		})
	})
	t.Run("concurrent rollbacks", func(t *testing.T) {
		t.Parallel()
		eachStore(t, func(t *testing.T, open opener) {
			e := setup(t, open)
			var ids []string
			for _, p := range []string{"prompts/all/a.md", "prompts/all/b.md", "INDEX.md"} {
				_, id := e.approve(runSpec{files: map[string]string{p: "x"}})
				ids = append(ids, id)
			}
			e.drainOK()
			// Each call either holds the workspace's lock for its whole rollback
			// or is refused apply_in_flight; the refused one can run again.
			for len(ids) > 0 {
				errs := make([]error, len(ids))
				var wg sync.WaitGroup
				for i, id := range ids {
					wg.Go(func() { _, errs[i] = e.svc.Rollback(e.ctx, id, false) })
				}
				wg.Wait()
				var left []string
				for i, err := range errs {
					switch {
					case err == nil:
						e.wantStatus(work.KindApply, ids[i], applies.StatusRolledBack)
					case molt.ErrorReason(err) == applies.CodeApplyInFlight:
						left = append(left, ids[i])
					default:
						t.Fatalf("rollback %s: %v", ids[i], err)
					}
				}
				if len(left) == len(ids) {
					t.Fatal("every concurrent rollback was refused")
				}
				ids = left
			}
			if got := e.files("acme"); len(got) != 0 {
				t.Fatalf("workspace after every rollback: %v", got)
			}
			e.lockFree("acme")
		})
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite)
		_, err := e.svc.Rollback(e.ctx, "nope", false)
		if molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("err %v", err)
		}
	})
}

// TestRollbackRacesDelete: deleting the run while a rollback of its apply is
// restoring files is refused (apply_in_flight), whether the delete read the
// apply before the rollback claimed the workspace's lock or after: otherwise
// the rows and the snapshot would go from under the rollback, which would end
// in an error with the files half restored and leave rollback-pre/ and
// ROLLBACK.json behind for good. Once the rollback is done the delete goes
// through.
func TestRollbackRacesDelete(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"rollback:file:0", "rollback:claimed"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, open opener) {
				f := applied(t, open)
				var derr error
				var once sync.Once
				f.mu.Lock()
				f.onStep = func(step, id string) error {
					if step == when && id == f.id {
						once.Do(func() { derr = f.app.Runs.Delete(f.ctx, f.run) })
					}
					return nil
				}
				f.mu.Unlock()
				_, err := f.svc.Rollback(f.ctx, f.id, false)
				f.mu.Lock()
				f.onStep = nil
				f.mu.Unlock()
				if err != nil {
					t.Fatalf("rollback with a delete meanwhile: %v (delete: %v)", err, derr)
				}
				if molt.ErrorReason(derr) != runs.CodeApplyInFlight {
					t.Fatalf("delete during the rollback = %v, want %s", derr, runs.CodeApplyInFlight)
				}
				f.wantStatus(work.KindApply, f.id, applies.StatusRolledBack)
				if got := f.files("acme"); !reflect.DeepEqual(got, f.initial) {
					t.Fatalf("workspace %v", got)
				}
				if err := f.app.Runs.Delete(f.ctx, f.run); err != nil {
					t.Fatalf("delete after the rollback: %v", err)
				}
				if left, _ := f.blobs.List(f.ctx, "applies/"+f.id+"/"); len(left) != 0 {
					t.Fatalf("blobs of the deleted apply: %v", left)
				}
			})
		})
	}
}

// TestDeleteRacesRollback: a rollback that claims the workspace between the
// delete's read of the apply and its write makes the delete refuse
// (apply_in_flight) instead of removing the apply under the rollback, which
// then completes.
func TestDeleteRacesRollback(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		f := applied(t, open)
		claimed, release := make(chan struct{}), make(chan struct{})
		f.mu.Lock()
		f.onStep = func(step, id string) error {
			if step == "rollback:claimed" {
				close(claimed)
				<-release
			}
			return nil
		}
		f.mu.Unlock()
		var rerr error
		done := make(chan struct{})
		var once sync.Once
		f.store.setBeforeFinish(func(ops []work.Op) {
			if d, ok := ops[0].(work.DeleteItem); !ok || d.Kind != work.KindRun || d.ID != f.run {
				return
			}
			// The delete has read the run and its apply: a rollback claims now.
			once.Do(func() {
				go func() {
					defer close(done)
					_, rerr = f.svc.Rollback(f.ctx, f.id, false)
				}()
				<-claimed
			})
		})
		derr := f.app.Runs.Delete(f.ctx, f.run)
		f.store.setBeforeFinish(nil)
		close(release)
		<-done
		if molt.ErrorReason(derr) != runs.CodeApplyInFlight {
			t.Fatalf("delete with a rollback claimed meanwhile = %v, want %s", derr, runs.CodeApplyInFlight)
		}
		if rerr != nil {
			t.Fatalf("rollback: %v", rerr)
		}
		f.wantStatus(work.KindApply, f.id, applies.StatusRolledBack)
		f.wantStatus(work.KindRun, f.run, runs.StatusRolledBack)
		if got := f.files("acme"); !reflect.DeepEqual(got, f.initial) {
			t.Fatalf("workspace %v", got)
		}
	})
}
