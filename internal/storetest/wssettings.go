package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

func (e *env) readWSSettings(ws string) (settings.Overrides, int64) {
	e.t.Helper()
	o, rev, err := e.s.ReadWorkspaceSettings(e.ctx, ws)
	if err != nil {
		e.t.Fatalf("read settings of %s: %v", ws, err)
	}
	return o, rev
}

// testWorkspaceSettings: a workspace's overrides have a revision that every
// write advances; a conditional write lands only over the revision it names,
// and of racers over one revision exactly one wins; updating the workspace
// keeps them, deleting it deletes them, and a workspace created again under
// its name starts with none.
func testWorkspaceSettings(t *testing.T, open Opener) {
	e := setup(t, open)
	_, _, err := e.s.ReadWorkspaceSettings(e.ctx, "acme")
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.PutWorkspaceSettingsIf(e.ctx, "acme", settings.Overrides{}, 0)
	wantCode(t, err, molt.ENOTFOUND)
	_, _, err = e.s.ReadWorkspaceSettings(e.ctx, "Not A Name")
	wantCode(t, err, molt.EINVALID)

	e.putWorkspace("acme")
	e.putWorkspace("other")
	if o, rev := e.readWSSettings("acme"); !o.Equal(settings.Overrides{}) || rev != 0 {
		t.Fatalf("initial = %+v rev %d, want none at 0", o, rev)
	}
	var o settings.Overrides
	o.Naming.Mode = work.Ptr(settings.NamingDisabled)
	got, err := e.s.PutWorkspaceSettingsIf(e.ctx, "acme", o, 0)
	if err != nil || got != 1 {
		t.Fatalf("first write = %d %v, want revision 1", got, err)
	}
	if cur, rev := e.readWSSettings("acme"); !cur.Equal(o) || rev != 1 {
		t.Fatalf("after write = %+v rev %d, want %+v at 1", cur, rev, o)
	}
	if cur, rev := e.readWSSettings("other"); !cur.Equal(settings.Overrides{}) || rev != 0 {
		t.Fatalf("other workspace = %+v rev %d, want none at 0", cur, rev)
	}
	stale := o.Clone()
	stale.Naming.TimeoutSeconds = work.Ptr(9)
	for _, old := range []int64{0, 2, 7} {
		_, err := e.s.PutWorkspaceSettingsIf(e.ctx, "acme", stale, old)
		wantCode(t, err, molt.ECONFLICT)
		wantReason(t, err, settings.ReasonChanged)
	}
	// Invalid: nothing written.
	bad := o.Clone()
	bad.Naming.TimeoutSeconds = work.Ptr(settings.MaxNamingTimeout + 1)
	_, err = e.s.PutWorkspaceSettingsIf(e.ctx, "acme", bad, 1)
	wantCode(t, err, molt.EINVALID)
	if cur, rev := e.readWSSettings("acme"); !cur.Equal(o) || rev != 1 {
		t.Fatalf("a refused write changed the overrides: %+v rev %d", cur, rev)
	}
	// Updating the workspace keeps its overrides.
	if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme", Description: "changed"}); err != nil {
		t.Fatal(err)
	}
	if cur, rev := e.readWSSettings("acme"); !cur.Equal(o) || rev != 1 {
		t.Fatalf("after PutWorkspace = %+v rev %d, want %+v at 1", cur, rev, o)
	}

	// Racers over one revision: exactly one wins.
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := o.Clone()
			mine.Naming.TimeoutSeconds = work.Ptr(10 + i)
			_, errs[i] = e.s.PutWorkspaceSettingsIf(e.ctx, "acme", mine, 1)
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("racers %d and %d both wrote over revision 1", winner, i)
		case err == nil:
			winner = i
		case molt.ErrorReason(err) != settings.ReasonChanged:
			t.Fatalf("racer %d: %v, want %s", i, err, settings.ReasonChanged)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	cur, rev := e.readWSSettings("acme")
	if rev != 2 || cur.Naming.TimeoutSeconds == nil || *cur.Naming.TimeoutSeconds != 10+winner {
		t.Fatalf("after race = %+v rev %d, want timeout %d at 2", cur.Naming, rev, 10+winner)
	}

	// A lost response is never reported as a conflict with itself.
	e.faults.Next(faults.After)
	next := cur.Clone()
	next.Naming.Model = work.Ptr("cheap")
	got, err = e.s.PutWorkspaceSettingsIf(e.ctx, "acme", next, 2)
	e.checkFaultsUsed()
	if molt.ErrorReason(err) == settings.ReasonChanged {
		t.Fatalf("write with a lost response reported as changed: %v", err)
	}
	if cur, rev := e.readWSSettings("acme"); !cur.Equal(next) || rev != 3 || (err == nil && got != 3) {
		t.Fatalf("after lost response = %+v rev %d (returned %d %v), want %+v at 3", cur, rev, got, err, next)
	}

	// Deleting the workspace deletes its overrides.
	if err := e.s.DeleteWorkspace(e.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.s.ReadWorkspaceSettings(e.ctx, "acme")
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.PutWorkspaceSettingsIf(e.ctx, "acme", next, 3)
	wantCode(t, err, molt.ENOTFOUND)
	e.putWorkspace("acme")
	if cur, rev := e.readWSSettings("acme"); !cur.Equal(settings.Overrides{}) || rev != 0 {
		t.Fatalf("re-created workspace = %+v rev %d, want none at 0", cur, rev)
	}
	if cur, rev := e.readWSSettings("other"); !cur.Equal(settings.Overrides{}) || rev != 0 {
		t.Fatalf("other workspace = %+v rev %d, want none at 0", cur, rev)
	}
}

