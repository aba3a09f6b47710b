package evolution_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

const goodJSON = `{
  "files": [{"path": "INSTRUCTIONS.md", "content": "# Rules\n- be brief\n"}],
  "test_scenario": {"description": "Answers briefly", "message": "Explain DNS"},
  "rationale": "The user asked for brevity twice."
}`

func fence(s string) string { return "```json\n" + s + "\n```" }

func wantPatch() evolution.Patch {
	return evolution.Patch{
		Files:        []evolution.PatchFile{{Path: "INSTRUCTIONS.md", Content: "# Rules\n- be brief\n"}},
		TestScenario: evolution.TestScenario{Description: "Answers briefly", Message: "Explain DNS"},
		Rationale:    "The user asked for brevity twice.",
	}
}

func TestParsePatch(t *testing.T) {
	t.Parallel()
	withObs := func(p evolution.Patch, obs string) evolution.Patch {
		p.Observation, p.HasObservation = obs, true
		return p
	}
	long := strings.Repeat("é", evolution.MaxObservation+50)
	cases := []struct {
		name string
		text string
		want evolution.Patch
	}{
		{"fenced", fence(goodJSON), wantPatch()},
		{"prose around", "Here is my patch.\n\n" + fence(goodJSON) + "\n\nThanks.", wantPatch()},
		{"bare object", goodJSON, wantPatch()},
		{"CRLF", strings.ReplaceAll(fence(goodJSON), "\n", "\r\n"), wantPatch()},
		{"upper-case info string", "```JSON\n" + goodJSON + "\n```", wantPatch()},
		{"fence without info string", "```\n" + goodJSON + "\n```", wantPatch()},
		{"observation after", fence(goodJSON) + "\n\n## Larger observation\n\nThe web tool times out.\n", withObs(wantPatch(), "The web tool times out.")},
		{"observation before", "## Larger observation\nBig thing.\n\n# Patch\n" + fence(goodJSON), withObs(wantPatch(), "Big thing.")},
		{"observation case-insensitive heading", fence(goodJSON) + "\n## larger OBSERVATION ##\nx", withObs(wantPatch(), "x")},
		{"observation with its own json fence", fence(goodJSON) + "\n## Larger observation\nSee:\n```json\n{\"a\":1}\n```\n", withObs(wantPatch(), "See:\n```json\n{\"a\":1}\n```")},
		{"observation cut", fence(goodJSON) + "\n## Larger observation\n" + long, withObs(wantPatch(), strings.Repeat("é", evolution.MaxObservation-1)+"…")},
		{"empty observation", fence(goodJSON) + "\n## Larger observation\n\n", wantPatch()},
		{"observation ends at next heading", fence(goodJSON) + "\n## Larger observation\nA\n## Other\nB", withObs(wantPatch(), "A")},
		{"observation as JSON key", fence(`{"skip_reason":"fine","observation":"o"}`), withObs(evolution.Patch{SkipReason: "fine"}, "o")},
		{"skip", fence(`{"skip_reason": "  The session went well.  "}`), evolution.Patch{SkipReason: "The session went well."}},
		{"skip ignores scenario", fence(`{"skip_reason":"x","test_scenario":{"description":"d","message":"m"},"rationale":"r"}`), evolution.Patch{SkipReason: "x"}},
		{"skip with observation", fence(`{"skip_reason":"x"}`) + "\n## Larger observation\nplatform bug", withObs(evolution.Patch{SkipReason: "x"}, "platform bug")},
		{"deletes only", fence(`{"deletes":["skills/old/SKILL.md"],"test_scenario":{"description":"d","message":"m"},"rationale":"r"}`),
			evolution.Patch{Deletes: []string{"skills/old/SKILL.md"}, TestScenario: evolution.TestScenario{Description: "d", Message: "m"}, Rationale: "r"}},
		{"internal agent path parses", fence(`{"files":[{"path":"agents/__score__/AGENT.md","content":"x"}],"test_scenario":{"description":"d","message":"m"},"rationale":"r"}`),
			evolution.Patch{Files: []evolution.PatchFile{{Path: "agents/__score__/AGENT.md", Content: "x"}}, TestScenario: evolution.TestScenario{Description: "d", Message: "m"}, Rationale: "r"}},
		{"empty skip reason is no skip", fence(`{"skip_reason":"","files":[{"path":"INDEX.md","content":""}],"test_scenario":{"description":"d","message":"m"},"rationale":"r"}`),
			evolution.Patch{Files: []evolution.PatchFile{{Path: "INDEX.md"}}, TestScenario: evolution.TestScenario{Description: "d", Message: "m"}, Rationale: "r"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := evolution.ParsePatch(c.text)
			if err != nil {
				t.Fatalf("ParsePatch: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParsePatch =\n%#v\nwant\n%#v", got, c.want)
			}
		})
	}
}

