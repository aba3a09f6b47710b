package builtin_test

import (
	"testing"
	"testing/fstest"

	"github.com/molt-dev/molt/internal/builtin"
)

func TestAgents(t *testing.T) {
	a := builtin.Agents{FS: fstest.MapFS{
		"agents/__a__/AGENT.md": {Data: []byte(builtin.Marker("__a__") + "\nbe a\n")},
		"agents/__b__/AGENT.md": {Data: []byte("b")},
	}, IDs: []string{"__a__"}}
	if got, ok := a.Get("__a__"); !ok || got != "<!-- molt:internal-agent __a__ -->\nbe a\n" {
		t.Errorf("Get(__a__) = %q, %v", got, ok)
	}
	if _, ok := a.Get("__b__"); ok {
		t.Errorf("Get(__b__): an agent outside the set was found")
	}
	for system, want := range map[string]string{
		builtin.Marker("__a__") + "\nrest":       "__a__",
		"  " + builtin.Marker("__a__") + "  \nx": "__a__",
		builtin.Marker("__b__") + "\nrest":       "",
		"rest\n" + builtin.Marker("__a__"):       "",
		"<!-- molt:internal-agent __a__":         "",
		"":                                       "",
	} {
		got, ok := a.FromSystem(system)
		if got != want || ok != (want != "") {
			t.Errorf("FromSystem(%q) = %q, %v; want %q", system, got, ok, want)
		}
	}
}
