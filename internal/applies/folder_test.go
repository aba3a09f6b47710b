package applies_test

import (
	"reflect"
	"testing"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// effective returns the surface an agent of ws sees: path → scope and content.
func (e *env) effective(ws string) map[string][2]string {
	e.t.Helper()
	global, err := e.store.ListFiles(e.ctx, workspace.Global)
	if err != nil {
		e.t.Fatal(err)
	}
	own, err := e.store.ListFiles(e.ctx, ws)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][2]string{}
	for _, f := range chat.Surface(chat.Builtin(), global, own) {
		out[f.Path] = [2]string{f.Scope, string(f.Content)}
	}
	return out
}

// TestFolderOverride: a patch that writes one file of a global agent folder
// (or of a built-in one) must not hide the folder's other files. A workspace
// folder agents/<id>/ replaces the lower folder as a whole, so
// the apply publishes, with the patched file, a byte-equal copy of every other
// file the workspace saw in that folder, recorded in the manifest as new and
// unchanged: the notice and the published list leave them out, and a rollback
// removes them with the folder, giving the workspace its global folder back.
func TestFolderOverride(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		e.settings(func(s *settingsT) { s.Evolution.Level = "L2" })
		yaml := "name: helper\ndescription: Helps\ntools: [read_file]\nsystem_prompt: Sign as Helper.\n"
		e.put("global", "agents/helper/AGENT.md", "global helper")
		e.put("global", "agents/helper/agent.yaml", yaml)
		before := e.effective("acme")
		builtinYAML := before["agents/main/agent.yaml"]
		if builtinYAML[0] != workspace.ScopeBuiltin {
			t.Fatalf("agents/main/agent.yaml is %v, want the built-in file", builtinYAML)
		}

		base := map[string]string{} // the surface the run drafted against: the effective one
		for p, f := range before {
			base[p] = f[1]
		}
		run, id := e.approve(runSpec{auto: true, base: base, files: map[string]string{
			"agents/helper/AGENT.md": "a better helper",
			"agents/main/AGENT.md":   "a better main",
		}})
		e.drainOK()
		e.wantStatus(work.KindApply, id, applies.StatusApplied)
		e.wantStatus(work.KindRun, run, runs.StatusApplied)

		after := e.effective("acme")
		for path, want := range map[string]string{
			"agents/helper/AGENT.md":   "a better helper",
			"agents/helper/agent.yaml": yaml,
			"agents/main/AGENT.md":     "a better main",
			"agents/main/agent.yaml":   builtinYAML[1],
		} {
			if got, ok := after[path]; !ok || got[1] != want {
				t.Errorf("after the apply %s is %v (present %v), want %q: the folder override hid it", path, got, ok, want)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		m, _ := e.manifest(id)
		got := map[string]applies.ManifestFile{}
		for _, f := range m.Files {
			got[f.Rel] = f
		}
		for _, p := range []string{"agents/helper/agent.yaml", "agents/main/agent.yaml"} {
			if f := got[p]; f.Kind != applies.KindNew || !f.Unchanged || f.After == "" {
				t.Fatalf("%s in the manifest = %+v, want a new, unchanged copy", p, f)
			}
		}
		d := e.data(id)
		if !reflect.DeepEqual(d.Published, []string{"agents/helper/AGENT.md", "agents/main/AGENT.md"}) ||
			!reflect.DeepEqual(d.Unchanged, []string{"agents/helper/agent.yaml", "agents/main/agent.yaml"}) {
			t.Fatalf("published %v unchanged %v", d.Published, d.Unchanged)
		}

		res, err := e.svc.Rollback(e.ctx, id, false)
		if err != nil {
			t.Fatalf("rollback: %v", err)
		}
		if !reflect.DeepEqual(res.RemovedDirs, []string{"agents/helper", "agents/main", "agents"}) || len(res.KeptDirs) != 0 {
			t.Fatalf("rollback result %+v", res)
		}
		if got := e.files("acme"); len(got) != 0 {
			t.Fatalf("workspace after the rollback: %v", got)
		}
		if got := e.effective("acme"); !reflect.DeepEqual(got, before) {
			t.Fatalf("effective surface after the rollback %v, want %v", got, before)
		}
	})
}