func TestParsePatchErrors(t *testing.T) {
	t.Parallel()
	scen := `"test_scenario":{"description":"d","message":"m"},"rationale":"r"`
	files := func(n int) string {
		var fs []string
		for i := 0; i < n; i++ {
			fs = append(fs, fmt.Sprintf(`{"path":"prompts/all/p%d.md","content":"x"}`, i))
		}
		return `"files":[` + strings.Join(fs, ",") + `]`
	}
	big := strings.Repeat("a", workspace.MaxFileSize+1)
	cases := []struct {
		name, text, field, contains string
	}{
		{"no json", "I think the agent is fine.", "", "no ```json block"},
		{"two json blocks", fence(goodJSON) + "\n" + fence(goodJSON), "", "more than one"},
		{"json only inside observation", "## Larger observation\n" + fence(goodJSON), "", "no ```json block"},
		{"not json", fence(`{"files": [`), "", "invalid"},
		{"unknown key", fence(`{"file":[],` + scen + `}`), "", `unknown field "file"`},
		{"trailing data", fence(goodJSON + ` {}`), "", "after the JSON"},
		{"empty patch", fence(`{` + scen + `}`), "files", "no files and no skip_reason"},
		{"skip with files", fence(`{"skip_reason":"x",` + files(1) + `}`), "skip_reason", "must not carry"},
		{"escaping path", fence(`{"files":[{"path":"../etc/passwd","content":"x"}],` + scen + `}`), "files[0].path", "escapes the surface"},
		{"unknown top-level", fence(`{"files":[{"path":"INSTRUCTIONS.md","content":"x"},{"path":"README.md","content":"x"}],` + scen + `}`), "files[1].path", "not a known top-level file"},
		{"absolute path", fence(`{"files":[{"path":"/INDEX.md","content":"x"}],` + scen + `}`), "files[0].path", "relative"},
		{"bad delete path", fence(`{"deletes":["agents/x"],` + scen + `}`), "deletes[0]", "agents/<id>/"},
		{"duplicate path", fence(`{"files":[{"path":"INDEX.md","content":"a"},{"path":"INDEX.md","content":"b"}],` + scen + `}`), "files[1].path", "repeats files[0]"},
		{"written and deleted", fence(`{"files":[{"path":"INDEX.md","content":"a"}],"deletes":["INDEX.md"],` + scen + `}`), "deletes[0]", "repeats files[0]"},
		{"too many files", fence(`{` + files(evolution.MaxPatchFiles+1) + `,` + scen + `}`), "files", "at most 50"},
		{"file too large", fence(`{"files":[{"path":"INDEX.md","content":"` + big + `"}],` + scen + `}`), "files[0].content", "at most 262144"},
		{"no scenario", fence(`{` + files(1) + `,"rationale":"r"}`), "test_scenario.description", "missing"},
		{"no message", fence(`{` + files(1) + `,"test_scenario":{"description":"d","message":"  "},"rationale":"r"}`), "test_scenario.message", "missing"},
		{"no rationale", fence(`{` + files(1) + `,"test_scenario":{"description":"d","message":"m"}}`), "rationale", "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := evolution.ParsePatch(c.text)
			var e *molt.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParsePatch error = %v, want *molt.Error", err)
			}
			if e.Code != molt.EINVALID || e.Reason != evolution.ReasonPatchInvalid || e.Field != c.field {
				t.Errorf("error code/reason/field = %s/%s/%q, want %s/%s/%q", e.Code, e.Reason, e.Field, molt.EINVALID, evolution.ReasonPatchInvalid, c.field)
			}
			if !strings.Contains(e.Message, c.contains) {
				t.Errorf("error %q does not say %q", e.Message, c.contains)
			}
		})
	}
}

