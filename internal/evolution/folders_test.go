package evolution_test

import (
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/workspace"
)

// TestFolderCopies: writing a file into an agent, skill or prompts folder the
// workspace does not override yet creates a workspace folder that replaces the
// lower one as a whole, so every other file the workspace sees
// in that folder must be copied with it; a folder the workspace already
// overrides, a top-level file and a folder that exists nowhere need no copy.
func TestFolderCopies(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	eff := func(scope string, files map[string]string) []workspace.EffectiveFile {
		var out []workspace.EffectiveFile
		for p, c := range files {
			out = append(out, workspace.EffectiveFile{File: workspace.NewFile(scope, p, []byte(c), now), Scope: scope})
		}
		return out
	}
	live := append(eff(workspace.ScopeGlobal, map[string]string{
		"INSTRUCTIONS.md":          "global rules",
		"agents/helper/AGENT.md":   "helper",
		"agents/helper/agent.yaml": "name: helper\n",
		"agents/helper/notes/a.md": "deep",
		"skills/s/SKILL.md":        "skill",
		"skills/s/ref.md":          "ref",
		"prompts/all/a.md":         "a",
		"prompts/all/b.md":         "b",
		"prompts/root/r.md":        "r",
	}), eff(workspace.ScopeBuiltin, map[string]string{
		"agents/main/AGENT.md":   "builtin main",
		"agents/main/agent.yaml": "name: main\n",
	})...)
	live = append(live, eff(workspace.ScopeWorkspace, map[string]string{
		"prompts/root/own.md": "own", // the workspace already overrides prompts/root
	})...)

	got := evolution.FolderCopies(live, []string{
		"INSTRUCTIONS.md",
		"agents/helper/AGENT.md",
		"agents/main/AGENT.md",
		"skills/s/SKILL.md",
		"prompts/all/a.md",
		"prompts/root/r2.md",
		"agents/fresh/AGENT.md",
	})
	var paths []string
	for p := range got {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	want := []string{"agents/helper/agent.yaml", "agents/helper/notes/a.md", "agents/main/agent.yaml", "prompts/all/b.md", "skills/s/ref.md"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("copies %v, want %v", paths, want)
	}
	if string(got["agents/main/agent.yaml"]) != "name: main\n" || string(got["prompts/all/b.md"]) != "b" {
		t.Fatalf("copies hold %q and %q, want the lower files' bytes", got["agents/main/agent.yaml"], got["prompts/all/b.md"])
	}
	if c := evolution.FolderCopies(live, nil); len(c) != 0 {
		t.Fatalf("copies of nothing written: %v", c)
	}
}
