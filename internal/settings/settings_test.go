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
