package settings_test

import (
	"testing"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
)

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	if err := settings.Default().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	base := settings.Default()
	got, err := settings.Merge(base, []byte(`{"evolution":{"level":"L2","triggers":{"pre_compact":false}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.Evolution.Level = "L2"
	want.Evolution.Triggers.PreCompact = false
	if got != want {
		t.Fatalf("Merge = %+v, want %+v", got, want)
	}
	cases := []struct{ patch, field string }{
		{`{"evolution":{"max_attempts":0}}`, "evolution.max_attempts"},
		{`{"evolution":{"auto_apply_threshold":101}}`, "evolution.auto_apply_threshold"},
		{`{"evolution":{"level":"L9"}}`, "evolution.level"},
		{`{"general":{"language":"not a tag!"}}`, "general.language"},
		{`{"evolution":{"max_attempts":"3"}}`, "evolution.max_attempts"},
		{`{"evolution":{"bogus":1}}`, "bogus"},
		{`{"evolution":{"heartbeat_seconds":600,"run_timeout_minutes":12}}`, "evolution.heartbeat_seconds"},
		{`{"evolution":{}} {}`, "body"},
		{``, "body"},
	}
	for _, c := range cases {
		out, err := settings.Merge(base, []byte(c.patch))
		var e *molt.Error
		if me, ok := err.(*molt.Error); ok {
			e = me
		}
		if e == nil || e.Code != molt.EINVALID || e.Field != c.field {
			t.Errorf("Merge(%s) = %v, want invalid naming %s", c.patch, err, c.field)
		}
		if out != base {
			t.Errorf("Merge(%s) changed the settings on error", c.patch)
		}
	}
}

func TestMergeOverrides(t *testing.T) {
	t.Parallel()
	base, err := settings.MergeOverrides(settings.Overrides{}, []byte(`{"naming":{"mode":"always","timeout_seconds":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := settings.MergeOverrides(base, []byte(`{"naming":{"timeout_seconds":9,"mode":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Naming.Mode != nil || got.Naming.TimeoutSeconds == nil || *got.Naming.TimeoutSeconds != 9 || got.Naming.Model != nil {
		t.Fatalf("merged = %s, want only timeout 9", got.Encode())
	}
	// The merge never writes through the pointers of what it merged into.
	if base.Naming.Mode == nil || *base.Naming.Mode != "always" || *base.Naming.TimeoutSeconds != 5 {
		t.Fatalf("the merge changed its input: %s", base.Encode())
	}
	g := settings.Default().Naming
	g.Model = "cheap"
	if n := got.Naming.Apply(g); n.Mode != settings.NamingOnce || n.TimeoutSeconds != 9 || n.Model != "cheap" {
		t.Fatalf("effective = %+v, want once (global), 9, cheap (global)", n)
	}
	for _, c := range []struct{ patch, field string }{
		{`{"naming":{"mode":"sometimes"}}`, "naming.mode"},
		{`{"naming":{"timeout_seconds":0}}`, "naming.timeout_seconds"},
		{`{"naming":{"timeout_seconds":301}}`, "naming.timeout_seconds"},
		{`{"naming":{"timeout_seconds":true}}`, "naming.timeout_seconds"},
		{`{"naming":{"model":"a b"}}`, "naming.model"},
		{`{"naming":{"bogus":1}}`, "bogus"},
		{`{"evolution":{}}`, "evolution"},
	} {
		out, err := settings.MergeOverrides(base, []byte(c.patch))
		e, _ := err.(*molt.Error)
		if e == nil || e.Code != molt.EINVALID || e.Field != c.field {
			t.Errorf("MergeOverrides(%s) = %v, want invalid naming %s", c.patch, err, c.field)
		}
		if !out.Equal(base) {
			t.Errorf("MergeOverrides(%s) changed the overrides on error", c.patch)
		}
	}
}
