package evolution

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/molt-dev/molt/internal/workspace"
)

// Category is how much review a changed file needs. The order is
// CategoryPrompt < CategoryCapability < CategoryManual; CategoryNone means
// nothing changed.
type Category string

// Categories of a change, from the least to the most strict.
const (
	CategoryNone       Category = ""
	CategoryPrompt     Category = "prompt"     // auto-applies from L2
	CategoryCapability Category = "capability" // auto-applies from L3
	CategoryManual     Category = "manual"     // never auto-applies
)

// Rank orders categories: 0 none, 1 prompt, 2 capability, 3 manual.
func (c Category) Rank() int {
	switch c {
	case CategoryPrompt:
		return 1
	case CategoryCapability:
		return 2
	case CategoryManual:
		return 3
	}
	return 0
}

// FileVerdict is the category of one changed file and why.
type FileVerdict struct {
	Path     string   `json:"path"`
	Category Category `json:"category"`
	Why      string   `json:"why"`
}

// egressTools reach outside the workspace; node_* tools do too.
var egressTools = map[string]bool{
	"shell_exec": true, "web_fetch": true, "web_search": true, "relay_send": true, "a2a_send": true,
}

// IsEgressTool reports whether an agent tool reaches outside the workspace
// (network, shell, other workspaces or machines): shell_exec, web_fetch,
// web_search, relay_send, a2a_send and every node_* tool. The dry-run runs with
// workspace access only, where such tools are not offered, so a score says
// nothing about them and adding one is always manual.
func IsEgressTool(name string) bool {
	return egressTools[name] || strings.HasPrefix(name, "node_")
}

// Keys of agent.yaml and of SKILL.md's front matter, by category.
var (
	agentCapabilityKeys = map[string]bool{
		"description": true, "system_prompt": true, "context": true,
		// Also accepted at the top level, as under model:.
		"maxTokens": true, "promptCaching": true, "thinking": true, "verbosity": true,
	}
	agentManualKeys      = map[string]bool{"priority": true, "team": true, "internal": true, "name": true, "aliases": true, "delegation": true}
	modelCapabilityKeys  = map[string]bool{"id": true, "maxTokens": true, "promptCaching": true, "thinking": true, "verbosity": true}
	modelManualKeys      = map[string]bool{"provider": true, "endpoint": true}
	skillPromptKeys      = map[string]bool{"name": true, "description": true}
	skillCapabilityKeys  = map[string]bool{"disable-model-invocation": true, "user-invocable": true}
	skillManualKeys      = map[string]bool{"command": true, "requiresAccess": true}
	errFrontmatterNotEnd = errors.New("front matter starts with --- but has no closing --- line")
)

// finding is one reason a file is in a category.
type finding struct {
	cat Category
	why string
}

func prompt(format string, args ...any) finding {
	return finding{CategoryPrompt, fmt.Sprintf(format, args...)}
}

func capability(format string, args ...any) finding {
	return finding{CategoryCapability, fmt.Sprintf(format, args...)}
}

func manual(format string, args ...any) finding {
	return finding{CategoryManual, fmt.Sprintf(format, args...)}
}

// strictest returns the first finding of the highest category.
func strictest(fs []finding) finding {
	best := fs[0]
	for _, f := range fs[1:] {
		if f.cat.Rank() > best.cat.Rank() {
			best = f
		}
	}
	return best
}

