package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
)

func (e *env) readSettings() (settings.Settings, int64) {
	e.t.Helper()
	s, rev, err := e.s.ReadSettings(e.ctx)
	if err != nil {
		e.t.Fatalf("read settings: %v", err)
	}
	return s, rev
}

// testSettingsRevision: every write advances the revision, a conditional write
// lands only over the revision it names, and of writers racing over one
// revision exactly one wins.
func testSettingsRevision(t *testing.T, open Opener) {
	e := setup(t, open)
	s, rev := e.readSettings()
	if s != settings.Default() || rev != 0 {
		t.Fatalf("initial = %+v rev %d, want defaults at 0", s, rev)
	}
	s.Evolution.Level = settings.L1
	got, err := e.s.PutSettingsIf(e.ctx, s, 0)
	if err != nil || got != 1 {
		t.Fatalf("first conditional write = %d %v, want revision 1", got, err)
	}
	if cur, rev := e.readSettings(); cur != s || rev != 1 {
		t.Fatalf("after write = %+v rev %d, want %+v at 1", cur, rev, s)
	}
	stale := s
	stale.Evolution.Level = settings.L3
	for _, old := range []int64{0, 2, 7} {
		_, err := e.s.PutSettingsIf(e.ctx, stale, old)
		wantCode(t, err, molt.ECONFLICT)
		wantReason(t, err, settings.ReasonChanged)
	}
	if cur, rev := e.readSettings(); cur != s || rev != 1 {
		t.Fatalf("a refused write changed the settings: %+v rev %d", cur, rev)
	}
	// An unconditional write advances the revision too: a writer that read
	// before it is refused.
	s.Evolution.MaxAttempts = 5
	if err := e.s.PutSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, rev := e.readSettings(); rev != 2 {
		t.Fatalf("revision after PutSettings = %d, want 2", rev)
	}
	_, err = e.s.PutSettingsIf(e.ctx, stale, 1)
	wantReason(t, err, settings.ReasonChanged)
	// Invalid: nothing written, the revision kept.
	bad := s
	bad.Evolution.MaxAttempts = 0
	_, err = e.s.PutSettingsIf(e.ctx, bad, 2)
	wantCode(t, err, molt.EINVALID)
	if cur, rev := e.readSettings(); cur != s || rev != 2 {
		t.Fatalf("invalid write changed the settings: %+v rev %d", cur, rev)
	}

	// Racers over one revision: exactly one wins, the rest are told it changed.
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := s
			mine.Evolution.AutoApplyThreshold = 10 + i
			_, errs[i] = e.s.PutSettingsIf(e.ctx, mine, 2)
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("racers %d and %d both wrote over revision 2", winner, i)
		case err == nil:
			winner = i
		case molt.ErrorReason(err) != settings.ReasonChanged:
			t.Fatalf("racer %d: %v, want %s", i, err, settings.ReasonChanged)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	cur, rev := e.readSettings()
	if rev != 3 || cur.Evolution.AutoApplyThreshold != 10+winner {
		t.Fatalf("after race = threshold %d rev %d, want %d at 3", cur.Evolution.AutoApplyThreshold, rev, 10+winner)
	}

	// A lost response is never reported as a conflict with itself.
	e.faults.Next(faults.After)
	s = cur
	s.General.Language = "fr-FR"
	got, err = e.s.PutSettingsIf(e.ctx, s, 3)
	e.checkFaultsUsed()
	if molt.ErrorReason(err) == settings.ReasonChanged {
		t.Fatalf("write with a lost response reported as changed: %v", err)
	}
	if cur, rev := e.readSettings(); cur != s || rev != 4 || (err == nil && got != 4) {
		t.Fatalf("after lost response = %+v rev %d (returned %d %v), want %+v at 4", cur, rev, got, err, s)
	}
}

// testSettingsMerge: concurrent partial updates of different keys through
// settings.Service (read, merge, write if the revision is unchanged, again on a
// conflict) all take effect.
func testSettingsMerge(t *testing.T, open Opener) {
	e := setup(t, open)
	svc := &settings.Service{Store: e.s}
	full := auth.Caller{Token: auth.Token{Level: auth.Full}}
	keys := []string{"auto_apply_threshold", "max_concurrent_run", "max_concurrent_apply", "max_attempts"}
	const rounds = 10
	var wg sync.WaitGroup
	errs := make(chan error, len(keys)*rounds)
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				patch := fmt.Sprintf(`{"evolution":{%q:%d}}`, k, i+r)
				if _, _, err := svc.Update(e.ctx, full, []byte(patch)); err != nil {
					errs <- fmt.Errorf("%s round %d: %w", k, r, err)
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
	cur, rev := e.readSettings()
	ev := cur.Evolution
	got := []int{ev.AutoApplyThreshold, ev.MaxConcurrentRun, ev.MaxConcurrentApply, ev.MaxAttempts}
	for i, k := range keys {
		if got[i] != i+rounds {
			t.Errorf("%s = %d, want %d (an update was lost)", k, got[i], i+rounds)
		}
	}
	if want := int64(len(keys) * rounds); rev != want {
		t.Errorf("revision = %d, want %d (one per update)", rev, want)
	}
	// A lost response: read back, reported done, applied once.
	e.faults.Next(faults.After)
	cur, _, err := svc.Update(e.ctx, full, []byte(`{"general":{"language":"fr-FR"}}`))
	e.checkFaultsUsed()
	if err != nil || cur.General.Language != "fr-FR" {
		t.Fatalf("update with a lost response = %+v %v, want it applied", cur.General, err)
	}
	if _, nrev := e.readSettings(); nrev != rev+1 {
		t.Fatalf("revision after lost response = %d, want %d", nrev, rev+1)
	}
	rev++
	// Access: only a full caller.
	ro := auth.Caller{Token: auth.Token{Level: auth.Readonly, Workspace: "acme"}}
	_, _, err = svc.Update(e.ctx, ro, []byte(`{"general":{"language":"de"}}`))
	wantCode(t, err, molt.EFORBIDDEN)
	_, _, err = svc.Get(e.ctx, ro)
	wantCode(t, err, molt.EFORBIDDEN)
	// If-Match: only over a named revision, never merged into a later one.
	_, _, err = svc.UpdateIf(e.ctx, full, []byte(`{"general":{"language":"de"}}`), []int64{rev - 1})
	wantReason(t, err, settings.ReasonChanged)
	if _, nrev, err := svc.UpdateIf(e.ctx, full, []byte(`{"general":{"language":"de"}}`), []int64{rev - 1, rev}); err != nil || nrev != rev+1 {
		t.Fatalf("update over the current revision = %d %v, want %d", nrev, err, rev+1)
	}
}