// testWorkspaceSettingsMerge: concurrent partial updates of different keys
// through settings.WorkspaceService (read, merge, write if the revision is
// unchanged, again on a conflict) all take effect, nulls included; access
// follows the workspace's.
func testWorkspaceSettingsMerge(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	svc := &settings.WorkspaceService{Store: e.s}
	full := auth.Caller{Token: auth.Token{Level: auth.Full}}
	const rounds = 8
	patches := []func(r int) string{
		func(r int) string { return fmt.Sprintf(`{"naming":{"timeout_seconds":%d}}`, r) },
		func(r int) string { return fmt.Sprintf(`{"naming":{"model":"m%d"}}`, r) },
		func(r int) string {
			// Ends with a mode set: null and a value alternate.
			if r%2 == 1 {
				return `{"naming":{"mode":null}}`
			}
			return `{"naming":{"mode":"always"}}`
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(patches)*rounds)
	for i, p := range patches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				if _, err := svc.Update(e.ctx, full, "acme", []byte(p(r))); err != nil {
					errs <- fmt.Errorf("patch %d round %d: %w", i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cur, rev := e.readWSSettings("acme")
	n := cur.Naming
	if n.TimeoutSeconds == nil || *n.TimeoutSeconds != rounds || n.Model == nil || *n.Model != fmt.Sprintf("m%d", rounds) ||
		n.Mode == nil || *n.Mode != settings.NamingAlways {
		t.Errorf("overrides = %s, want timeout %d, model m%d, mode always (an update was lost)", cur.Encode(), rounds, rounds)
	}
	if want := int64(len(patches) * rounds); rev != want {
		t.Errorf("revision = %d, want %d (one per update)", rev, want)
	}
	// A lost response: read back, reported done, applied once.
	e.faults.Next(faults.After)
	got, err := svc.Update(e.ctx, full, "acme", []byte(`{"naming":{"model":null}}`))
	e.checkFaultsUsed()
	if err != nil || got.Naming.Model != nil || got.Revision != rev+1 {
		t.Fatalf("update with a lost response = %s rev %d %v, want it applied at %d", got.Encode(), got.Revision, err, rev+1)
	}
	if got.Effective.Naming.Model != "" || got.Effective.Naming.TimeoutSeconds != rounds {
		t.Errorf("effective = %+v, want the global model and timeout %d", got.Effective.Naming, rounds)
	}

	// Access: a scoped caller of the workspace reads, never writes; one of
	// another workspace sees nothing.
	ro := auth.Caller{Token: auth.Token{Level: auth.Readonly, Workspace: "acme"}}
	if _, err := svc.Get(e.ctx, ro, "acme"); err != nil {
		t.Fatalf("readonly get: %v", err)
	}
	_, err = svc.Update(e.ctx, ro, "acme", []byte(`{"naming":{"mode":"once"}}`))
	wantCode(t, err, molt.EFORBIDDEN)
	wsTok := auth.Caller{Token: auth.Token{Level: auth.Workspace, Workspace: "acme"}}
	_, err = svc.Update(e.ctx, wsTok, "acme", []byte(`{"naming":{"mode":"once"}}`))
	wantCode(t, err, molt.EFORBIDDEN)
	other := auth.Caller{Token: auth.Token{Level: auth.Workspace, Workspace: "other"}}
	_, err = svc.Get(e.ctx, other, "acme")
	wantCode(t, err, molt.ENOTFOUND)
	_, err = svc.Update(e.ctx, full, "acme", []byte(`{"naming":{"mode":"never"}}`))
	wantCode(t, err, molt.EINVALID)
	if _, nrev := e.readWSSettings("acme"); nrev != rev+1 {
		t.Fatalf("revision after refused updates = %d, want %d", nrev, rev+1)
	}
}