// Classify diffs a sandbox against the live surface and puts each changed file in
// a category; the strictest category of all files is returned with
// the verdicts, which are sorted by path. It is a pure function.
//
// live is the effective surface the run saw; global the global surface's files;
// sandbox the new content of the files the patch writes; deletes the paths it
// removes. A written file is no change, and is omitted, when its new content is
// byte-equal to the live file, or when no file of that path is live (a workspace
// folder hides the global one) and the content is byte-equal to the global file
// of that path: a byte-equal copy of a global file is no change. Writing the
// global content over a different live workspace file is a change (it reverts an
// override) and is classified like any other. Deleting a path that is not live is
// omitted too.
//
// The table, per file (the Why of the strictest finding is reported):
//
//   - prompt: INSTRUCTIONS.md, INDEX.md, agents/<id>/AGENT.md,
//     prompts/{bootstrap,all,root}/*.md; a SKILL.md's body, name, description.
//   - capability: SKILL.md disable-model-invocation, user-invocable, verbs changed
//     without a change of any verb's effective access; agent.yaml description,
//     system_prompt, context, tools removed or a non-egress tool added, skills
//     removed (or the list introduced), model.id, maxTokens, promptCaching,
//     thinking, verbosity (under model: or at the top level); an agent.yaml that
//     differs only in comments or formatting.
//   - manual: agent.yaml priority, team, internal, name, unknown keys,
//     model.provider, model.endpoint, unknown model keys, tools adding an egress
//     tool (IsEgressTool), skills added (or the list removed: every skill);
//     SKILL.md command, requiresAccess, a verb added or removed, a change of a
//     verb's effective access, any other front matter key; USER.md; any other file
//     of an agent or skill folder; a file of an agent or skill folder that is not
//     live (a new folder); a deleted file; any file of an internal agent (an id
//     starting with "__", or whose live agent.yaml says internal: true); a path
//     ValidatePath refuses; malformed YAML on either side.
//
// SKILL.md's front matter is the YAML between a first line "---" and the next
// line "---". Its verbs key maps a verb of the skill's command to its settings:
//
//	requiresAccess: workspace      # the default access of every verb
//	verbs:
//	  list: {access: readonly}     # access: full | workspace | readonly
//	  delete: {access: full, description: Remove an entry}
//	  show:                        # no access: the skill's requiresAccess
//
// A verb's effective access is its own access, else the skill's requiresAccess
// (else none). A verb's value must be a mapping or empty; access a string.
func Classify(live []workspace.EffectiveFile, global []workspace.File, sandbox map[string][]byte, deletes []string) ([]FileVerdict, Category) {
	s := surface{files: map[string][]byte{}, folders: map[string]bool{}}
	for _, f := range live {
		s.files[f.Path] = f.Content
		if d := workspace.Folder(f.Path); d != "" {
			s.folders[d] = true
		}
	}
	globals := map[string][]byte{}
	for _, f := range global {
		globals[f.Path] = f.Content
	}

	var out []FileVerdict
	for path, content := range sandbox {
		old, exists := s.files[path]
		if exists && bytes.Equal(old, content) {
			continue
		}
		if g, ok := globals[path]; ok && !exists && bytes.Equal(g, content) {
			continue
		}
		f := s.classifyFile(path, old, exists, content)
		out = append(out, FileVerdict{Path: path, Category: f.cat, Why: f.why})
	}
	seen := map[string]bool{}
	for _, path := range deletes {
		if _, written := sandbox[path]; written || seen[path] {
			continue
		}
		seen[path] = true
		if _, exists := s.files[path]; !exists {
			continue
		}
		out = append(out, FileVerdict{Path: path, Category: CategoryManual, Why: "deleted file"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	cat := CategoryNone
	for _, v := range out {
		if v.Category.Rank() > cat.Rank() {
			cat = v.Category
		}
	}
	return out, cat
}

// surface is the live surface by path, with the override folders that have files.
type surface struct {
	files   map[string][]byte
	folders map[string]bool
}

func (s surface) classifyFile(path string, old []byte, exists bool, content []byte) finding {
	if err := workspace.ValidatePath(path); err != nil {
		return manual("unknown path")
	}
	segs := strings.Split(path, "/")
	switch segs[0] {
	case "INSTRUCTIONS.md", "INDEX.md":
		return prompt("%s changed", path)
	case "USER.md":
		return manual("USER.md changed")
	case "prompts":
		return prompt("prompt file changed")
	case "agents":
		id, rest := segs[1], strings.Join(segs[2:], "/")
		switch {
		case strings.HasPrefix(id, "__"):
			return manual("internal agent %s", id)
		case s.internalAgent(id):
			return manual("internal agent %s (live agent.yaml internal: true)", id)
		case !s.folders["agents/"+id]:
			return manual("new agent folder agents/%s", id)
		case rest == "AGENT.md":
			return prompt("AGENT.md changed")
		case rest == "agent.yaml":
			return classifyAgentYAML(old, content)
		}
		return manual("other file %s in agent folder", rest)
	case "skills":
		id, rest := segs[1], strings.Join(segs[2:], "/")
		switch {
		case !s.folders["skills/"+id]:
			return manual("new skill folder skills/%s", id)
		case rest == "SKILL.md":
			return classifySkill(old, content)
		}
		return manual("other file %s in skill folder", rest)
	}
	return manual("unknown path")
}

// internalAgent reports whether the live agent.yaml of id says internal: true.
func (s surface) internalAgent(id string) bool {
	m, err := yamlMap(s.files["agents/"+id+"/agent.yaml"])
	return err == nil && m["internal"] == true
}

// yamlMap parses a YAML mapping; empty input is an empty mapping.
func yamlMap(data []byte) (map[string]any, error) {
	m := map[string]any{}
	if len(bytes.TrimSpace(data)) == 0 {
		return m, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, errors.New(yamlMessage(err))
	}
	if len(root.Content) == 0 {
		return m, nil
	}
	if root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a mapping of keys")
	}
	if err := root.Content[0].Decode(&m); err != nil {
		return nil, errors.New(yamlMessage(err))
	}
	return m, nil
}

// yamlMessage is the YAML library's message on one line, bounded.
func yamlMessage(err error) string {
	return clip(strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " "), 200)
}

// keyUnion returns the keys of a and b, sorted.
func keyUnion(a, b map[string]any) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func classifyAgentYAML(old, content []byte) finding {
	om, err := yamlMap(old)
	if err != nil {
		return manual("agent.yaml live version is malformed YAML: %s", err)
	}
	nm, err := yamlMap(content)
	if err != nil {
		return manual("agent.yaml new version is malformed YAML: %s", err)
	}
	var fs []finding
	for _, k := range keyUnion(om, nm) {
		ov, oin := om[k]
		nv, nin := nm[k]
		if oin == nin && reflect.DeepEqual(ov, nv) {
			continue
		}
		switch {
		case k == "tools":
			fs = append(fs, toolFindings(ov, nv)...)
		case k == "skills":
			fs = append(fs, skillListFindings(ov, oin, nv, nin)...)
		case k == "model":
			fs = append(fs, modelFindings(ov, nv)...)
		case agentCapabilityKeys[k]:
			fs = append(fs, capability("agent.yaml %s changed", k))
		case agentManualKeys[k]:
			fs = append(fs, manual("agent.yaml %s changed", k))
		default:
			fs = append(fs, manual("agent.yaml unknown key %s", k))
		}
	}
	if len(fs) == 0 {
		return capability("agent.yaml comments or formatting changed")
	}
	return strictest(fs)
}

// stringList reads a YAML list of non-empty strings; nil is the empty list.
func stringList(v any) ([]string, bool) {
	if v == nil {
		return nil, true
	}
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// setDiff returns the members of a not in b, in a's order, once each.
func setDiff(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			in[s] = true
			out = append(out, s)
		}
	}
	return out
}

