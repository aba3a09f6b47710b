package offlineevo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
)

// SkipNoHint is the skip reason of a draft without a hint.
const SkipNoHint = "no hint: offline model drafts only from a hint"

// RulesHeading is the heading the offline draft adds its rule under.
const RulesHeading = "## Rules"

// ScenarioMessage is the offline draft's test message: a request any rule about
// how the agent answers governs.
const ScenarioMessage = "Please introduce yourself in two sentences and tell me what you can help me with."

// Score is the offline scorer's fixed answer. It passes the score gate at the
// default auto_apply_threshold (80) and fails it with below_threshold at any
// threshold above 88.
var Score = evolution.Score{
	Lint: 100, Behavior: 85, Scope: 90, Avg: 88, Confidence: evolution.ConfidenceHigh,
	Checks: evolution.Checks{UsedInDryRun: true, Probe: true, ProbeLanguage: true},
	Notes:  offline.Label + " Fixed offline score; no model judged this dry-run.",
}

var observeWord = regexp.MustCompile(`(?i)\bobserve\b`)

// Handlers returns the handlers to pass to offline.New so the offline model
// answers the built-in internal agents.
func Handlers() []offline.Handler { return []offline.Handler{Handle} }

// New returns the offline model with the evolution handlers.
func New() *offline.Model { return offline.New(Handlers()...) }

// Handle answers a request whose system prompt starts with a built-in agent's
// marker (evolution.AgentFromSystem) and passes on every other request.
func Handle(req model.Request) (model.Response, bool) {
	id, ok := evolution.AgentFromSystem(req.System)
	if !ok {
		return model.Response{}, false
	}
	blocks := evolution.RequestDataBlocks(req)
	var text string
	switch id {
	case evolution.AgentEvo:
		text = draft(blocks)
	case evolution.AgentScore:
		text = offline.Label + " Fixed offline score.\n\n" + jsonBlock(wireScore(Score))
	case evolution.AgentApply:
		text = merge(blocks)
	default:
		return model.Response{}, false
	}
	return model.Response{Text: text}, true
}

func draft(blocks []evolution.DataBlock) string {
	hint, _ := evolution.FindData(blocks, "hint")
	hint = strings.Join(strings.Fields(hint), " ")
	if hint == "" {
		return offline.Label + " No draft.\n\n" + jsonBlock(map[string]string{"skip_reason": SkipNoHint})
	}
	current, found := "", false
	for _, b := range blocks {
		if b.Name == "file" && b.Attrs["path"] == "INSTRUCTIONS.md" {
			current, found = b.Content, true
			break
		}
	}
	if index, _ := evolution.FindData(blocks, "surface_index"); !found && listsPath(index, "INSTRUCTIONS.md") {
		return offline.Label + " No draft.\n\n" + jsonBlock(map[string]string{
			"skip_reason": "INSTRUCTIONS.md was not included in the request (size budget): offline model cannot rewrite it"})
	}
	patch := map[string]any{
		"files": []map[string]string{{"path": "INSTRUCTIONS.md", "content": AddRule(current, hint)}},
		"test_scenario": map[string]string{
			"description": "The answer follows the new rule: " + hint,
			"message":     ScenarioMessage,
		},
		"rationale": fmt.Sprintf("%s Deterministic draft: the hint %q is added as a rule under %q in INSTRUCTIONS.md, so every agent of the workspace follows it.", offline.Label, hint, RulesHeading),
	}
	text := offline.Label + " Draft from the hint.\n\n" + jsonBlock(patch)
	if observeWord.MatchString(hint) {
		text += "\n## " + evolution.ObservationHeading + "\n\n" + offline.Label + " The hint asks to observe something larger than one rule: " + hint + "\n"
	}
	return text
}

// listsPath reports whether a surface_index block lists path.
func listsPath(index, path string) bool {
	for _, line := range strings.Split(index, "\n") {
		if p, _, _ := strings.Cut(line, "\t"); p == path {
			return true
		}
	}
	return false
}

// AddRule returns content with "- <rule>" appended to its "## Rules" section
// (after the section's last non-blank line; the section ends at the next heading
// of level 1 or 2), or content unchanged when the section already has that line.
// Without such a heading it appends a blank line, the heading, a blank line and
// the rule, keeping content as it was before them.
func AddRule(content, rule string) string {
	line := "- " + rule
	lines := strings.Split(content, "\n")
	h := -1
	for i, l := range lines {
		if strings.EqualFold(strings.TrimSpace(l), RulesHeading) {
			h = i
			break
		}
	}
	if h < 0 {
		if content == "" {
			return RulesHeading + "\n\n" + line + "\n"
		}
		if !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		if !strings.HasSuffix(content, "\n\n") {
			content += "\n"
		}
		return content + RulesHeading + "\n\n" + line + "\n"
	}
	end := len(lines)
	for j := h + 1; j < len(lines); j++ {
		t := strings.TrimSpace(lines[j])
		if strings.HasPrefix(t, "# ") || strings.HasPrefix(t, "## ") || t == "#" || t == "##" {
			end = j
			break
		}
	}
	last := h
	for j := h + 1; j < end; j++ {
		switch strings.TrimSpace(lines[j]) {
		case line:
			return content // the rule is there already
		case "":
		default:
			last = j
		}
	}
	insert := []string{line}
	if last == h {
		insert = []string{"", line}
	}
	out := append(append(append([]string{}, lines[:last+1]...), insert...), lines[last+1:]...)
	return strings.Join(out, "\n")
}

func merge(blocks []evolution.DataBlock) string {
	type file struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	var files []file
	for _, b := range blocks {
		if b.Name != "current" {
			continue
		}
		path := b.Attrs["path"]
		var versions []string
		for _, p := range blocks {
			if p.Name == "patch" && p.Attrs["path"] == path {
				versions = append(versions, p.Content)
			}
		}
		files = append(files, file{Path: path, Content: evolution.UnionMerge(b.Content, versions)})
	}
	return offline.Label + " Deterministic line-union merge.\n\n" + jsonBlock(map[string]any{
		"files": files,
		"notes": offline.Label + " Union of the lines each run added, in run order; a line any run removed is removed.",
	})
}

// wireScore is a Score in the __score__ answer format (no patchInSandbox).
func wireScore(s evolution.Score) map[string]any {
	return map[string]any{
		"lint": s.Lint, "behavior": s.Behavior, "scope": s.Scope, "avg": s.Avg, "confidence": s.Confidence,
		"checks": map[string]bool{"usedInDryRun": s.Checks.UsedInDryRun, "probe": s.Checks.Probe, "probeLanguage": s.Checks.ProbeLanguage},
		"notes":  s.Notes,
	}
}

// jsonBlock renders v as an indented ```json block. JSON strings never hold a raw
// newline, so no line of the block can close the fence.
func jsonBlock(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		// Maps of strings, numbers and booleans always encode.
		return "```json\n{}\n```\n"
	}
	return "```json\n" + buf.String() + "```\n"
}
