package offlineevo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/workspace"
)

func generate(t *testing.T, req model.Request) model.Response {
	t.Helper()
	m := offlineevo.New()
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	again, _ := m.Generate(context.Background(), req)
	if again.Text != resp.Text {
		t.Fatalf("offline answer is not deterministic")
	}
	if resp.Model != offline.Name || !strings.HasPrefix(resp.Text, offline.Label) {
		t.Fatalf("answer is not labelled offline: model %q, text %q", resp.Model, resp.Text)
	}
	return resp
}

var now = time.Unix(1700000000, 0)

func surface(instructions *string) ([]workspace.EffectiveFile, []workspace.File) {
	global := []workspace.File{workspace.NewFile(workspace.Global, "agents/main/AGENT.md", []byte("You are main.\n"), now)}
	var ws []workspace.File
	if instructions != nil {
		ws = append(ws, workspace.NewFile("acme", "INSTRUCTIONS.md", []byte(*instructions), now))
	}
	return workspace.Effective(global, ws), global
}

func draft(t *testing.T, hint string, instructions *string) evolution.Patch {
	t.Helper()
	live, _ := surface(instructions)
	resp := generate(t, evolution.DraftPrompt(evolution.DraftInput{
		RunID: "r1", Workspace: "acme", Agent: "main", Trigger: "evo", Hint: hint, Language: "en-US",
		Transcript: "### #1 user\n\nBonjour", Surface: live,
	}))
	p, err := evolution.ParsePatch(resp.Text)
	if err != nil {
		t.Fatalf("ParsePatch(offline draft): %v\n%s", err, resp.Text)
	}
	return p
}

func ptr(s string) *string { return &s }

func TestDraftFromHint(t *testing.T) {
	t.Parallel()
	base := "# Acme\n\nBe kind.\n"
	p := draft(t, "  always answer\nin French ", &base)
	want := "# Acme\n\nBe kind.\n\n## Rules\n\n- always answer in French\n"
	if p.Skipped() || len(p.Files) != 1 || p.Files[0].Path != "INSTRUCTIONS.md" || p.Files[0].Content != want {
		t.Fatalf("patch files = %+v, want INSTRUCTIONS.md = %q", p.Files, want)
	}
	if p.TestScenario.Message != offlineevo.ScenarioMessage || p.TestScenario.Description != "The answer follows the new rule: always answer in French" {
		t.Errorf("test scenario = %+v", p.TestScenario)
	}
	if !strings.Contains(p.Rationale, `"always answer in French"`) || p.HasObservation {
		t.Errorf("rationale %q, observation %v", p.Rationale, p.HasObservation)
	}

	// The live surface classifies it as a prompt change that passes at L2 with
	// the offline score, and fails below_threshold at 100.
	live, global := surface(&base)
	files, cat := evolution.Classify(live, global, p.Sandbox(), p.Deletes)
	if cat != evolution.CategoryPrompt || len(files) != 1 {
		t.Fatalf("Classify = %+v, %q", files, cat)
	}
	s := score(t)
	s.Checks.PatchInSandbox = true
	if v := evolution.Decide("L2", 80, "full", files, cat, &s); !v.Passed {
		t.Errorf("offline run at L2/80 does not pass: %+v", v)
	}
	if v := evolution.Decide("L2", 100, "full", files, cat, &s); v.Reason != evolution.ReasonBelowThreshold {
		t.Errorf("offline run at L2/100: reason %q, want below_threshold", v.Reason)
	}
	md := evolution.RenderPatchMD(p, map[string]string{"INSTRUCTIONS.md": base})
	if !strings.Contains(md, "+- always answer in French\n") {
		t.Errorf("patch.md lacks the rule:\n%s", md)
	}
}

func TestDraftVariants(t *testing.T) {
	t.Parallel()
	t.Run("no INSTRUCTIONS.md creates it", func(t *testing.T) {
		t.Parallel()
		p := draft(t, "be brief", nil)
		if got := p.Files[0].Content; got != "## Rules\n\n- be brief\n" {
			t.Fatalf("content = %q", got)
		}
	})
	t.Run("existing Rules section", func(t *testing.T) {
		t.Parallel()
		p := draft(t, "be brief", ptr("# A\n\n## Rules\n\n- be kind\n\n## Tone\n\nWarm.\n"))
		if got, want := p.Files[0].Content, "# A\n\n## Rules\n\n- be kind\n- be brief\n\n## Tone\n\nWarm.\n"; got != want {
			t.Fatalf("content = %q, want %q", got, want)
		}
	})
	t.Run("observe in the hint", func(t *testing.T) {
		t.Parallel()
		p := draft(t, "Observe how often tools time out", ptr("x\n"))
		if !p.HasObservation || !strings.Contains(p.Observation, "Observe how often tools time out") {
			t.Fatalf("observation = %v %q", p.HasObservation, p.Observation)
		}
		if q := draft(t, "observed facts only", ptr("x\n")); q.HasObservation {
			t.Errorf("\"observed\" is not the word observe, got an observation")
		}
	})
	t.Run("no hint skips", func(t *testing.T) {
		t.Parallel()
		p := draft(t, " \n ", ptr("x\n"))
		if p.SkipReason != "no hint: offline model drafts only from a hint" || len(p.Files) != 0 {
			t.Fatalf("patch = %+v", p)
		}
	})
	t.Run("rule already present is no effective change", func(t *testing.T) {
		t.Parallel()
		base := "## Rules\n\n- be brief\n"
		p := draft(t, "be brief", &base)
		live, global := surface(&base)
		if p.Files[0].Content != base {
			t.Fatalf("content = %q, want it unchanged", p.Files[0].Content)
		}
		files, cat := evolution.Classify(live, global, p.Sandbox(), nil)
		if cat != evolution.CategoryNone || len(files) != 0 {
			t.Fatalf("Classify = %+v %q, want no change", files, cat)
		}
		s := offlineevo.Score
		s.Checks.PatchInSandbox = true
		if v := evolution.Decide("L2", 80, "full", files, cat, &s); v.Reason != evolution.ReasonNoEffectiveChange {
			t.Fatalf("reason = %q, want no_effective_change", v.Reason)
		}
	})
}

