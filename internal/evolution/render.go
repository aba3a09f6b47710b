package evolution

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// patchFrontmatter is the YAML front matter of patch.md.
type patchFrontmatter struct {
	SkipReason   string            `yaml:"skip_reason,omitempty"`
	TestScenario *yamlTestScenario `yaml:"test_scenario,omitempty"`
	Files        []string          `yaml:"files,omitempty"`
	Deletes      []string          `yaml:"deletes,omitempty"`
	Observation  bool              `yaml:"has_observation"`
}

type yamlTestScenario struct {
	Description string `yaml:"description"`
	Message     string `yaml:"message"`
}

// RenderPatchMD returns the human-readable patch.md of p: YAML front matter with
// the test scenario (or the skip reason), the paths written and deleted and
// has_observation; then the rationale, one unified diff per file against its live
// content (live maps a path to the content the run saw; a path missing from live
// is a new file, diffed against /dev/null), each deletion, and the Larger
// observation. Diffs sit in fences longer than any backtick run they contain, so
// Markdown renders them whole.
func RenderPatchMD(p Patch, live map[string]string) string {
	fm := patchFrontmatter{SkipReason: p.SkipReason, Deletes: p.Deletes, Observation: p.HasObservation}
	if !p.Skipped() {
		fm.TestScenario = &yamlTestScenario{Description: p.TestScenario.Description, Message: p.TestScenario.Message}
	}
	for _, f := range p.Files {
		fm.Files = append(fm.Files, f.Path)
	}
	front, err := yaml.Marshal(fm)
	if err != nil {
		// Marshalling plain strings cannot fail; keep the document well-formed anyway.
		front = []byte("error: front matter could not be written\n")
	}
	var b strings.Builder
	b.WriteString("---\n")
	b.Write(front)
	b.WriteString("---\n\n")
	if p.Skipped() {
		b.WriteString("# Skipped\n\n")
		b.WriteString(p.SkipReason)
		b.WriteString("\n")
	} else {
		b.WriteString("# Patch\n\n## Rationale\n\n")
		b.WriteString(p.Rationale)
		b.WriteString("\n\n## Test scenario\n\n")
		b.WriteString(p.TestScenario.Description)
		b.WriteString("\n\n")
		b.WriteString(quoteMD(p.TestScenario.Message))
		b.WriteString("\n\n## Changes\n")
		for _, f := range p.Files {
			old, exists := live[f.Path]
			oldName := "a/" + f.Path
			if !exists {
				oldName = "/dev/null"
			}
			d := UnifiedDiff(oldName, "b/"+f.Path, old, f.Content)
			b.WriteString("\n### " + f.Path + "\n\n")
			if d == "" {
				b.WriteString("No change: the new content equals the live file.\n")
				continue
			}
			writeFenced(&b, "diff", d)
		}
		for _, path := range p.Deletes {
			b.WriteString("\n### " + path + " (deleted)\n\n")
			old, exists := live[path]
			if !exists {
				b.WriteString("The file does not exist on the live surface.\n")
				continue
			}
			d := UnifiedDiff("a/"+path, "/dev/null", old, "")
			if d == "" {
				d = "--- a/" + path + "\n+++ /dev/null\n"
			}
			writeFenced(&b, "diff", d)
		}
	}
	if p.HasObservation {
		b.WriteString("\n## " + ObservationHeading + "\n\n")
		b.WriteString(p.Observation)
		b.WriteString("\n")
	}
	return b.String()
}

// writeFenced writes body in a backtick fence longer than any backtick run in it.
func writeFenced(b *strings.Builder, info, body string) {
	fence := strings.Repeat("`", max(3, longestRun(body, '`')+1))
	b.WriteString(fence + info + "\n")
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(fence + "\n")
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// quoteMD renders text as a Markdown block quote.
func quoteMD(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

// ReadPatchMD reads back the front matter of a patch.md written by RenderPatchMD:
// the test scenario and the skip reason (one of them is empty). EINVALID with
// Reason ReasonPatchInvalid when the front matter is missing or malformed.
func ReadPatchMD(md string) (TestScenario, string, error) {
	fm, _, err := splitFrontmatter([]byte(md))
	if err != nil {
		return TestScenario{}, "", patchErr("patch.md", "patch.md front matter is malformed: %s", err)
	}
	if len(fm) == 0 {
		return TestScenario{}, "", patchErr("patch.md", "patch.md has no front matter")
	}
	skip, _ := fm["skip_reason"].(string)
	ts, _ := mapping(fm["test_scenario"])
	desc, _ := ts["description"].(string)
	msg, _ := ts["message"].(string)
	if skip == "" && msg == "" {
		return TestScenario{}, "", patchErr("patch.md", "patch.md has neither a test scenario message nor a skip reason")
	}
	return TestScenario{Description: desc, Message: msg}, skip, nil
}
