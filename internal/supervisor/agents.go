package supervisor

import (
	"embed"
	"strings"
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

// BuiltinAgent returns the AGENT.md shipped in the binary for a built-in
// agent of the supervisor, and false for any other id. Its first line is
// Marker(id).
func BuiltinAgent(id string) (string, bool) {
	if id != AgentSupervisor && id != AgentReviewer {
		return "", false
	}
	b, err := agentsFS.ReadFile("agents/" + id + "/AGENT.md")
	if err != nil {
		return "", false
	}
	return string(b), true
}

const markerPrefix = "<!-- molt:internal-agent "

// Marker is the first line of the built-in agent id's AGENT.md, and so of the
// system prompt of every decision request made for it (a workspace agent's
// prompt follows the built-in supervisor's): "<!-- molt:internal-agent <id> -->".
func Marker(id string) string { return markerPrefix + id + " -->" }

// AgentFromSystem returns the built-in agent whose marker is the first line
// of a system prompt, and false when there is none.
func AgentFromSystem(system string) (string, bool) {
	first, _, _ := strings.Cut(system, "\n")
	rest, ok := strings.CutPrefix(strings.TrimSpace(first), markerPrefix)
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, " -->")
	if !ok || (id != AgentSupervisor && id != AgentReviewer) {
		return "", false
	}
	return id, true
}
