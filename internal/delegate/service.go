package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// KindRemoteAgent is the kind of the work items that hold remote
// registrations (status StatusRegistered, id "<workspace>.<name>"): stored
// like every other item, through the claim protocol's unclaimed verbs.
const KindRemoteAgent work.Kind = "remote_agent"

// StatusRegistered is a remote registration's only status.
const StatusRegistered work.Status = "registered"

// Codes of refusals (ECONFLICT).
const (
	CodeAliasCollision = "alias_collision" // a name or alias another target has
)

// Limits of a registration.
const (
	MaxAliases  = 16
	MaxAliasLen = 64
	MaxURLLen   = 2048
)

var (
	remoteNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	envRefRe     = regexp.MustCompile(`^env:[A-Z_][A-Z0-9_]{0,127}$`)
	secretRefRe  = regexp.MustCompile(`^secretsmanager:[A-Za-z0-9/_+=.@:-]{1,512}$`)
)

// Remote is a remote A2A agent registered for a workspace by a full token.
// TokenRef names where its bearer token lives (env:NAME for molt serve,
// secretsmanager:<name or ARN> on AWS); the token itself is never stored.
type Remote struct {
	Workspace string    `json:"workspace"`
	Name      string    `json:"name"`
	CardURL   string    `json:"card_url"`
	TokenRef  string    `json:"token_ref"`
	Aliases   []string  `json:"aliases"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Caller is what the service needs to know of who calls it (auth.Caller has it).
type Caller interface {
	CanRead(ws string) bool
	CanChat(ws string) bool
	IsFull() bool
}

// Store is what the service reads.
type Store interface {
	work.Reader
	workspace.SurfaceStore
	GetWorkspace(ctx context.Context, name string) (workspace.Workspace, error)
}

// Service holds the registry of delegation targets: a workspace's agents (from
// its surface) and the remote agents registered for it.
type Service struct {
	Store    Store
	Protocol *work.Protocol
	Surfaces *workspace.Surfaces
}

func remoteID(ws, name string) string { return ws + "." + name }

func notFoundRemote(name string) error { return molt.NotFound("remote agent %q not found", name) }

func (s *Service) readable(ctx context.Context, c Caller, ws string) error {
	if err := workspace.ValidateName(ws); err != nil {
		return err
	}
	if ws == workspace.Global || !c.CanRead(ws) {
		return workspace.NotFound(ws)
	}
	if _, err := s.Store.GetWorkspace(ctx, ws); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return workspace.NotFound(ws)
		}
		return fmt.Errorf("get workspace %s: %w", ws, err)
	}
	return nil
}

// Registry returns the live registry of ws: its agents (agents/<id>/agent.yaml
// on its effective surface; internal agents excluded) and its registered
// remotes.
func (s *Service) Registry(ctx context.Context, ws string) (Registry, error) {
	sf, err := s.Surfaces.Read(ctx, ws)
	if err != nil {
		return Registry{}, err
	}
	reg := Registry{Targets: AgentTargets(sf.Effective())}
	remotes, err := s.remotes(ctx, ws)
	if err != nil {
		return Registry{}, err
	}
	for _, r := range remotes {
		reg.Targets = append(reg.Targets, Target{Name: r.Name, Kind: KindRemote, Aliases: r.Aliases, Registered: true})
	}
	return reg, nil
}

// AgentTargets lists the agents of a surface as targets: the id, agent.yaml's
// name as the title and its aliases. Internal agents (ids starting with "__")
// are never targets; an agent.yaml that does not parse gives its id only.
func AgentTargets(surface []workspace.EffectiveFile) []Target {
	var out []Target
	seen := map[string]bool{}
	for _, f := range surface {
		rest, ok := strings.CutPrefix(f.Path, "agents/")
		if !ok {
			continue
		}
		id, file, ok := strings.Cut(rest, "/")
		if !ok || strings.HasPrefix(id, "__") || seen[id] {
			continue
		}
		if file != "agent.yaml" && file != "AGENT.md" {
			continue
		}
		seen[id] = true
		t := Target{Name: id, Kind: KindAgent}
		for _, g := range surface {
			if g.Path == "agents/"+id+"/agent.yaml" {
				var y struct {
					Name    string   `yaml:"name"`
					Aliases []string `yaml:"aliases"`
				}
				if yaml.Unmarshal(g.Content, &y) == nil {
					if Normalize(y.Name) != Normalize(id) {
						t.Title = y.Name
					}
					t.Aliases = y.Aliases
				}
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Service) remotes(ctx context.Context, ws string) ([]Remote, error) {
	return Remotes(ctx, s.Store, ws)
}

// LiveRegistry is the registry of ws read for a dispatch (the chat runtime's
// gate input): the agents of surface (ws's effective surface, read by the
// caller) and ws's registered remotes.
func LiveRegistry(ctx context.Context, r work.Reader, ws string, surface []workspace.EffectiveFile) (Registry, error) {
	reg := Registry{Targets: AgentTargets(surface)}
	remotes, err := Remotes(ctx, r, ws)
	if err != nil {
		return Registry{}, err
	}
	for _, rm := range remotes {
		reg.Targets = append(reg.Targets, Target{Name: rm.Name, Kind: KindRemote, Aliases: rm.Aliases, Registered: true})
	}
	return reg, nil
}

// LookupRemote reads remote name of ws with no access check (the gate has
// authorised the dispatch); ENOTFOUND when it is not registered.
func LookupRemote(ctx context.Context, r work.Reader, ws, name string) (Remote, error) {
	if !remoteNameRe.MatchString(name) {
		return Remote{}, notFoundRemote(name)
	}
	it, err := r.GetItem(ctx, KindRemoteAgent, remoteID(ws, name))
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return Remote{}, notFoundRemote(name)
	}
	if err != nil {
		return Remote{}, fmt.Errorf("get remote agent %s: %w", name, err)
	}
	var rm Remote
	if err := json.Unmarshal(it.Data, &rm); err != nil {
		return Remote{}, fmt.Errorf("remote agent %s: %w", name, err)
	}
	return rm, nil
}

// Remotes lists the remote agents registered for ws.
func Remotes(ctx context.Context, s work.Reader, ws string) ([]Remote, error) {
	var out []Remote
	q := work.ListQuery{Kind: KindRemoteAgent, Status: StatusRegistered, Oldest: true, Page: page.Query{Limit: page.MaxLimit}}
	for {
		pg, err := s.ListItems(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("list remote agents: %w", err)
		}
		for _, it := range pg.Items {
			if it.Workspace != ws {
				continue
			}
			var r Remote
			if json.Unmarshal(it.Data, &r) == nil {
				out = append(out, r)
			}
		}
		if pg.Next == "" {
			return out, nil
		}
		q.Page.Cursor = pg.Next
	}
}

// ListRemotes lists ws's remote agents (full callers only: a registration
// names where a credential lives).
func (s *Service) ListRemotes(ctx context.Context, c Caller, ws string) ([]Remote, error) {
	if err := s.full(ctx, c, ws); err != nil {
		return nil, err
	}
	return s.remotes(ctx, ws)
}

func (s *Service) full(ctx context.Context, c Caller, ws string) error {
	if err := s.readable(ctx, c, ws); err != nil {
		return err
	}
	if !c.IsFull() {
		return &molt.Error{Code: molt.EFORBIDDEN, Message: "remote agents are managed with a full token"}
	}
	return nil
}

// GetRemote returns remote name of ws.
func (s *Service) GetRemote(ctx context.Context, c Caller, ws, name string) (Remote, error) {
	if err := s.full(ctx, c, ws); err != nil {
		return Remote{}, err
	}
	it, r, err := s.getRemote(ctx, ws, name)
	_ = it
	return r, err
}

func (s *Service) getRemote(ctx context.Context, ws, name string) (work.Item, Remote, error) {
	if !remoteNameRe.MatchString(name) {
		return work.Item{}, Remote{}, notFoundRemote(name)
	}
	it, err := s.Store.GetItem(ctx, KindRemoteAgent, remoteID(ws, name))
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return work.Item{}, Remote{}, notFoundRemote(name)
	}
	if err != nil {
		return work.Item{}, Remote{}, fmt.Errorf("get remote agent %s: %w", name, err)
	}
	var r Remote
	if err := json.Unmarshal(it.Data, &r); err != nil {
		return work.Item{}, Remote{}, fmt.Errorf("remote agent %s: %w", name, err)
	}
	return it, r, nil
}

// RemoteInput is a registration's body.
type RemoteInput struct {
	CardURL  string   `json:"card_url"`
	TokenRef string   `json:"token_ref"`
	Aliases  []string `json:"aliases"`
}

// PutRemote registers (or replaces) remote name of ws. EINVALID naming the
// field for a bad name, card URL, token reference or alias; ECONFLICT
// CodeAliasCollision when the name or an alias is another target's. It
// reports whether the registration was created.
func (s *Service) PutRemote(ctx context.Context, c Caller, ws, name string, in RemoteInput) (Remote, bool, error) {
	if err := s.full(ctx, c, ws); err != nil {
		return Remote{}, false, err
	}
	if !remoteNameRe.MatchString(name) {
		return Remote{}, false, molt.Invalid("name", "a remote's name is 1-63 lowercase letters, digits and hyphens")
	}
	u, err := url.Parse(in.CardURL)
	if len(in.CardURL) > MaxURLLen || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return Remote{}, false, molt.Invalid("card_url", "card_url must be an http(s) URL without credentials")
	}
	if !envRefRe.MatchString(in.TokenRef) && !secretRefRe.MatchString(in.TokenRef) {
		return Remote{}, false, molt.Invalid("token_ref", "token_ref must be env:NAME or secretsmanager:<name or ARN> (the token itself is never stored)")
	}
	if len(in.Aliases) > MaxAliases {
		return Remote{}, false, molt.Invalid("aliases", "at most %d aliases", MaxAliases)
	}
	for _, a := range in.Aliases {
		if Normalize(a) == "" || len(a) > MaxAliasLen {
			return Remote{}, false, molt.Invalid("aliases", "an alias is 1-%d characters with a letter or digit", MaxAliasLen)
		}
	}
	for try := 0; try < 3; try++ {
		reg, err := s.Registry(ctx, ws)
		if err != nil {
			return Remote{}, false, err
		}
		others := Registry{}
		for _, t := range reg.Targets {
			if !(t.Kind == KindRemote && t.Name == name) {
				others.Targets = append(others.Targets, t)
			}
		}
		others.Targets = append(others.Targets, Target{Name: name, Kind: KindRemote, Aliases: in.Aliases, Registered: true})
		if err := others.Validate(); err != nil {
			return Remote{}, false, molt.Conflict(CodeAliasCollision, "%v", err)
		}
		now := s.Protocol.Clock.Now().UTC()
		r := Remote{Workspace: ws, Name: name, CardURL: in.CardURL, TokenRef: in.TokenRef, Aliases: in.Aliases,
			CreatedAt: now, UpdatedAt: now}
		if r.Aliases == nil {
			r.Aliases = []string{}
		}
		cur, old, err := s.getRemote(ctx, ws, name)
		switch {
		case molt.ErrorCode(err) == molt.ENOTFOUND:
			data, _ := json.Marshal(r)
			_, err = s.Protocol.Create(ctx, work.Item{Kind: KindRemoteAgent, ID: remoteID(ws, name), Workspace: ws,
				Status: StatusRegistered, Data: data})
			if molt.ErrorReason(err) == work.ReasonExists {
				continue // registered meanwhile: read it again
			}
			if err != nil {
				return Remote{}, false, fmt.Errorf("register remote agent %s: %w", name, err)
			}
			return r, true, nil
		case err != nil:
			return Remote{}, false, err
		}
		r.CreatedAt = old.CreatedAt
		data, _ := json.Marshal(r)
		_, err = s.Protocol.UpdateSeen(ctx, cur, work.Edit{Data: data})
		if molt.ErrorCode(err) == molt.ECONFLICT || molt.ErrorCode(err) == molt.ENOTFOUND {
			continue
		}
		if err != nil {
			return Remote{}, false, fmt.Errorf("update remote agent %s: %w", name, err)
		}
		return r, false, nil
	}
	return Remote{}, false, molt.Conflict("changed", "remote agent %s kept changing; try again", name)
}

// DeleteRemote removes remote name of ws.
func (s *Service) DeleteRemote(ctx context.Context, c Caller, ws, name string) error {
	if err := s.full(ctx, c, ws); err != nil {
		return err
	}
	it, _, err := s.getRemote(ctx, ws, name)
	if err != nil {
		return err
	}
	if err := s.Protocol.DeleteSeen(ctx, it); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return notFoundRemote(name)
		}
		return fmt.Errorf("delete remote agent %s: %w", name, err)
	}
	return nil
}

// MaxResolveText bounds the text Resolve reads through the service.
const MaxResolveText = 64 << 10

// Resolve resolves text against ws's live registry without dispatching (any
// caller that may read the workspace).
func (s *Service) Resolve(ctx context.Context, c Caller, ws, text string) (Resolution, error) {
	if err := s.readable(ctx, c, ws); err != nil {
		return Resolution{}, err
	}
	if len(text) > MaxResolveText {
		return Resolution{}, &molt.Error{Code: molt.ETOOLARGE, Field: "text", Message: fmt.Sprintf("text over %d bytes", MaxResolveText)}
	}
	reg, err := s.Registry(ctx, ws)
	if err != nil {
		return Resolution{}, err
	}
	return Resolve(text, reg), nil
}