func score(t *testing.T) evolution.Score {
	t.Helper()
	resp := generate(t, evolution.ScorePrompt(evolution.ScoreInput{RunID: "r1", PatchMD: "x", DryRun: "y"}))
	s, err := evolution.ParseScore(resp.Text)
	if err != nil {
		t.Fatalf("ParseScore(offline score): %v\n%s", err, resp.Text)
	}
	return s
}

func TestScore(t *testing.T) {
	t.Parallel()
	s := score(t)
	if s != offlineevo.Score {
		t.Fatalf("score = %+v, want %+v", s, offlineevo.Score)
	}
	want := evolution.Score{Lint: 100, Behavior: 85, Scope: 90, Avg: 88, Confidence: "high",
		Checks: evolution.Checks{UsedInDryRun: true, Probe: true, ProbeLanguage: true}, Notes: s.Notes}
	if s != want {
		t.Fatalf("score = %+v, want the documented %+v", s, want)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	base := "# Acme\n\n## Rules\n\n- be kind\n"
	a := draft(t, "answer in French", &base)
	b := draft(t, "be brief", &base)
	resp := generate(t, evolution.MergePrompt(evolution.MergeInput{
		Workspace: "acme", Paths: []string{"INSTRUCTIONS.md"},
		Current: map[string]string{"INSTRUCTIONS.md": base},
		Patches: []evolution.MergePatch{{RunID: "r1", Rationale: a.Rationale, Files: a.Files}, {RunID: "r2", Rationale: b.Rationale, Files: b.Files}},
	}))
	m, err := evolution.ParseMerge(resp.Text, "INSTRUCTIONS.md")
	if err != nil {
		t.Fatalf("ParseMerge(offline merge): %v\n%s", err, resp.Text)
	}
	if got, want := m.Files[0].Content, base+"- answer in French\n- be brief\n"; got != want {
		t.Fatalf("merged = %q, want %q", got, want)
	}
}

func TestOtherRequestsPassThrough(t *testing.T) {
	t.Parallel()
	// A dry-run is an ordinary chat request: the normal labelled offline reply.
	resp := generate(t, model.Request{System: "You are main.\n\n## Rules\n\n- be brief", Messages: []model.Message{{Role: model.RoleUser, Text: offlineevo.ScenarioMessage}}})
	if !strings.Contains(resp.Text, "deterministic offline reply") {
		t.Fatalf("dry-run answer = %q", resp.Text)
	}
	if _, ok := offlineevo.Handle(model.Request{System: model.SummarizeMarker}); ok {
		t.Errorf("Handle answered a summarisation request")
	}
}

func TestAddRule(t *testing.T) {
	t.Parallel()
	cases := []struct{ content, want string }{
		{"", "## Rules\n\n- r\n"},
		{"x", "x\n\n## Rules\n\n- r\n"},
		{"x\n", "x\n\n## Rules\n\n- r\n"},
		{"x\n\n", "x\n\n## Rules\n\n- r\n"},
		{"## Rules\n", "## Rules\n\n- r\n"},
		{"## Rules", "## Rules\n\n- r"},
		{"## Rules\n- a", "## Rules\n- a\n- r"},
		{"## rules\n\n- a\n\n\n# Next\n", "## rules\n\n- a\n- r\n\n\n# Next\n"},
		{"## Rules\n\n### Sub\n- a\n## Next\n- b\n", "## Rules\n\n### Sub\n- a\n- r\n## Next\n- b\n"},
		{"## Rules\n\n## Next\n", "## Rules\n\n- r\n\n## Next\n"},
		{"## Rules\n\n- r\n- a\n", "## Rules\n\n- r\n- a\n"},
		{"## Rules\n\n- a\n## Next\n- r\n", "## Rules\n\n- a\n- r\n## Next\n- r\n"},
	}
	for _, c := range cases {
		if got := offlineevo.AddRule(c.content, "r"); got != c.want {
			t.Errorf("AddRule(%q) = %q, want %q", c.content, got, c.want)
		}
	}
}
