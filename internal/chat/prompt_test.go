package chat_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

func files(ws string, kv ...string) []workspace.File {
	var out []workspace.File
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, workspace.NewFile(ws, kv[i], []byte(kv[i+1]), time.Time{}))
	}
	return out
}

func paths(p chat.Prompt) []string {
	var out []string
	for _, part := range p.Parts {
		out = append(out, part.Path+"@"+part.Scope)
	}
	return out
}

func TestAssemble(t *testing.T) {
	t.Parallel()
	global := files("global",
		"INSTRUCTIONS.md", "global rules",
		"INDEX.md", "global index",
		"USER.md", "",
		"prompts/bootstrap/10-b.md", "boot b",
		"prompts/bootstrap/00-a.md", "boot a",
		"prompts/all/x.md", "all x",
		"prompts/root/r.md", "root r",
		"agents/helper/AGENT.md", "helper agent",
		"agents/helper/agent.yaml", "name: helper\nsystem_prompt: be helpful\nskills: [search]\n",
		"skills/search/SKILL.md", "---\nname: Web search\ndescription: >\n  Finds things\n  on the web.\n---\nbody",
		"skills/notes/SKILL.md", "no front matter",
	)
	ws := files("acme",
		"INSTRUCTIONS.md", "acme rules",
		"prompts/all/y.md", "acme all y", // replaces the global prompts/all folder
	)
	surface := chat.Surface(chat.Builtin(), global, ws)
	tests := []struct {
		name      string
		agent     string
		root      bool
		wantParts []string
		wantIn    []string
		wantOut   []string
		wantCode  string
		reason    string
	}{
		{
			name: "builtin main, root", agent: "main", root: true,
			wantParts: []string{"prompts/bootstrap/00-a.md@global", "prompts/bootstrap/10-b.md@global",
				"INSTRUCTIONS.md@workspace", "INDEX.md@global", "agents/main/AGENT.md@builtin", "skills@",
				"prompts/all/y.md@workspace", "prompts/root/r.md@global"},
			wantIn:  []string{"=== INSTRUCTIONS.md ===\nacme rules", "- Web search (skills/search/SKILL.md): Finds things on the web.", "- notes (skills/notes/SKILL.md)\n"},
			wantOut: []string{"global rules", "all x", "body"},
		},
		{
			name: "sub-session: no root prompts", agent: "main", root: false,
			wantParts: []string{"prompts/bootstrap/00-a.md@global", "prompts/bootstrap/10-b.md@global",
				"INSTRUCTIONS.md@workspace", "INDEX.md@global", "agents/main/AGENT.md@builtin", "skills@",
				"prompts/all/y.md@workspace"},
			wantOut: []string{"root r"},
		},
		{
			name: "agent with system_prompt and a skill list", agent: "helper", root: true,
			wantParts: []string{"prompts/bootstrap/00-a.md@global", "prompts/bootstrap/10-b.md@global",
				"INSTRUCTIONS.md@workspace", "INDEX.md@global", "agents/helper/AGENT.md@global",
				"agents/helper/agent.yaml#system_prompt@global", "skills@", "prompts/all/y.md@workspace", "prompts/root/r.md@global"},
			wantIn:  []string{"=== agents/helper/agent.yaml#system_prompt ===\nbe helpful", "Web search"},
			wantOut: []string{"notes"},
		},
		{name: "unknown agent", agent: "nobody", wantCode: molt.ENOTFOUND, reason: chat.ReasonAgentNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := chat.Assemble(chat.PromptInput{Surface: surface, Agent: tc.agent, Root: tc.root})
			if tc.wantCode != "" {
				if molt.ErrorCode(err) != tc.wantCode || molt.ErrorReason(err) != tc.reason {
					t.Fatalf("Assemble error = %v, want %s/%s", err, tc.wantCode, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("Assemble: %v", err)
			}
			if got := paths(p); !reflect.DeepEqual(got, tc.wantParts) {
				t.Errorf("parts =\n%q\nwant\n%q", got, tc.wantParts)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(p.System+"\n", s) {
					t.Errorf("system prompt lacks %q:\n%s", s, p.System)
				}
			}
			for _, s := range tc.wantOut {
				if strings.Contains(p.System, s) {
					t.Errorf("system prompt contains %q:\n%s", s, p.System)
				}
			}
			again, _ := chat.Assemble(chat.PromptInput{Surface: surface, Agent: tc.agent, Root: tc.root})
			if again.System != p.System {
				t.Errorf("Assemble is not deterministic")
			}
			if !strings.HasPrefix(p.System, "=== prompts/bootstrap/00-a.md ===\nboot a\n\n=== prompts/bootstrap/10-b.md ===") {
				t.Errorf("system prompt does not start with the bootstrap parts in order:\n%s", p.System)
			}
		})
	}
}

func TestSurfaceOverridesBuiltinAgent(t *testing.T) {
	t.Parallel()
	// A workspace agents/main/ folder replaces the built-in one as a whole.
	ws := files("acme", "agents/main/AGENT.md", "acme main")
	p, err := chat.Assemble(chat.PromptInput{Surface: chat.Surface(chat.Builtin(), nil, ws), Agent: "main"})
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	if p.AgentScope != workspace.ScopeWorkspace || p.Agent.Name != "" {
		t.Fatalf("agent scope %q name %q: the built-in agent.yaml leaked through the override", p.AgentScope, p.Agent.Name)
	}
	if p.System != "=== agents/main/AGENT.md ===\nacme main" {
		t.Fatalf("system = %q", p.System)
	}
	// A fresh workspace chats with the built-in agent.
	p, err = chat.Assemble(chat.PromptInput{Surface: chat.Surface(chat.Builtin(), nil, nil), Agent: chat.DefaultAgent})
	if err != nil || p.AgentScope != workspace.ScopeBuiltin || p.Agent.Name != "main" || !strings.Contains(p.System, "main agent") {
		t.Fatalf("built-in main: %+v, %v", p, err)
	}
}

func TestAssembleMalformedAgentYAML(t *testing.T) {
	t.Parallel()
	ws := files("acme", "agents/main/agent.yaml", "name: [unclosed\n")
	_, err := chat.Assemble(chat.PromptInput{Surface: chat.Surface(chat.Builtin(), nil, ws), Agent: "main"})
	if molt.ErrorCode(err) != molt.EINVALID || molt.ErrorReason(err) != chat.ReasonAgentConfig {
		t.Fatalf("err = %v, want invalid/agent_config", err)
	}
	if !strings.Contains(err.Error(), "agents/main/agent.yaml") {
		t.Fatalf("error does not name the file: %v", err)
	}
}

func TestParseAgent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		want    chat.Agent
		wantErr string // substring; "" for success
	}{
		{name: "empty", yaml: "  \n", want: chat.Agent{}},
		{name: "full", yaml: "name: helper\ndescription: helps\nsystem_prompt: |\n  Be brief.\ntools: [echo, search]\nskills: [a]\nmodel:\n  id: gpt-x\n  maxTokens: 500\n",
			want: chat.Agent{Name: "helper", Description: "helps", SystemPrompt: "Be brief.\n", Tools: []string{"echo", "search"},
				Skills: []string{"a"}, Model: chat.AgentModel{ID: "gpt-x", MaxTokens: 500}}},
		{name: "unknown keys kept", yaml: "name: x\npriority: 3\nmodel:\n  provider: p\n",
			want: chat.Agent{Name: "x", Extra: map[string]any{"priority": 3}, Model: chat.AgentModel{Extra: map[string]any{"provider": "p"}}}},
		{name: "skills absent is nil", yaml: "name: x\n", want: chat.Agent{Name: "x"}},
		{name: "skills empty is empty", yaml: "name: x\nskills:\n", want: chat.Agent{Name: "x", Skills: []string{}}},
		{name: "malformed", yaml: "name: [x\n", wantErr: "agents/a/agent.yaml"},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "mapping"},
		{name: "wrong type", yaml: "tools: echo\n", wantErr: "cannot unmarshal"},
		{name: "empty tool", yaml: "tools: ['']\n", wantErr: "tools[0] is empty"},
		{name: "negative max tokens", yaml: "model: {maxTokens: -1}\n", wantErr: "maxTokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := chat.ParseAgent("agents/a/agent.yaml", []byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || molt.ErrorReason(err) != chat.ReasonAgentConfig {
					t.Fatalf("err = %v, want agent_config containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAgent: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestParseSkill(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, name, desc string }{
		{"---\nname: Search\ndescription: finds\n---\nbody", "Search", "finds"},
		{"---\r\nname: Win\r\n---\r\n", "Win", ""},
		{"---\nname: [broken\n---\n", "id", ""},
		{"no front matter", "id", ""},
		{"---\ndescription: only\n---", "id", "only"},
	}
	for _, tc := range tests {
		s := chat.ParseSkill("id", []byte(tc.in))
		if s.Name != tc.name || s.Description != tc.desc {
			t.Errorf("ParseSkill(%q) = %q/%q, want %q/%q", tc.in, s.Name, s.Description, tc.name, tc.desc)
		}
	}
}
