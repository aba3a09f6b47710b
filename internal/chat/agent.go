package chat

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/molt-dev/molt/internal/molt"
)

// Agent is a parsed agents/<id>/agent.yaml. Keys molt does not know are kept in
// Extra (evolution classifies changes to them) and otherwise ignored.
type Agent struct {
	Name         string `yaml:"name"`
	Description  string `yaml:"description"`
	SystemPrompt string `yaml:"system_prompt"`
	// Tools lists the tools the agent may call; only these are offered to the
	// model (those the runtime's registry knows).
	Tools []string `yaml:"tools"`
	// Skills lists the skills shown to the agent. Nil (the key is absent) shows
	// every skill of the surface; an empty list shows none.
	Skills []string   `yaml:"skills"`
	Model  AgentModel `yaml:"model"`
	// Delegation: the resolver (internal/delegate) reads each user message of
	// the agent's root sessions and may route it to another agent or a
	// registered remote instead of answering it here.
	Delegation bool `yaml:"delegation"`
	// Aliases are further names the resolver knows the agent by.
	Aliases []string       `yaml:"aliases"`
	Extra   map[string]any `yaml:",inline"`
}

// AgentModel is the model section of agent.yaml. ID is recorded for evolution
// and operators; the provider and model that answer are the deployment's
// (MOLT_MODEL). MaxTokens bounds each reply (0: the runtime's default).
type AgentModel struct {
	ID        string         `yaml:"id"`
	MaxTokens int            `yaml:"maxTokens"`
	Extra     map[string]any `yaml:",inline"`
}

// MaxAgentTools bounds the tools one agent lists.
const MaxAgentTools = 64

// ParseAgent parses the agent.yaml at path (used in error messages). An empty file
// is an agent with every default. It returns EINVALID with Reason "agent_config"
// and Field path for malformed YAML or values of the wrong shape.
func ParseAgent(path string, data []byte) (Agent, error) {
	var a Agent
	bad := func(format string, args ...any) error {
		return &molt.Error{Code: molt.EINVALID, Reason: ReasonAgentConfig, Field: path,
			Message: path + ": " + fmt.Sprintf(format, args...)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return a, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Agent{}, bad("%s", yamlMessage(err))
	}
	if len(root.Content) == 0 {
		return a, nil
	}
	if root.Content[0].Kind != yaml.MappingNode {
		return Agent{}, bad("must be a YAML mapping of keys (name, description, tools, …)")
	}
	if err := root.Content[0].Decode(&a); err != nil {
		return Agent{}, bad("%s", yamlMessage(err))
	}
	if a.Skills == nil && hasKey(root.Content[0], "skills") {
		a.Skills = []string{} // "skills:" or "skills: []": show none
	}
	if len(a.Tools) > MaxAgentTools {
		return Agent{}, bad("lists %d tools, at most %d allowed", len(a.Tools), MaxAgentTools)
	}
	for i, t := range a.Tools {
		if strings.TrimSpace(t) == "" {
			return Agent{}, bad("tools[%d] is empty", i)
		}
	}
	for i, s := range a.Skills {
		if strings.TrimSpace(s) == "" {
			return Agent{}, bad("skills[%d] is empty", i)
		}
	}
	for i, al := range a.Aliases {
		if strings.TrimSpace(al) == "" {
			return Agent{}, bad("aliases[%d] is empty", i)
		}
	}
	if a.Model.MaxTokens < 0 {
		return Agent{}, bad("model.maxTokens must not be negative")
	}
	return a, nil
}

func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// yamlMessage is the YAML library's message without its package prefix, on one
// line and bounded: it quotes only the author's own file.
func yamlMessage(err error) string {
	msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

// Skill is one skill of the surface as the agent's skill listing shows it.
type Skill struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Scope       string `json:"scope"` // workspace, global or builtin
}

// ParseSkill reads the name and description from a SKILL.md's YAML front matter
// (between "---" lines at the top). A missing or malformed front matter is not
// an error: the skill is listed under its id without a description, so one
// broken skill never stops a chat.
func ParseSkill(id string, data []byte) Skill {
	s := Skill{ID: id, Name: id}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return s
	}
	front, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		return s
	}
	var fm struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return s
	}
	if n := strings.TrimSpace(fm.Name); n != "" {
		s.Name = n
	}
	s.Description = strings.Join(strings.Fields(fm.Description), " ")
	return s
}