func toolFindings(ov, nv any) []finding {
	oldTools, ok := stringList(ov)
	if !ok {
		return []finding{manual("agent.yaml tools of the live version is not a list of tool names")}
	}
	newTools, ok := stringList(nv)
	if !ok {
		return []finding{manual("agent.yaml tools of the new version is not a list of tool names")}
	}
	added, removed := setDiff(newTools, oldTools), setDiff(oldTools, newTools)
	var fs []finding
	var egress, plain []string
	for _, t := range added {
		if IsEgressTool(t) {
			egress = append(egress, t)
		} else {
			plain = append(plain, t)
		}
	}
	if len(egress) > 0 {
		fs = append(fs, manual("agent.yaml tools add egress tool %s", strings.Join(egress, ", ")))
	}
	if len(plain) > 0 {
		fs = append(fs, capability("agent.yaml tools add tool %s", strings.Join(plain, ", ")))
	}
	if len(removed) > 0 {
		fs = append(fs, capability("agent.yaml tools remove tool %s", strings.Join(removed, ", ")))
	}
	if len(fs) == 0 {
		fs = append(fs, capability("agent.yaml tools reordered"))
	}
	return fs
}

// skillListFindings compares agent.yaml skills lists. An absent key shows every
// skill of the surface; a present one (even empty) only those listed.
func skillListFindings(ov any, oin bool, nv any, nin bool) []finding {
	oldSkills, ok := stringList(ov)
	if !ok {
		return []finding{manual("agent.yaml skills of the live version is not a list of skill ids")}
	}
	newSkills, ok := stringList(nv)
	if !ok {
		return []finding{manual("agent.yaml skills of the new version is not a list of skill ids")}
	}
	switch {
	case oin && !nin:
		return []finding{manual("agent.yaml skills list removed, which shows every skill")}
	case !oin && nin:
		return []finding{capability("agent.yaml skills restricted to a list")}
	}
	added, removed := setDiff(newSkills, oldSkills), setDiff(oldSkills, newSkills)
	var fs []finding
	if len(added) > 0 {
		fs = append(fs, manual("agent.yaml skills add skill %s", strings.Join(added, ", ")))
	}
	if len(removed) > 0 {
		fs = append(fs, capability("agent.yaml skills remove skill %s", strings.Join(removed, ", ")))
	}
	if len(fs) == 0 {
		fs = append(fs, capability("agent.yaml skills reordered"))
	}
	return fs
}

