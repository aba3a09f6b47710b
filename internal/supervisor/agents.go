package supervisor

import (
	"embed"

	"github.com/molt-dev/molt/internal/builtin"
)

// Ids of the supervisor's built-in agents.
const (
	// AgentSupervisor proposes a campaign's next action after a material event
	// (the default supervising agent of a campaign).
	AgentSupervisor = "__supervisor__"
	// AgentReviewer gives the independent verdict a proposal needs before it
	// is carried out.
	AgentReviewer = "__reviewer__"
)

//go:embed agents/__supervisor__/AGENT.md agents/__reviewer__/AGENT.md
var agentsFS embed.FS

// agents are the supervisor's built-in agents shipped in the binary.
var agents = builtin.Agents{FS: agentsFS, IDs: []string{AgentSupervisor, AgentReviewer}}

// BuiltinAgent returns the AGENT.md shipped in the binary for a built-in
// agent of the supervisor, and false for any other id. Its first line is
// Marker(id).
func BuiltinAgent(id string) (string, bool) { return agents.Get(id) }

// Marker is the first line of the built-in agent id's AGENT.md, and so of the
// system prompt of every decision request made for it (a workspace agent's
// prompt follows the built-in supervisor's): "<!-- molt:internal-agent <id> -->".
func Marker(id string) string { return builtin.Marker(id) }

// AgentFromSystem returns the built-in agent whose marker is the first line
// of a system prompt, and false when there is none.
func AgentFromSystem(system string) (string, bool) { return agents.FromSystem(system) }
