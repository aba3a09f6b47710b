package evolution_test

import (
	"reflect"
	"testing"

	"github.com/molt-dev/molt/internal/evolution"
)

func passingScore() *evolution.Score {
	return &evolution.Score{Lint: 100, Behavior: 85, Scope: 90, Avg: 88, Confidence: "high",
		Checks: evolution.Checks{PatchInSandbox: true, UsedInDryRun: true, Probe: true, ProbeLanguage: true}}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	promptFiles := []fv{{"INSTRUCTIONS.md", evolution.CategoryPrompt, "INSTRUCTIONS.md changed"}}
	capFiles := []fv{{"INSTRUCTIONS.md", evolution.CategoryPrompt, "INSTRUCTIONS.md changed"}, {"agents/main/agent.yaml", evolution.CategoryCapability, "agent.yaml system_prompt changed"}}
	manualFiles := []fv{
		{"INSTRUCTIONS.md", evolution.CategoryPrompt, "INSTRUCTIONS.md changed"},
		{"agents/main/agent.yaml", evolution.CategoryManual, "agent.yaml tools add egress tool web_fetch"},
		{"USER.md", evolution.CategoryManual, "USER.md changed"},
	}
	score := func(change func(s *evolution.Score)) *evolution.Score {
		s := passingScore()
		change(s)
		return s
	}
	type in struct {
		level     string
		threshold int
		source    string
		files     []fv
		cat       evolution.Category
		score     *evolution.Score
	}
	base := in{"L2", 80, "full", promptFiles, evolution.CategoryPrompt, passingScore()}
	with := func(change func(*in)) in {
		c := base
		change(&c)
		return c
	}
	cases := []struct {
		name   string
		in     in
		reason string   // "" = passes
		gates  []string // reasons of source, category, score
	}{
		{"prompt change at L2 passes", base, "", []string{"", "", ""}},
		{"prompt change at L3 passes", with(func(c *in) { c.level = "L3" }), "", []string{"", "", ""}},
		{"capability change at L3 passes", with(func(c *in) { c.level, c.files, c.cat = "L3", capFiles, evolution.CategoryCapability }), "", []string{"", "", ""}},
		{"threshold equal to avg passes", with(func(c *in) { c.threshold = 88 }), "", []string{"", "", ""}},

		// 1. source
		{"source workspace", with(func(c *in) { c.source = "workspace" }), "source_access", []string{"source_access", "", ""}},
		{"source readonly", with(func(c *in) { c.source = "readonly" }), "source_access", []string{"source_access", "", ""}},
		{"source empty", with(func(c *in) { c.source = "" }), "source_access", []string{"source_access", "", ""}},
		{"source external", with(func(c *in) { c.source = "external" }), "source_external", []string{"source_external", "", ""}},
		{"source first of all failures", with(func(c *in) { c.source, c.level, c.score = "external", "L0", nil }), "source_external", []string{"source_external", "level", "score_missing"}},

		// 2. category
		{"no effective change", with(func(c *in) { c.files, c.cat = nil, evolution.CategoryNone }), "no_effective_change", []string{"", "no_effective_change", ""}},
		{"manual: first manual file", with(func(c *in) { c.files, c.cat = manualFiles, evolution.CategoryManual }),
			"category_manual:agents/main/agent.yaml(agent.yaml tools add egress tool web_fetch)", []string{"", "category_manual:agents/main/agent.yaml(agent.yaml tools add egress tool web_fetch)", ""}},
		{"manual at L3", with(func(c *in) { c.level, c.files, c.cat = "L3", manualFiles, evolution.CategoryManual }),
			"category_manual:agents/main/agent.yaml(agent.yaml tools add egress tool web_fetch)", nil},
		{"manual before level at L0", with(func(c *in) { c.level, c.files, c.cat = "L0", manualFiles, evolution.CategoryManual }),
			"category_manual:agents/main/agent.yaml(agent.yaml tools add egress tool web_fetch)", nil},
		{"capability needs L3", with(func(c *in) { c.files, c.cat = capFiles, evolution.CategoryCapability }), "level", []string{"", "level", ""}},
		{"L1 never auto-applies", with(func(c *in) { c.level = "L1" }), "level", []string{"", "level", ""}},
		{"L0 never auto-applies", with(func(c *in) { c.level = "L0" }), "level", []string{"", "level", ""}},
		{"unknown level", with(func(c *in) { c.level = "L9" }), "level", nil},
		{"category before score", with(func(c *in) { c.level, c.score = "L1", nil }), "level", []string{"", "level", "score_missing"}},

		// 3. score, in order
		{"score missing", with(func(c *in) { c.score = nil }), "score_missing", []string{"", "", "score_missing"}},
		{"below threshold", with(func(c *in) { c.threshold = 100 }), "below_threshold", []string{"", "", "below_threshold"}},
		{"below threshold before confidence", with(func(c *in) {
			c.threshold = 89
			c.score = score(func(s *evolution.Score) { s.Confidence = "low"; s.Lint = 0; s.Checks = evolution.Checks{} })
		}), "below_threshold", nil},
		{"confidence medium", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Confidence = "medium" }) }), "confidence", nil},
		{"confidence before behavior", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Confidence = "low"; s.Behavior = 10 }) }), "confidence", nil},
		{"behavior floor", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Behavior = 69 }) }), "behavior_floor", nil},
		{"behavior 70 passes", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Behavior = 70 }) }), "", nil},
		{"behavior before lint", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Behavior = 50; s.Lint = 99 }) }), "behavior_floor", nil},
		{"lint floor", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Lint = 99 }) }), "lint_floor", nil},
		{"lint before checks", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Lint = 0; s.Checks = evolution.Checks{} }) }), "lint_floor", nil},
		{"checks patchInSandbox", with(func(c *in) { c.score = score(func(s *evolution.Score) { s.Checks = evolution.Checks{} }) }), "checks:patchInSandbox", nil},
		{"checks usedInDryRun", with(func(c *in) {
			c.score = score(func(s *evolution.Score) { s.Checks = evolution.Checks{PatchInSandbox: true} })
		}), "checks:usedInDryRun", nil},
		{"checks probe", with(func(c *in) {
			c.score = score(func(s *evolution.Score) { s.Checks = evolution.Checks{PatchInSandbox: true, UsedInDryRun: true} })
		}), "checks:probe", nil},
		{"checks probeLanguage", with(func(c *in) {
			c.score = score(func(s *evolution.Score) { s.Checks.ProbeLanguage = false })
		}), "checks:probeLanguage", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := evolution.Decide(c.in.level, c.in.threshold, c.in.source, c.in.files, c.in.cat, c.in.score)
			if v.Reason != c.reason || v.Passed != (c.reason == "") {
				t.Fatalf("Decide = passed %v reason %q, want reason %q", v.Passed, v.Reason, c.reason)
			}
			if len(v.Gates) != 3 || v.Gates[0].Name != "source" || v.Gates[1].Name != "category" || v.Gates[2].Name != "score" {
				t.Fatalf("gates = %+v, want source, category, score", v.Gates)
			}
			if c.gates != nil {
				for i, g := range v.Gates {
					if g.Reason != c.gates[i] || g.Passed != (c.gates[i] == "") {
						t.Errorf("gate %s = %+v, want reason %q", g.Name, g, c.gates[i])
					}
				}
			}
			if v.Score != c.in.score || v.Category != c.in.cat || (c.in.files != nil && !reflect.DeepEqual(v.Files, c.in.files)) {
				t.Errorf("verdict does not carry its inputs: %+v", v)
			}
			if v.Files == nil {
				t.Errorf("Files is nil; want an empty list so the stored verdict shows []")
			}
		})
	}
}

// TestClassifyThenDecide runs the classifier and the gates together, as the worker
// does.
func TestClassifyThenDecide(t *testing.T) {
	t.Parallel()
	live, global := surfaces(nil)
	files, cat := evolution.Classify(live, global, map[string][]byte{
		"INSTRUCTIONS.md":        []byte("ws rules\n- answer in French\n"),
		"agents/main/agent.yaml": []byte(agentYAML("[read_file, list_files]", "[read_file, list_files, web_fetch]")),
	}, nil)
	v := evolution.Decide("L3", 80, "full", files, cat, passingScore())
	if want := "category_manual:agents/main/agent.yaml(agent.yaml tools add egress tool web_fetch)"; v.Reason != want {
		t.Fatalf("reason = %q, want %q", v.Reason, want)
	}
}
