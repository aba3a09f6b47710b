package chat

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
)

// Tool is a tool an agent can call. Run gets the model's input (a JSON object) and
// returns the text the model reads back; an error is reported to the model as a
// failed call (its message must be safe to show). Run must honour ctx: it is
// cancelled when the turn loses its claim.
type Tool struct {
	Spec model.Tool
	Run  func(ctx context.Context, input json.RawMessage) (string, error)
	// Egress: the tool reaches hosts outside molt (web search, fetch).
	Egress bool
	// CrossWorkspace: the tool acts on workspaces other than the turn's.
	CrossWorkspace bool
}

// ToolGate narrows the tools a turn of sess is offered (a policy such as a
// campaign's, see internal/a2a); it returns a subset of tools.
type ToolGate func(ctx context.Context, sess session.Session, tools []Tool) []Tool

// GateTools registers the tool gate. Register it before serving.
func (s *Service) GateTools(fn ToolGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.toolGate = fn
}

// PostGuard refuses a user's post into sess (the chat API's, not a remote
// agent's over A2A), or returns nil: e.g. a campaign's context, which only
// its controller writes to (see internal/a2a).
type PostGuard func(ctx context.Context, sess session.Session) error

// GuardPosts registers the post guard. Register it before serving.
func (s *Service) GuardPosts(fn PostGuard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.postGuard = fn
}

// guardPost applies the post guard, if one is registered.
func (s *Service) guardPost(ctx context.Context, sess session.Session) error {
	s.mu.RLock()
	fn := s.postGuard
	s.mu.RUnlock()
	if fn == nil {
		return nil
	}
	return fn(ctx, sess)
}

// gateTools applies the tool gate, if one is registered.
func (s *Service) gateTools(ctx context.Context, sess session.Session, tools []Tool) []Tool {
	s.mu.RLock()
	fn := s.toolGate
	s.mu.RUnlock()
	if fn == nil {
		return tools
	}
	return fn(ctx, sess, tools)
}

// Tools is a registry of tools by name. It is safe for concurrent use.
type Tools struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewTools returns a registry holding tools.
func NewTools(tools ...Tool) *Tools {
	r := &Tools{tools: map[string]Tool{}}
	for _, t := range tools {
		_ = r.Register(t)
	}
	return r
}

// Register adds t, replacing a tool of the same name. EINVALID without a name or
// a Run function.
func (r *Tools) Register(t Tool) error {
	if t.Spec.Name == "" || t.Run == nil {
		return molt.Invalid("tool", "a tool needs a name and a run function")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]Tool{}
	}
	r.tools[t.Spec.Name] = t
	return nil
}

// Select returns the registered tools among names, sorted by name, and the names
// the registry does not know.
func (r *Tools) Select(names []string) (tools []Tool, unknown []string) {
	if r == nil {
		return nil, names
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if t, ok := r.tools[n]; ok {
			tools = append(tools, t)
		} else {
			unknown = append(unknown, n)
		}
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Spec.Name < tools[j].Spec.Name })
	return tools, unknown
}
