package evolution_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/workspace"
)

const mainAgent = `name: main
description: Main agent
system_prompt: Be helpful
context: workspace
priority: 1
team: core
tools: [read_file, list_files]
skills: [search]
model:
  id: model-a
  maxTokens: 1000
  provider: bedrock
  endpoint: https://example.invalid
`

const notesSkill = `---
name: notes
description: Take notes
command: notes
requiresAccess: workspace
disable-model-invocation: false
user-invocable: true
verbs:
  list: {access: readonly}
  add:
  delete: {access: full, description: Remove a note}
---
Use the notes command to keep notes.
`

// surfaces returns the live (effective) and global surfaces of the tests: a
// workspace overriding INSTRUCTIONS.md and the prompts/all folder, with its own
// notes skill and an internal agent, on a global surface with the main agent.
func surfaces(extraWS map[string]string) ([]workspace.EffectiveFile, []workspace.File) {
	now := time.Unix(0, 0)
	global := []workspace.File{}
	for p, c := range map[string]string{
		"INSTRUCTIONS.md":        "global rules\n",
		"agents/main/AGENT.md":   "You are main.\n",
		"agents/main/agent.yaml": mainAgent,
		"prompts/all/a.md":       "ga\n",
		"prompts/all/b.md":       "gb\n",
		"skills/search/SKILL.md": "---\nname: search\n---\nSearch.\n",
	} {
		global = append(global, workspace.NewFile(workspace.Global, p, []byte(c), now))
	}
	wsFiles := map[string]string{
		"INSTRUCTIONS.md":        "ws rules\n",
		"INDEX.md":               "index\n",
		"USER.md":                "The user is Ana.\n",
		"prompts/all/a.md":       "wa\n",
		"skills/notes/SKILL.md":  notesSkill,
		"skills/notes/helper.py": "print(1)\n",
		"agents/sys/AGENT.md":    "system agent\n",
		"agents/sys/agent.yaml":  "name: sys\ninternal: true\n",
		"agents/lean/agent.yaml": "name: lean\ntools: [read_file]\n",
	}
	for p, c := range extraWS {
		wsFiles[p] = c
	}
	var ws []workspace.File
	for p, c := range wsFiles {
		ws = append(ws, workspace.NewFile("acme", p, []byte(c), now))
	}
	return workspace.Effective(global, ws), global
}

func agentYAML(old, new string) string { return strings.Replace(mainAgent, old, new, 1) }
func skillMD(old, new string) string   { return strings.Replace(notesSkill, old, new, 1) }

type fv = evolution.FileVerdict

