package evolution

import (
	"embed"

	"github.com/molt-dev/molt/internal/builtin"
)

// Ids of the built-in internal agents.
const (
	AgentEvo   = "__evo_agent__"   // drafts a patch from a session
	AgentScore = "__score__"       // scores a dry-run of a patch
	AgentApply = "__apply_agent__" // merges overlapping patches
)

//go:embed agents/__evo_agent__/AGENT.md agents/__score__/AGENT.md agents/__apply_agent__/AGENT.md
var builtinFS embed.FS

// BuiltinAgents lists the ids of the built-in internal agents.
func BuiltinAgents() []string { return []string{AgentEvo, AgentScore, AgentApply} }

// agents are the built-in internal agents shipped in the binary.
var agents = builtin.Agents{FS: builtinFS, IDs: BuiltinAgents()}

// BuiltinAgent returns the AGENT.md shipped in the binary for an internal agent,
// and false for any other id. Its first line is Marker(id).
func BuiltinAgent(id string) (string, bool) { return agents.Get(id) }

// Marker is the first line of the built-in agent id's AGENT.md, and so of the
// system prompt of every request this package builds for it:
// "<!-- molt:internal-agent <id> -->".
func Marker(id string) string { return builtin.Marker(id) }

// AgentFromSystem returns the internal agent whose marker is the first line of a
// system prompt, and false when there is none.
func AgentFromSystem(system string) (string, bool) { return agents.FromSystem(system) }
