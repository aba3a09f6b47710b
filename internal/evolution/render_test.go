package evolution_test

import (
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/evolution"
)

func TestRenderPatchMD(t *testing.T) {
	t.Parallel()
	p := evolution.Patch{
		Files: []evolution.PatchFile{
			{Path: "INSTRUCTIONS.md", Content: "# Rules\n- be brief\n- answer in French\n"},
			{Path: "prompts/all/new.md", Content: "```go\nx\n```\n"},
		},
		Deletes:        []string{"USER.md"},
		TestScenario:   evolution.TestScenario{Description: "Answers in French", Message: "What is DNS?\nKeep it: short"},
		Rationale:      "The user asked twice.",
		Observation:    "Tools time out.",
		HasObservation: true,
	}
	live := map[string]string{"INSTRUCTIONS.md": "# Rules\n- be brief\n", "USER.md": "name: Ana\n"}
	want := "---\n" +
		"test_scenario:\n" +
		"    description: Answers in French\n" +
		"    message: |-\n" +
		"        What is DNS?\n" +
		"        Keep it: short\n" +
		"files:\n" +
		"    - INSTRUCTIONS.md\n" +
		"    - prompts/all/new.md\n" +
		"deletes:\n" +
		"    - USER.md\n" +
		"has_observation: true\n" +
		"---\n\n" +
		"# Patch\n\n## Rationale\n\nThe user asked twice.\n\n" +
		"## Test scenario\n\nAnswers in French\n\n> What is DNS?\n> Keep it: short\n\n" +
		"## Changes\n\n" +
		"### INSTRUCTIONS.md\n\n```diff\n--- a/INSTRUCTIONS.md\n+++ b/INSTRUCTIONS.md\n@@ -1,2 +1,3 @@\n # Rules\n - be brief\n+- answer in French\n```\n\n" +
		"### prompts/all/new.md\n\n````diff\n--- /dev/null\n+++ b/prompts/all/new.md\n@@ -0,0 +1,3 @@\n+```go\n+x\n+```\n````\n\n" +
		"### USER.md (deleted)\n\n```diff\n--- a/USER.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-name: Ana\n```\n\n" +
		"## Larger observation\n\nTools time out.\n"
	got := evolution.RenderPatchMD(p, live)
	if got != want {
		t.Fatalf("RenderPatchMD =\n%s\nwant\n%s", got, want)
	}
	ts, skip, err := evolution.ReadPatchMD(got)
	if err != nil || ts != p.TestScenario || skip != "" {
		t.Fatalf("ReadPatchMD = %+v, %q, %v; want %+v", ts, skip, err, p.TestScenario)
	}
}

func TestRenderPatchMDSkip(t *testing.T) {
	t.Parallel()
	p := evolution.Patch{SkipReason: "no hint: offline model drafts only from a hint"}
	got := evolution.RenderPatchMD(p, nil)
	want := "---\nskip_reason: 'no hint: offline model drafts only from a hint'\nhas_observation: false\n---\n\n# Skipped\n\nno hint: offline model drafts only from a hint\n"
	if got != want {
		t.Fatalf("RenderPatchMD =\n%s\nwant\n%s", got, want)
	}
	ts, skip, err := evolution.ReadPatchMD(got)
	if err != nil || skip != p.SkipReason || ts != (evolution.TestScenario{}) {
		t.Fatalf("ReadPatchMD = %+v, %q, %v", ts, skip, err)
	}
	for _, bad := range []string{"", "# no front matter", "---\nx: [\n---\n"} {
		if _, _, err := evolution.ReadPatchMD(bad); err == nil {
			t.Errorf("ReadPatchMD(%q) = nil error", bad)
		}
	}
	if strings.Contains(got, "## Larger observation") {
		t.Errorf("skip without observation renders an observation section")
	}
}