func TestClassify(t *testing.T) {
	t.Parallel()
	const (
		P = evolution.CategoryPrompt
		C = evolution.CategoryCapability
		M = evolution.CategoryManual
		N = evolution.CategoryNone
	)
	ay := "agents/main/agent.yaml"
	sk := "skills/notes/SKILL.md"
	cases := []struct {
		name    string
		ws      map[string]string // extra live workspace files
		sandbox map[string]string
		deletes []string
		want    []fv
		cat     evolution.Category
	}{
		// No change.
		{name: "nothing", cat: N},
		{name: "byte-equal to live", sandbox: map[string]string{"INSTRUCTIONS.md": "ws rules\n", ay: mainAgent}, cat: N},
		{name: "byte-equal copy of a global file hidden by a workspace folder", sandbox: map[string]string{"prompts/all/b.md": "gb\n"}, cat: N},
		{name: "delete of a path that is not live", deletes: []string{"prompts/all/b.md", "agents/nobody/AGENT.md"}, cat: N},

		// Prompt.
		{name: "INSTRUCTIONS.md", sandbox: map[string]string{"INSTRUCTIONS.md": "ws rules\n- new\n"}, want: []fv{{"INSTRUCTIONS.md", P, "INSTRUCTIONS.md changed"}}, cat: P},
		{name: "global content over a different workspace file reverts an override", sandbox: map[string]string{"INSTRUCTIONS.md": "global rules\n"}, want: []fv{{"INSTRUCTIONS.md", P, "INSTRUCTIONS.md changed"}}, cat: P},
		{name: "INDEX.md", sandbox: map[string]string{"INDEX.md": "index 2\n"}, want: []fv{{"INDEX.md", P, "INDEX.md changed"}}, cat: P},
		{name: "AGENT.md of a global agent", sandbox: map[string]string{"agents/main/AGENT.md": "You are main. Be brief.\n"}, want: []fv{{"agents/main/AGENT.md", P, "AGENT.md changed"}}, cat: P},
		{name: "prompts/all file", sandbox: map[string]string{"prompts/all/a.md": "wa2\n"}, want: []fv{{"prompts/all/a.md", P, "prompt file changed"}}, cat: P},
		{name: "new prompts/bootstrap and prompts/root files", sandbox: map[string]string{"prompts/bootstrap/x.md": "b\n", "prompts/root/y.md": "r\n"},
			want: []fv{{"prompts/bootstrap/x.md", P, "prompt file changed"}, {"prompts/root/y.md", P, "prompt file changed"}}, cat: P},
		{name: "SKILL.md body", sandbox: map[string]string{sk: skillMD("keep notes.", "keep short notes.")}, want: []fv{{sk, P, "SKILL.md body changed"}}, cat: P},
		{name: "SKILL.md name", sandbox: map[string]string{sk: skillMD("name: notes", "name: Notes")}, want: []fv{{sk, P, "SKILL.md name changed"}}, cat: P},
		{name: "SKILL.md description", sandbox: map[string]string{sk: skillMD("Take notes", "Take and list notes")}, want: []fv{{sk, P, "SKILL.md description changed"}}, cat: P},
		{name: "SKILL.md front matter reformatted", sandbox: map[string]string{sk: skillMD("name: notes", "name: \"notes\"")}, want: []fv{{sk, P, "SKILL.md front matter formatting changed"}}, cat: P},

		// Capability.
		{name: "SKILL.md disable-model-invocation", sandbox: map[string]string{sk: skillMD("disable-model-invocation: false", "disable-model-invocation: true")},
			want: []fv{{sk, C, "SKILL.md disable-model-invocation changed"}}, cat: C},
		{name: "SKILL.md user-invocable", sandbox: map[string]string{sk: skillMD("user-invocable: true", "user-invocable: false")},
			want: []fv{{sk, C, "SKILL.md user-invocable changed"}}, cat: C},
		{name: "SKILL.md verb changed without access change", sandbox: map[string]string{sk: skillMD("description: Remove a note", "description: Delete a note")},
			want: []fv{{sk, C, "SKILL.md verbs delete changed without an access change"}}, cat: C},
		{name: "SKILL.md verb gets its default access explicitly", sandbox: map[string]string{sk: skillMD("  add:\n", "  add: {access: workspace}\n")},
			want: []fv{{sk, C, "SKILL.md verbs add changed without an access change"}}, cat: C},
		{name: "agent.yaml description", sandbox: map[string]string{ay: agentYAML("description: Main agent", "description: The main agent")},
			want: []fv{{ay, C, "agent.yaml description changed"}}, cat: C},
		{name: "agent.yaml system_prompt", sandbox: map[string]string{ay: agentYAML("Be helpful", "Be concise")}, want: []fv{{ay, C, "agent.yaml system_prompt changed"}}, cat: C},
		{name: "agent.yaml context", sandbox: map[string]string{ay: agentYAML("context: workspace", "context: none")}, want: []fv{{ay, C, "agent.yaml context changed"}}, cat: C},
		{name: "agent.yaml tool removed", sandbox: map[string]string{ay: agentYAML("[read_file, list_files]", "[read_file]")},
			want: []fv{{ay, C, "agent.yaml tools remove tool list_files"}}, cat: C},
		{name: "agent.yaml non-egress tool added", sandbox: map[string]string{ay: agentYAML("[read_file, list_files]", "[read_file, list_files, write_file]")},
			want: []fv{{ay, C, "agent.yaml tools add tool write_file"}}, cat: C},
		{name: "agent.yaml tools reordered", sandbox: map[string]string{ay: agentYAML("[read_file, list_files]", "[list_files, read_file]")},
			want: []fv{{ay, C, "agent.yaml tools reordered"}}, cat: C},
		{name: "agent.yaml egress tool removed", ws: map[string]string{"agents/lean/agent.yaml": "tools: [read_file, web_fetch]\n"},
			sandbox: map[string]string{"agents/lean/agent.yaml": "tools: [read_file]\n"}, want: []fv{{"agents/lean/agent.yaml", C, "agent.yaml tools remove tool web_fetch"}}, cat: C},
		{name: "agent.yaml skill removed", sandbox: map[string]string{ay: agentYAML("skills: [search]", "skills: []")},
			want: []fv{{ay, C, "agent.yaml skills remove skill search"}}, cat: C},
		{name: "agent.yaml skills restricted to a list", sandbox: map[string]string{"agents/lean/agent.yaml": "name: lean\ntools: [read_file]\nskills: [search]\n"},
			want: []fv{{"agents/lean/agent.yaml", C, "agent.yaml skills restricted to a list"}}, cat: C},
		{name: "agent.yaml model.id", sandbox: map[string]string{ay: agentYAML("id: model-a", "id: model-b")}, want: []fv{{ay, C, "agent.yaml model.id changed"}}, cat: C},
		{name: "agent.yaml model.maxTokens", sandbox: map[string]string{ay: agentYAML("maxTokens: 1000", "maxTokens: 2000")}, want: []fv{{ay, C, "agent.yaml model.maxTokens changed"}}, cat: C},
		{name: "agent.yaml model.promptCaching, thinking, verbosity", sandbox: map[string]string{ay: agentYAML("  id: model-a\n", "  id: model-a\n  promptCaching: true\n  thinking: low\n  verbosity: terse\n")},
			want: []fv{{ay, C, "agent.yaml model.promptCaching changed"}}, cat: C},
		{name: "agent.yaml top-level maxTokens", sandbox: map[string]string{ay: mainAgent + "maxTokens: 10\n"}, want: []fv{{ay, C, "agent.yaml maxTokens changed"}}, cat: C},
		{name: "agent.yaml top-level thinking", sandbox: map[string]string{ay: mainAgent + "thinking: high\n"}, want: []fv{{ay, C, "agent.yaml thinking changed"}}, cat: C},
		{name: "agent.yaml comments only", sandbox: map[string]string{ay: "# main agent\n" + mainAgent}, want: []fv{{ay, C, "agent.yaml comments or formatting changed"}}, cat: C},
		{name: "new agent.yaml in an existing agent folder", ws: map[string]string{"agents/sys2/AGENT.md": "x\n"},
			sandbox: map[string]string{"agents/sys2/agent.yaml": "description: helper\n"}, want: []fv{{"agents/sys2/agent.yaml", C, "agent.yaml description changed"}}, cat: C},

		// Manual: agent.yaml.
		{name: "agent.yaml priority", sandbox: map[string]string{ay: agentYAML("priority: 1", "priority: 9")}, want: []fv{{ay, M, "agent.yaml priority changed"}}, cat: M},
		{name: "agent.yaml team", sandbox: map[string]string{ay: agentYAML("team: core", "team: ops")}, want: []fv{{ay, M, "agent.yaml team changed"}}, cat: M},
		{name: "agent.yaml internal", sandbox: map[string]string{ay: mainAgent + "internal: false\n"}, want: []fv{{ay, M, "agent.yaml internal changed"}}, cat: M},
		{name: "agent.yaml name", sandbox: map[string]string{ay: agentYAML("name: main", "name: boss")}, want: []fv{{ay, M, "agent.yaml name changed"}}, cat: M},
		{name: "agent.yaml unknown key", sandbox: map[string]string{ay: mainAgent + "autonomy: max\n"}, want: []fv{{ay, M, "agent.yaml unknown key autonomy"}}, cat: M},
		{name: "agent.yaml model.provider", sandbox: map[string]string{ay: agentYAML("provider: bedrock", "provider: openai")}, want: []fv{{ay, M, "agent.yaml model.provider changed"}}, cat: M},
		{name: "agent.yaml model.endpoint", sandbox: map[string]string{ay: agentYAML("https://example.invalid", "https://evil.invalid")}, want: []fv{{ay, M, "agent.yaml model.endpoint changed"}}, cat: M},
		{name: "agent.yaml unknown model key", sandbox: map[string]string{ay: agentYAML("  id: model-a\n", "  id: model-a\n  apiKey: x\n")}, want: []fv{{ay, M, "agent.yaml unknown key model.apiKey"}}, cat: M},
		{name: "agent.yaml model not a mapping", sandbox: map[string]string{ay: "name: main\ndescription: Main agent\nsystem_prompt: Be helpful\ncontext: workspace\npriority: 1\nteam: core\ntools: [read_file, list_files]\nskills: [search]\nmodel: fast\n"},
			want: []fv{{ay, M, "agent.yaml model of the new version is not a mapping"}}, cat: M},
		{name: "agent.yaml egress tool web_fetch added", sandbox: map[string]string{ay: agentYAML("[read_file, list_files]", "[read_file, list_files, web_fetch]")},
			want: []fv{{ay, M, "agent.yaml tools add egress tool web_fetch"}}, cat: M},
		{name: "agent.yaml egress tools added while another is removed", sandbox: map[string]string{ay: agentYAML("[read_file, list_files]", "[read_file, shell_exec, web_search, relay_send, a2a_send, node_exec, grep]")},
			want: []fv{{ay, M, "agent.yaml tools add egress tool shell_exec, web_search, relay_send, a2a_send, node_exec"}}, cat: M},
		{name: "agent.yaml tools not a list", sandbox: map[string]string{ay: agentYAML("[read_file, list_files]", "read_file")},
			want: []fv{{ay, M, "agent.yaml tools of the new version is not a list of tool names"}}, cat: M},
		{name: "agent.yaml skill added", sandbox: map[string]string{ay: agentYAML("skills: [search]", "skills: [search, notes]")},
			want: []fv{{ay, M, "agent.yaml skills add skill notes"}}, cat: M},
		{name: "agent.yaml skills list removed", sandbox: map[string]string{ay: agentYAML("skills: [search]\n", "")},
			want: []fv{{ay, M, "agent.yaml skills list removed, which shows every skill"}}, cat: M},
		{name: "agent.yaml strictest finding wins", sandbox: map[string]string{ay: agentYAML("priority: 1\nteam: core\ntools: [read_file, list_files]", "priority: 2\nteam: core\ntools: [read_file]")},
			want: []fv{{ay, M, "agent.yaml priority changed"}}, cat: M},
		{name: "agent.yaml new version malformed", sandbox: map[string]string{ay: "name: [main\n"}, want: []fv{{ay, M, ""}}, cat: M},
		{name: "agent.yaml live version malformed", ws: map[string]string{"agents/lean/agent.yaml": "tools: read_file: x\n"},
			sandbox: map[string]string{"agents/lean/agent.yaml": "tools: [read_file]\n"}, want: []fv{{"agents/lean/agent.yaml", M, ""}}, cat: M},
		{name: "agent.yaml not a mapping", sandbox: map[string]string{ay: "- main\n"}, want: []fv{{ay, M, "agent.yaml new version is malformed YAML: not a mapping of keys"}}, cat: M},
		{name: "agent.yaml duplicate key", sandbox: map[string]string{ay: mainAgent + "name: again\n"}, want: []fv{{ay, M, ""}}, cat: M},

		// Manual: SKILL.md.
		{name: "SKILL.md command", sandbox: map[string]string{sk: skillMD("command: notes", "command: note")}, want: []fv{{sk, M, "SKILL.md command changed"}}, cat: M},
		{name: "SKILL.md requiresAccess", sandbox: map[string]string{sk: skillMD("requiresAccess: workspace", "requiresAccess: readonly")}, want: []fv{{sk, M, "SKILL.md requiresAccess changed"}}, cat: M},
		{name: "SKILL.md verb access changed", sandbox: map[string]string{sk: skillMD("list: {access: readonly}", "list: {access: full}")},
			want: []fv{{sk, M, `SKILL.md verbs change the access of verb list from "readonly" to "full"`}}, cat: M},
		{name: "SKILL.md verb default access overridden", sandbox: map[string]string{sk: skillMD("  add:\n", "  add: {access: readonly}\n")},
			want: []fv{{sk, M, `SKILL.md verbs change the access of verb add from "workspace" to "readonly"`}}, cat: M},
		{name: "SKILL.md verb gets access where the skill has no default", ws: map[string]string{"skills/open/SKILL.md": "---\nname: open\nverbs:\n  list:\n---\nx\n"},
			sandbox: map[string]string{"skills/open/SKILL.md": "---\nname: open\nverbs:\n  list: {access: readonly}\n---\nx\n"},
			want:    []fv{{"skills/open/SKILL.md", M, `SKILL.md verbs change the access of verb list from "" to "readonly"`}}, cat: M},
		{name: "SKILL.md verbs introduced with the default access", ws: map[string]string{"skills/open/SKILL.md": "---\nname: open\nrequiresAccess: full\nverbs:\n  list:\n---\nx\n"},
			sandbox: map[string]string{"skills/open/SKILL.md": "---\nname: open\nrequiresAccess: full\nverbs:\n  list: {access: full, description: List}\n---\nx\n"},
			want:    []fv{{"skills/open/SKILL.md", C, "SKILL.md verbs list changed without an access change"}}, cat: C},
		{name: "SKILL.md verb added", sandbox: map[string]string{sk: skillMD("  add:\n", "  add:\n  purge: {access: readonly}\n")},
			want: []fv{{sk, M, "SKILL.md verbs add verb purge"}}, cat: M},
		{name: "SKILL.md verb removed", sandbox: map[string]string{sk: skillMD("  add:\n", "")}, want: []fv{{sk, M, "SKILL.md verbs remove verb add"}}, cat: M},
		{name: "SKILL.md verbs malformed", sandbox: map[string]string{sk: skillMD("  list: {access: readonly}\n  add:\n  delete: {access: full, description: Remove a note}\n", "  - list\n")},
			want: []fv{{sk, M, "SKILL.md verbs of the new version are malformed: verbs is not a mapping of verb names"}}, cat: M},
		{name: "SKILL.md verb access not a string", sandbox: map[string]string{sk: skillMD("list: {access: readonly}", "list: {access: [a]}")},
			want: []fv{{sk, M, "SKILL.md verbs of the new version are malformed: verb list access is not a string"}}, cat: M},
		{name: "SKILL.md other front matter key", sandbox: map[string]string{sk: skillMD("name: notes\n", "name: notes\nallowed-tools: [shell_exec]\n")},
			want: []fv{{sk, M, "SKILL.md front matter key allowed-tools"}}, cat: M},
		{name: "SKILL.md front matter unclosed", sandbox: map[string]string{sk: "---\nname: notes\nbody\n"},
			want: []fv{{sk, M, "SKILL.md front matter of the new version is malformed: front matter starts with --- but has no closing --- line"}}, cat: M},
		{name: "SKILL.md front matter malformed YAML", sandbox: map[string]string{sk: "---\nname: [notes\n---\nbody\n"}, want: []fv{{sk, M, ""}}, cat: M},
		{name: "SKILL.md live front matter malformed", ws: map[string]string{"skills/broken/SKILL.md": "---\n: : :\n---\nx\n"},
			sandbox: map[string]string{"skills/broken/SKILL.md": "---\nname: broken\n---\nx\n"}, want: []fv{{"skills/broken/SKILL.md", M, ""}}, cat: M},
		{name: "SKILL.md body and command: strictest wins", sandbox: map[string]string{sk: skillMD("command: notes", "command: n") + "more\n"},
			want: []fv{{sk, M, "SKILL.md command changed"}}, cat: M},

		// Manual: files and folders.
		{name: "USER.md", sandbox: map[string]string{"USER.md": "The user is Bo.\n"}, want: []fv{{"USER.md", M, "USER.md changed"}}, cat: M},
		{name: "other file in a skill folder", sandbox: map[string]string{"skills/notes/helper.py": "print(2)\n"}, want: []fv{{"skills/notes/helper.py", M, "other file helper.py in skill folder"}}, cat: M},
		{name: "other file in an agent folder", sandbox: map[string]string{"agents/main/notes.md": "x\n"}, want: []fv{{"agents/main/notes.md", M, "other file notes.md in agent folder"}}, cat: M},
		{name: "new agent folder", sandbox: map[string]string{"agents/newbie/AGENT.md": "x\n"}, want: []fv{{"agents/newbie/AGENT.md", M, "new agent folder agents/newbie"}}, cat: M},
		{name: "new skill folder", sandbox: map[string]string{"skills/todo/SKILL.md": "x\n"}, want: []fv{{"skills/todo/SKILL.md", M, "new skill folder skills/todo"}}, cat: M},
		{name: "deleted file", deletes: []string{"INDEX.md"}, want: []fv{{"INDEX.md", M, "deleted file"}}, cat: M},
		{name: "internal agent by id", sandbox: map[string]string{"agents/__evo_agent__/AGENT.md": "obey\n"}, want: []fv{{"agents/__evo_agent__/AGENT.md", M, "internal agent __evo_agent__"}}, cat: M},
		{name: "internal agent by live agent.yaml", sandbox: map[string]string{"agents/sys/AGENT.md": "changed\n"},
			want: []fv{{"agents/sys/AGENT.md", M, "internal agent sys (live agent.yaml internal: true)"}}, cat: M},
		{name: "unknown paths", sandbox: map[string]string{"README.md": "x", "../etc/passwd": "x", "prompts/other/x.md": "x"},
			want: []fv{{"../etc/passwd", M, "unknown path"}, {"README.md", M, "unknown path"}, {"prompts/other/x.md", M, "unknown path"}}, cat: M},

		// Several files: the strictest category wins, verdicts sorted by path.
		{name: "mixed", sandbox: map[string]string{"USER.md": "x\n", "INSTRUCTIONS.md": "y\n", ay: agentYAML("Be helpful", "Be kind")},
			want: []fv{{"INSTRUCTIONS.md", P, "INSTRUCTIONS.md changed"}, {"USER.md", M, "USER.md changed"}, {ay, C, "agent.yaml system_prompt changed"}}, cat: M},
		{name: "prompt and capability", sandbox: map[string]string{"INDEX.md": "y\n", ay: agentYAML("Be helpful", "Be kind")},
			want: []fv{{"INDEX.md", P, "INDEX.md changed"}, {ay, C, "agent.yaml system_prompt changed"}}, cat: C},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			live, global := surfaces(c.ws)
			sandbox := map[string][]byte{}
			for p, s := range c.sandbox {
				sandbox[p] = []byte(s)
			}
			got, cat := evolution.Classify(live, global, sandbox, c.deletes)
			if cat != c.cat {
				t.Errorf("category = %q, want %q (%+v)", cat, c.cat, got)
			}
			if len(got) != len(c.want) {
				t.Fatalf("verdicts = %+v, want %+v", got, c.want)
			}
			for i := range got {
				w := c.want[i]
				if w.Why == "" { // malformed YAML: the library's message varies
					w.Why = got[i].Why
					if !strings.Contains(got[i].Why, "malformed") {
						t.Errorf("verdict %d why = %q, want a malformed-YAML reason", i, got[i].Why)
					}
				}
				if !reflect.DeepEqual(got[i], w) {
					t.Errorf("verdict %d = %+v, want %+v", i, got[i], w)
				}
			}
		})
	}
}

func TestIsEgressTool(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"shell_exec", "web_fetch", "web_search", "relay_send", "a2a_send", "node_list", "node_exec"} {
		if !evolution.IsEgressTool(name) {
			t.Errorf("IsEgressTool(%q) = false", name)
		}
	}
	for _, name := range []string{"read_file", "write_file", "relay_read", "nodes", "web"} {
		if evolution.IsEgressTool(name) {
			t.Errorf("IsEgressTool(%q) = true", name)
		}
	}
}
