// Package builtin is what molt's built-in internal agents share, whoever
// ships them (the evolution pipeline's, the supervisor's): an agent's
// AGENT.md embedded in the binary, and the marker line that starts it and so
// every system prompt built for it, by which the offline model and the tests
// recognise the agent a request is for.
package builtin

import (
	"io/fs"
	"slices"
	"strings"
)

// markerPrefix starts the marker line of a built-in agent's AGENT.md.
const markerPrefix = "<!-- molt:internal-agent "

// Marker is the first line of the built-in agent id's AGENT.md:
// "<!-- molt:internal-agent <id> -->".
func Marker(id string) string { return markerPrefix + id + " -->" }

// Agents is a set of built-in agents: each id's AGENT.md is agents/<id>/AGENT.md
// in FS (an embed.FS of the package that ships them).
type Agents struct {
	FS  fs.FS
	IDs []string
}

// Get returns the AGENT.md of agent id, and false for an id not in the set.
func (a Agents) Get(id string) (string, bool) {
	if !slices.Contains(a.IDs, id) {
		return "", false
	}
	b, err := fs.ReadFile(a.FS, "agents/"+id+"/AGENT.md")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// FromSystem returns the agent of the set whose marker is the first line of
// a system prompt, and false when there is none.
func (a Agents) FromSystem(system string) (string, bool) {
	first, _, _ := strings.Cut(system, "\n")
	rest, ok := strings.CutPrefix(strings.TrimSpace(first), markerPrefix)
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, " -->")
	if !ok || !slices.Contains(a.IDs, id) {
		return "", false
	}
	return id, true
}