func TestParseScore(t *testing.T) {
	t.Parallel()
	full := evolution.Score{Lint: 100, Behavior: 85, Scope: 90, Avg: 88, Confidence: "high",
		Checks: evolution.Checks{UsedInDryRun: true, Probe: true, ProbeLanguage: true}}
	cases := []struct {
		name string
		text string
		want evolution.Score
	}{
		{"plain", fence(`{"lint":100,"behavior":85,"scope":90,"avg":88,"confidence":"high","checks":{"usedInDryRun":true,"probe":true,"probeLanguage":true}}`), full},
		{"prose, words, floats, strings, case", "Scores:\n" + fence(`{"lint":100.0,"behavior":"85","scope":90,"avg":88,"confidence":" High ","checks":{"usedInDryRun":"yes","probe":"valid","probeLanguage":"same"}}`), full},
		{"patchInSandbox from the model is ignored", fence(`{"lint":100,"behavior":85,"scope":90,"avg":88,"confidence":"high","checks":{"patchInSandbox":true,"usedInDryRun":true,"probe":true,"probeLanguage":true}}`), full},
		{"negative words and notes", fence(`{"lint":0,"behavior":0,"scope":0,"avg":0,"confidence":"low","checks":{"usedInDryRun":"no","probe":"invalid","probeLanguage":"different"},"notes":" n ","extra":1}`),
			evolution.Score{Confidence: "low", Notes: "n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := evolution.ParseScore(c.text)
			if err != nil {
				t.Fatalf("ParseScore: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseScore = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseScoreErrors(t *testing.T) {
	t.Parallel()
	ok := map[string]string{"lint": "100", "behavior": "85", "scope": "90", "avg": "88", "confidence": `"high"`,
		"checks": `{"usedInDryRun":true,"probe":true,"probeLanguage":true}`}
	build := func(change map[string]string) string {
		var parts []string
		for _, k := range []string{"lint", "behavior", "scope", "avg", "confidence", "checks"} {
			v, set := change[k]
			if !set {
				v = ok[k]
			}
			if v != "" {
				parts = append(parts, fmt.Sprintf("%q:%s", k, v))
			}
		}
		return fence("{" + strings.Join(parts, ",") + "}")
	}
	cases := []struct {
		name, text, field string
	}{
		{"no json", "great patch, 10/10", ""},
		{"broken json", fence(`{"lint":`), ""},
		{"lint missing", build(map[string]string{"lint": ""}), "lint"},
		{"behavior null", build(map[string]string{"behavior": "null"}), "behavior"},
		{"scope above 100", build(map[string]string{"scope": "101"}), "scope"},
		{"avg negative", build(map[string]string{"avg": "-1"}), "avg"},
		{"avg fractional", build(map[string]string{"avg": "88.5"}), "avg"},
		{"lint not a number", build(map[string]string{"lint": `"perfect"`}), "lint"},
		{"confidence missing", build(map[string]string{"confidence": ""}), "confidence"},
		{"confidence unknown", build(map[string]string{"confidence": `"certain"`}), "confidence"},
		{"checks missing", build(map[string]string{"checks": ""}), "checks"},
		{"check missing", build(map[string]string{"checks": `{"usedInDryRun":true,"probe":true}`}), "checks.probeLanguage"},
		{"check not boolean", build(map[string]string{"checks": `{"usedInDryRun":1,"probe":true,"probeLanguage":true}`}), "checks.usedInDryRun"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := evolution.ParseScore(c.text)
			var e *molt.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseScore error = %v, want *molt.Error", err)
			}
			if e.Code != molt.EINVALID || e.Reason != evolution.ReasonScoreMissing || e.Field != c.field {
				t.Errorf("error code/reason/field = %s/%s/%q, want invalid/score_missing/%q (%v)", e.Code, e.Reason, e.Field, c.field, e)
			}
		})
	}
}

func asMolt(t *testing.T, err error) *molt.Error {
	t.Helper()
	var e *molt.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *molt.Error", err)
	}
	return e
}

func TestPatchSandboxAndPaths(t *testing.T) {
	t.Parallel()
	p := evolution.Patch{Files: []evolution.PatchFile{{Path: "INDEX.md", Content: "i"}, {Path: "USER.md", Content: "u"}}, Deletes: []string{"prompts/all/x.md"}}
	if got := p.Paths(); !reflect.DeepEqual(got, []string{"INDEX.md", "USER.md", "prompts/all/x.md"}) {
		t.Errorf("Paths = %v", got)
	}
	if got := p.Sandbox(); len(got) != 2 || string(got["INDEX.md"]) != "i" || string(got["USER.md"]) != "u" {
		t.Errorf("Sandbox = %q", got)
	}
}