func modelFindings(ov, nv any) []finding {
	om, ok := mapping(ov)
	if !ok {
		return []finding{manual("agent.yaml model of the live version is not a mapping")}
	}
	nm, ok := mapping(nv)
	if !ok {
		return []finding{manual("agent.yaml model of the new version is not a mapping")}
	}
	var fs []finding
	for _, k := range keyUnion(om, nm) {
		o, oin := om[k]
		n, nin := nm[k]
		if oin == nin && reflect.DeepEqual(o, n) {
			continue
		}
		switch {
		case modelCapabilityKeys[k]:
			fs = append(fs, capability("agent.yaml model.%s changed", k))
		case modelManualKeys[k]:
			fs = append(fs, manual("agent.yaml model.%s changed", k))
		default:
			fs = append(fs, manual("agent.yaml unknown key model.%s", k))
		}
	}
	if len(fs) == 0 {
		// Only a null model turned into an empty one, or the reverse.
		fs = append(fs, capability("agent.yaml model changed"))
	}
	return fs
}

// mapping reads a YAML mapping; nil is the empty mapping.
func mapping(v any) (map[string]any, bool) {
	if v == nil {
		return map[string]any{}, true
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// splitFrontmatter splits a SKILL.md into its front matter (parsed) and body.
// A file that does not start with a "---" line has no front matter.
func splitFrontmatter(data []byte) (map[string]any, []byte, error) {
	text := data
	var first []byte
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		first = text[:i]
	} else {
		first = text
	}
	if string(bytes.TrimRight(first, " \t\r")) != "---" {
		return map[string]any{}, data, nil
	}
	rest := text[min(len(first)+1, len(text)):]
	off := 0
	for off <= len(rest) {
		end := bytes.IndexByte(rest[off:], '\n')
		line := rest[off:]
		next := len(rest) + 1
		if end >= 0 {
			line = rest[off : off+end]
			next = off + end + 1
		}
		if string(bytes.TrimRight(line, " \t\r")) == "---" {
			m, err := yamlMap(rest[:off])
			if err != nil {
				return nil, nil, err
			}
			return m, rest[min(next, len(rest)):], nil
		}
		if end < 0 {
			break
		}
		off = next
	}
	return nil, nil, errFrontmatterNotEnd
}

func classifySkill(old, content []byte) finding {
	om, oldBody, err := splitFrontmatter(old)
	if err != nil {
		return manual("SKILL.md front matter of the live version is malformed: %s", err)
	}
	nm, newBody, err := splitFrontmatter(content)
	if err != nil {
		return manual("SKILL.md front matter of the new version is malformed: %s", err)
	}
	var fs []finding
	for _, k := range keyUnion(om, nm) {
		ov, oin := om[k]
		nv, nin := nm[k]
		if oin == nin && reflect.DeepEqual(ov, nv) {
			continue
		}
		switch {
		case k == "verbs":
			fs = append(fs, verbFindings(om, nm)...)
		case skillPromptKeys[k]:
			fs = append(fs, prompt("SKILL.md %s changed", k))
		case skillCapabilityKeys[k]:
			fs = append(fs, capability("SKILL.md %s changed", k))
		case skillManualKeys[k]:
			fs = append(fs, manual("SKILL.md %s changed", k))
		default:
			fs = append(fs, manual("SKILL.md front matter key %s", k))
		}
	}
	if !bytes.Equal(oldBody, newBody) {
		fs = append(fs, prompt("SKILL.md body changed"))
	}
	if len(fs) == 0 {
		return prompt("SKILL.md front matter formatting changed")
	}
	return strictest(fs)
}

// verb is one entry of a SKILL.md's verbs.
type verb struct {
	access    string
	hasAccess bool
	raw       map[string]any
}

func readVerbs(fm map[string]any) (map[string]verb, error) {
	raw, ok := mapping(fm["verbs"])
	if !ok {
		return nil, errors.New("verbs is not a mapping of verb names")
	}
	out := map[string]verb{}
	for name, v := range raw {
		m, ok := mapping(v)
		if !ok {
			return nil, fmt.Errorf("verb %s is not a mapping", name)
		}
		vb := verb{raw: m}
		if a, has := m["access"]; has && a != nil {
			s, ok := a.(string)
			if !ok {
				return nil, fmt.Errorf("verb %s access is not a string", name)
			}
			vb.access, vb.hasAccess = s, true
		}
		out[name] = vb
	}
	return out, nil
}

// effectiveAccess is a verb's own access, else the skill's requiresAccess.
func effectiveAccess(v verb, fm map[string]any) string {
	if v.hasAccess {
		return v.access
	}
	if s, ok := fm["requiresAccess"].(string); ok {
		return s
	}
	if fm["requiresAccess"] != nil {
		return fmt.Sprint(fm["requiresAccess"])
	}
	return ""
}

func verbFindings(om, nm map[string]any) []finding {
	ov, err := readVerbs(om)
	if err != nil {
		return []finding{manual("SKILL.md verbs of the live version are malformed: %s", err)}
	}
	nv, err := readVerbs(nm)
	if err != nil {
		return []finding{manual("SKILL.md verbs of the new version are malformed: %s", err)}
	}
	names := map[string]bool{}
	for n := range ov {
		names[n] = true
	}
	for n := range nv {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var fs []finding
	for _, n := range sorted {
		o, oin := ov[n]
		v, nin := nv[n]
		switch {
		case !oin:
			fs = append(fs, manual("SKILL.md verbs add verb %s", n))
		case !nin:
			fs = append(fs, manual("SKILL.md verbs remove verb %s", n))
		case effectiveAccess(o, om) != effectiveAccess(v, nm):
			fs = append(fs, manual("SKILL.md verbs change the access of verb %s from %q to %q", n, effectiveAccess(o, om), effectiveAccess(v, nm)))
		case !reflect.DeepEqual(o.raw, v.raw):
			fs = append(fs, capability("SKILL.md verbs %s changed without an access change", n))
		}
	}
	if len(fs) == 0 {
		fs = append(fs, capability("SKILL.md verbs changed without an access change"))
	}
	return fs
}
