package chat

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

//go:embed builtin
var builtinFS embed.FS

// DefaultAgent is the agent a session gets when none is named. A built-in agent
// of that id ships in the binary, so a fresh workspace can chat.
const DefaultAgent = "main"

// Builtin returns the surface files that ship inside the binary (the default
// main agent; later, the internal evolution agents), with scope builtin below
// global and workspace files.
func Builtin() []workspace.File { return builtinFiles() }

var builtinFiles = sync.OnceValue(func() []workspace.File {
	var out []workspace.File
	_ = fs.WalkDir(builtinFS, "builtin", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := builtinFS.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, workspace.NewFile(workspace.ScopeBuiltin, strings.TrimPrefix(p, "builtin/"), b, time.Time{}))
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
})

// Surface returns the effective surface of a workspace: built-in files, replaced
// by global ones, replaced by the workspace's (workspace.Effective's rules apply
// at each layer: a file replaces the file of its path, a folder agents/<id>/,
// skills/<id>/ or prompts/<kind>/ replaces the lower folder of that name as a
// whole). Sorted by path.
func Surface(builtin, global, ws []workspace.File) []workspace.EffectiveFile {
	return workspace.Layered(builtin, global, ws)
}

// Part is one delimited section of an assembled system prompt.
type Part struct {
	Path  string `json:"path"`  // the surface path, or a pseudo-path ("skills", "agents/<id>/agent.yaml#system_prompt")
	Scope string `json:"scope"` // workspace, global, builtin; "" for generated parts
	Text  string `json:"text"`
}

// Prompt is an assembled system prompt and what it was made of.
type Prompt struct {
	System     string  `json:"system"`
	Parts      []Part  `json:"parts"`
	AgentID    string  `json:"agent_id"`
	AgentScope string  `json:"agent_scope"`
	Agent      Agent   `json:"agent"`
	Skills     []Skill `json:"skills"` // the skills listed to the agent
}

// PromptInput is what Assemble reads.
type PromptInput struct {
	Surface []workspace.EffectiveFile // Surface(Builtin(), global, ws)
	Agent   string                    // agent id
	Root    bool                      // a root session (no parent): prompts/root/*.md apply
}

// Assemble builds an agent's system prompt from the effective surface. It is a
// pure function: the same input gives the same prompt. The parts, in order, each
// introduced by a line "=== <path> ===":
//
//  1. prompts/bootstrap/*.md, by path;
//  2. INSTRUCTIONS.md, INDEX.md, USER.md;
//  3. agents/<id>/AGENT.md, then agent.yaml's system_prompt;
//  4. "skills": one line per skill (skills/<id>/SKILL.md front matter name and
//     description), every skill unless agent.yaml lists some;
//  5. prompts/all/*.md, by path;
//  6. prompts/root/*.md, by path, for root sessions only.
//
// Empty files are left out. Errors: ENOTFOUND with Reason "agent_not_found" when
// the surface has no agents/<id>/ folder; EINVALID with Reason "agent_config"
// when its agent.yaml is malformed.
func Assemble(in PromptInput) (Prompt, error) {
	byPath := map[string]workspace.EffectiveFile{}
	for _, f := range in.Surface {
		byPath[f.Path] = f
	}
	p := Prompt{AgentID: in.Agent}
	dir := "agents/" + in.Agent + "/"
	found := false
	for _, f := range in.Surface {
		if strings.HasPrefix(f.Path, dir) {
			found, p.AgentScope = true, f.Scope
			break
		}
	}
	if !found {
		return Prompt{}, &molt.Error{Code: molt.ENOTFOUND, Reason: ReasonAgentNotFound, Field: "agent",
			Message: "agent " + quoted(in.Agent) + " is not on the workspace's surface"}
	}
	if f, ok := byPath[dir+"agent.yaml"]; ok {
		a, err := ParseAgent(f.Path, f.Content)
		if err != nil {
			return Prompt{}, err
		}
		p.Agent = a
	}

	add := func(f workspace.EffectiveFile) {
		if text := strings.TrimSpace(string(f.Content)); text != "" {
			p.Parts = append(p.Parts, Part{Path: f.Path, Scope: f.Scope, Text: text})
		}
	}
	folder := func(prefix string) {
		for _, f := range in.Surface { // sorted by path
			if strings.HasPrefix(f.Path, prefix) && strings.HasSuffix(f.Path, ".md") {
				add(f)
			}
		}
	}
	folder("prompts/bootstrap/")
	for _, name := range []string{"INSTRUCTIONS.md", "INDEX.md", "USER.md"} {
		if f, ok := byPath[name]; ok {
			add(f)
		}
	}
	if f, ok := byPath[dir+"AGENT.md"]; ok {
		add(f)
	}
	if sp := strings.TrimSpace(p.Agent.SystemPrompt); sp != "" {
		p.Parts = append(p.Parts, Part{Path: dir + "agent.yaml#system_prompt", Scope: p.AgentScope, Text: sp})
	}
	p.Skills = skills(in.Surface, p.Agent.Skills)
	if len(p.Skills) > 0 {
		var b strings.Builder
		b.WriteString("Skills available to you (read a skill's SKILL.md before using it):")
		for _, s := range p.Skills {
			b.WriteString("\n- " + s.Name + " (skills/" + s.ID + "/SKILL.md)")
			if s.Description != "" {
				b.WriteString(": " + s.Description)
			}
		}
		p.Parts = append(p.Parts, Part{Path: "skills", Text: b.String()})
	}
	folder("prompts/all/")
	if in.Root {
		folder("prompts/root/")
	}
	p.System = Join(p.Parts)
	return p, nil
}

// Join renders parts as one system prompt, each introduced by "=== <path> ===".
func Join(parts []Part) string {
	var b strings.Builder
	for i, part := range parts {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("=== " + part.Path + " ===\n" + part.Text)
	}
	return b.String()
}

// skills lists the surface's skills (skills/<id>/SKILL.md), sorted by id, only
// those in only when only is not nil.
func skills(surface []workspace.EffectiveFile, only []string) []Skill {
	var want map[string]bool
	if only != nil {
		want = map[string]bool{}
		for _, id := range only {
			want[strings.TrimSpace(id)] = true
		}
	}
	var out []Skill
	for _, f := range surface {
		rest, ok := strings.CutPrefix(f.Path, "skills/")
		if !ok {
			continue
		}
		id, file, ok := strings.Cut(rest, "/")
		if !ok || file != "SKILL.md" || (want != nil && !want[id]) {
			continue
		}
		s := ParseSkill(id, f.Content)
		s.Scope = f.Scope
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func quoted(s string) string { return "\"" + s + "\"" }
