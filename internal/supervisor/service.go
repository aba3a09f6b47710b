package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Store is what the supervisor reads (store.Store has it all).
type Store interface {
	work.Reader
	workspace.SurfaceStore // a workspace supervising agent's prompt
	GetWorkspace(ctx context.Context, name string) (workspace.Workspace, error)
}

// Deps are the service's dependencies.
type Deps struct {
	Store    Store
	Protocol *work.Protocol // on Store
	Queue    queue.Sender
	// HTTP calls the remotes (default: a client with a 30 s timeout; each call
	// is bounded by Config.CallTimeout too).
	HTTP *http.Client
	// Token reads the token a token_ref names (default delegate.EnvToken).
	// The token is used for the pass and never stored, logged or returned.
	Token func(ctx context.Context, ref string) (string, error)
	// Model answers the decisions' supervising agent and reviewer (default:
	// the offline model without handlers, whose answers are no proposals: every
	// decision escalates).
	Model  model.Model
	Clock  molt.Clock
	IDs    molt.IDs
	Logger *slog.Logger
}

// Config tunes the supervisor. Zero fields take the defaults.
type Config struct {
	// Deployment names this molt: the default controller is molt-<Deployment>
	// (default "local").
	Deployment string
	// Tick is the tick's interval: a heartbeat rounds up to it (default 10 s).
	Tick time.Duration
	// CallTimeout bounds one remote call (default 10 s); a call that runs out
	// has an unknown outcome.
	CallTimeout time.Duration
	// MaxCalls bounds the remote calls of one pass (default 8).
	MaxCalls int
	// CardEvery is how often the card is read again (default 10 minutes; at
	// once after the remote was unreachable).
	CardEvery time.Duration
	// Budget is how many passes run at once (default 8).
	Budget int
	// DecisionBudget is how many decisions run at once (default 4);
	// ModelTimeout bounds one of their model calls (default 60 s).
	DecisionBudget int
	ModelTimeout   time.Duration
	// RelayWait is how long a decision's final write waits for a pass that
	// holds its campaign before it gives the decision back, uncounted, for
	// the tick to wake again (default 2 s).
	RelayWait time.Duration
	// TokenSchemes are the token_ref schemes Deps.Token resolves on this
	// deployment (default: env, molt serve's). A campaign naming another is
	// refused at creation (EINVALID, field remote.token_ref).
	TokenSchemes []string
	// SecretPrefix, when set, is the prefix every secretsmanager: secret name
	// must start with: the one the deployment's IAM grant covers
	// (MOLT_REMOTE_SECRET_PREFIX on AWS).
	SecretPrefix string
}

func (c Config) withDefaults() Config {
	if c.Deployment == "" {
		c.Deployment = "local"
	}
	if c.Tick <= 0 {
		c.Tick = 10 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 10 * time.Second
	}
	if c.MaxCalls <= 0 {
		c.MaxCalls = 8
	}
	if c.CardEvery <= 0 {
		c.CardEvery = 10 * time.Minute
	}
	if c.Budget <= 0 {
		c.Budget = 8
	}
	if c.DecisionBudget <= 0 {
		c.DecisionBudget = 4
	}
	if c.ModelTimeout <= 0 {
		c.ModelTimeout = 60 * time.Second
	}
	if c.RelayWait <= 0 {
		c.RelayWait = 2 * time.Second
	}
	if len(c.TokenSchemes) == 0 {
		c.TokenSchemes = []string{SchemeEnv}
	}
	return c
}

// Defaults and bounds of a campaign.
const (
	DefaultLease     = 600
	DefaultHeartbeat = 120
	DefaultAttempts  = 3
	MaxAttempts      = 20
	MaxLease         = 86400
	MaxMission       = 8000
	// DefaultModelBudget is a campaign's model calls for its decisions (a
	// decision makes one to four); MaxModelBudget bounds model_budget.
	DefaultModelBudget = 60
	MaxModelBudget     = 1000
)

// Service manages campaigns (the API) and runs their passes (Handle, the
// campaign worker). It keeps no state of its own.
type Service struct {
	store   Store
	proto   *work.Protocol
	model   model.Model
	decider *Decider
	queue   queue.Sender
	http    *http.Client
	token   func(context.Context, string) (string, error)
	clock   molt.Clock
	ids     molt.IDs
	log     *slog.Logger
	cfg     Config
	exec    *work.Executor[struct{}]
}

var _ queue.Handler = (*Service)(nil)

// New returns a Service; Store, Protocol and Queue are required.
func New(d Deps, cfg Config) *Service {
	s := &Service{store: d.Store, proto: d.Protocol, queue: d.Queue, http: d.HTTP, token: d.Token,
		model: d.Model, clock: d.Clock, ids: d.IDs, log: d.Logger, cfg: cfg.withDefaults()}
	if s.model == nil {
		s.model = offline.New()
	}
	if s.http == nil {
		s.http = &http.Client{Timeout: 30 * time.Second}
	}
	if s.token == nil {
		s.token = delegate.EnvToken
	}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	if s.ids == nil {
		s.ids = &molt.SortableIDs{Clock: s.clock}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.exec = &work.Executor[struct{}]{Protocol: s.proto, Queue: s.queue, Logger: s.log, Kind: KindCampaign,
		Policy:  func(context.Context) (work.Policy, struct{}, error) { return s.Policy(), struct{}{}, nil },
		Prepare: s.prepare, Next: func(context.Context, work.Item, work.Policy) ([]string, error) { return nil, nil }}
	s.decider = newDecider(s)
	return s
}

// Input is the body of POST /api/campaigns.
type Input struct {
	Name             string `json:"name"`
	Workspace        string `json:"workspace"`
	Remote           Remote `json:"remote"`
	Mission          string `json:"mission"`
	Controller       string `json:"controller,omitempty"`
	LeaseSeconds     int    `json:"lease_seconds,omitempty"`
	HeartbeatSeconds int    `json:"heartbeat_seconds,omitempty"`
	MaxAttempts      int    `json:"max_attempts,omitempty"`
	// Supervisor names a workspace agent that proposes the decisions (default
	// the built-in __supervisor__); ModelBudget bounds their model calls.
	Supervisor  string `json:"supervisor,omitempty"`
	ModelBudget int    `json:"model_budget,omitempty"`
}

var (
	nameRe       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 _.:-]{0,99}$`)
	controllerRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$`)
	envRefRe     = regexp.MustCompile(`^env:[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	smNameRe     = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)
	smARNRe      = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]{1,32}:[0-9]{12}:secret:([A-Za-z0-9/_+=.@-]{1,512})$`)
)

// The token_ref schemes (Config.TokenSchemes).
const (
	SchemeEnv            = "env"            // env:NAME, the process environment (molt serve)
	SchemeSecretsManager = "secretsmanager" // secretsmanager:<secret name or ARN> (AWS)
)

// validateTokenRef checks a token_ref's scheme against the deployment's and
// its syntax: env:NAME, or secretsmanager: with a secret name (under
// SecretPrefix when set) or a Secrets Manager secret ARN.
func (s *Service) validateTokenRef(ref string) error {
	const field = "remote.token_ref"
	scheme, rest, ok := strings.Cut(ref, ":")
	if !ok || rest == "" {
		return molt.Invalid(field, "remote.token_ref must name where the token lives: %s", s.refForms())
	}
	if !slices.Contains(s.cfg.TokenSchemes, scheme) {
		return molt.Invalid(field, "remote.token_ref scheme %q is not available on this deployment: use %s", scheme, s.refForms())
	}
	switch scheme {
	case SchemeEnv:
		if !envRefRe.MatchString(ref) {
			return molt.Invalid(field, "remote.token_ref env:NAME needs a variable name (letters, digits, _)")
		}
	case SchemeSecretsManager:
		name := rest
		if m := smARNRe.FindStringSubmatch(rest); m != nil {
			name = m[1]
		} else if strings.HasPrefix(rest, "arn:") || !smNameRe.MatchString(rest) {
			return molt.Invalid(field, "remote.token_ref secretsmanager: needs a secret name (letters, digits, /_+=.@-, at most 512) or a secret ARN")
		}
		if p := s.cfg.SecretPrefix; p != "" && !strings.HasPrefix(name, p) {
			return molt.Invalid(field, "remote.token_ref: this deployment reads only secrets whose name starts with %q", p)
		}
	}
	return nil
}

func (s *Service) refForms() string {
	var forms []string
	for _, sc := range s.cfg.TokenSchemes {
		switch sc {
		case SchemeEnv:
			forms = append(forms, "env:NAME")
		case SchemeSecretsManager:
			f := "secretsmanager:<secret name or ARN>"
			if s.cfg.SecretPrefix != "" {
				f = "secretsmanager:" + s.cfg.SecretPrefix + "<name>"
			}
			forms = append(forms, f)
		}
	}
	return strings.Join(forms, " or ")
}

func (s *Service) validate(in *Input) error {
	if !nameRe.MatchString(in.Name) {
		return molt.Invalid("name", "name is required: letters, digits, spaces, _.:-, at most 100")
	}
	if in.Workspace == "" {
		return molt.Invalid("workspace", "workspace is required")
	}
	u, err := url.Parse(in.Remote.CardURL)
	if in.Remote.CardURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return molt.Invalid("remote.card_url", "remote.card_url must be an http(s) URL without credentials")
	}
	if err := s.validateTokenRef(in.Remote.TokenRef); err != nil {
		return err
	}
	if strings.TrimSpace(in.Mission) == "" || len(in.Mission) > MaxMission {
		return molt.Invalid("mission", "mission is required, at most %d bytes", MaxMission)
	}
	if in.Controller == "" {
		in.Controller = "molt-" + s.cfg.Deployment
	}
	if !controllerRe.MatchString(in.Controller) {
		return molt.Invalid("controller", "controller: letters, digits, _.:-, at most 100")
	}
	if in.LeaseSeconds == 0 {
		in.LeaseSeconds = DefaultLease
	}
	if in.LeaseSeconds < 1 || in.LeaseSeconds > MaxLease {
		return molt.Invalid("lease_seconds", "lease_seconds must be 1..%d", MaxLease)
	}
	if in.HeartbeatSeconds == 0 {
		in.HeartbeatSeconds = DefaultHeartbeat
	}
	if in.HeartbeatSeconds < 1 || in.HeartbeatSeconds > MaxLease {
		return molt.Invalid("heartbeat_seconds", "heartbeat_seconds must be 1..%d", MaxLease)
	}
	if in.MaxAttempts == 0 {
		in.MaxAttempts = DefaultAttempts
	}
	if in.MaxAttempts < 1 || in.MaxAttempts > MaxAttempts {
		return molt.Invalid("max_attempts", "max_attempts must be 1..%d", MaxAttempts)
	}
	if in.Supervisor == AgentSupervisor {
		in.Supervisor = ""
	}
	if in.Supervisor != "" && !controllerRe.MatchString(in.Supervisor) {
		return molt.Invalid("supervisor", "supervisor must name an agent of the workspace")
	}
	if in.ModelBudget == 0 {
		in.ModelBudget = DefaultModelBudget
	}
	if in.ModelBudget < 1 || in.ModelBudget > MaxModelBudget {
		return molt.Invalid("model_budget", "model_budget must be 1..%d", MaxModelBudget)
	}
	return nil
}

func full(c auth.Caller) error {
	if !c.IsFull() {
		return &molt.Error{Code: molt.EFORBIDDEN, Message: "campaigns need a full token"}
	}
	return nil
}

// Create stores a new campaign (an observer until claimed) and wakes its
// first pass. Errors: EFORBIDDEN (not a full token), EINVALID naming the
// field, ENOTFOUND for an unknown workspace (field workspace).
func (s *Service) Create(ctx context.Context, c auth.Caller, in Input) (Campaign, error) {
	if err := full(c); err != nil {
		return Campaign{}, err
	}
	if err := s.validate(&in); err != nil {
		return Campaign{}, err
	}
	if _, err := s.store.GetWorkspace(ctx, in.Workspace); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return Campaign{}, molt.Invalid("workspace", "workspace %s does not exist", in.Workspace)
		}
		return Campaign{}, err
	}
	if in.Supervisor != "" {
		if err := s.checkAgent(ctx, in.Workspace, in.Supervisor); err != nil {
			return Campaign{}, err
		}
	}
	now := s.clock.Now().UTC()
	cp := Campaign{Name: in.Name, Workspace: in.Workspace, Remote: in.Remote, Mission: in.Mission,
		Controller: in.Controller, LeaseSeconds: in.LeaseSeconds, HeartbeatSeconds: in.HeartbeatSeconds,
		MaxAttempts: in.MaxAttempts, Mode: ModeObserver, State: StateNew, CreatedAt: now,
		Supervisor: in.Supervisor, ModelBudget: in.ModelBudget}
	it, err := s.proto.Create(ctx, work.Item{Kind: KindCampaign, ID: s.ids.NewID(), Workspace: in.Workspace, Data: cp.encode()})
	if err != nil {
		return Campaign{}, fmt.Errorf("create campaign: %w", err)
	}
	s.wake(ctx, it.ID)
	return parse(it)
}

// checkAgent returns EINVALID (field supervisor) unless agent is on the
// effective surface of ws.
func (s *Service) checkAgent(ctx context.Context, ws, agent string) error {
	sf, err := (&workspace.Surfaces{Store: s.store, Builtin: chat.Builtin()}).Read(ctx, ws)
	if err != nil {
		return err
	}
	for _, f := range sf.Effective() {
		if strings.HasPrefix(f.Path, "agents/"+agent+"/") {
			return nil
		}
	}
	return molt.Invalid("supervisor", "agent %q is not on the surface of workspace %s", agent, ws)
}

// Get returns campaign id. Errors: EFORBIDDEN, ENOTFOUND.
func (s *Service) Get(ctx context.Context, c auth.Caller, id string) (Campaign, error) {
	if err := full(c); err != nil {
		return Campaign{}, err
	}
	_, cp, err := s.read(ctx, id)
	return cp, err
}

func (s *Service) read(ctx context.Context, id string) (work.Item, Campaign, error) {
	if work.ValidateKey(KindCampaign, id) != nil {
		return work.Item{}, Campaign{}, molt.NotFound("campaign %s not found", id)
	}
	it, err := s.store.GetItem(ctx, KindCampaign, id)
	if err != nil {
		return work.Item{}, Campaign{}, err
	}
	cp, err := parse(it)
	return it, cp, err
}

// List returns the campaigns, newest first (at most 100).
func (s *Service) List(ctx context.Context, c auth.Caller) ([]Campaign, error) {
	if err := full(c); err != nil {
		return nil, err
	}
	pg, err := s.store.ListItems(ctx, work.ListQuery{Kind: KindCampaign})
	if err != nil {
		return nil, err
	}
	out := []Campaign{}
	for _, it := range pg.Items {
		if cp, err := parse(it); err == nil {
			out = append(out, cp)
		}
	}
	return out, nil
}

// Events returns campaign id's events after seq after (at most limit, in
// order). Errors: EFORBIDDEN, ENOTFOUND.
func (s *Service) Events(ctx context.Context, c auth.Caller, id string, after, limit int) ([]Event, error) {
	evs, _, err := s.EventPage(ctx, c, id, after, limit)
	return evs, err
}

// EventPage is Events with where the next page starts: it reads the events
// with seq in (after, after+limit], in one round trip where the store reads
// batches (work.BatchReader), and returns those that have not expired, in
// order, and next, the after of the next page (0 when there is none). So a
// page costs at most limit reads however many expired events precede it.
func (s *Service) EventPage(ctx context.Context, c auth.Caller, id string, after, limit int) ([]Event, int, error) {
	cp, err := s.Get(ctx, c, id)
	if err != nil {
		return nil, 0, err
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	after = max(after, 0)
	last := min(after+limit, cp.Events)
	var ids []string
	for seq := after + 1; seq <= last; seq++ {
		ids = append(ids, EventID(id, seq))
	}
	items, errs := s.readEvents(ctx, ids)
	out := []Event{}
	for k, it := range items {
		if molt.ErrorCode(errs[k]) == molt.ENOTFOUND {
			continue // expired
		}
		if errs[k] != nil {
			return nil, 0, errs[k]
		}
		if ev, err := parseEvent(it); err == nil {
			out = append(out, ev)
		}
	}
	next := 0
	if last < cp.Events {
		next = last
	}
	return out, next, nil
}

// readEvents reads the event items ids: one round trip where the store
// reads batches, one read each otherwise.
func (s *Service) readEvents(ctx context.Context, ids []string) ([]work.Item, []error) {
	if br, ok := s.store.(work.BatchReader); ok && len(ids) > 0 {
		return br.GetItems(ctx, KindEvent, ids)
	}
	items, errs := make([]work.Item, len(ids)), make([]error, len(ids))
	for k, eid := range ids {
		items[k], errs[k] = s.store.GetItem(ctx, KindEvent, eid)
	}
	return items, errs
}

// Control asks for a claim or a release, carried out by the next pass (the
// pass wakes at once). Errors: EFORBIDDEN, ENOTFOUND, EINVALID (field
// action), ECONFLICT with ReasonControlUnsupported (the remote cannot be
// controlled: the message names what its card lacks), ReasonNotController
// (release of an observer), ReasonBusy.
func (s *Service) Control(ctx context.Context, c auth.Caller, id, action string) (Campaign, error) {
	if err := full(c); err != nil {
		return Campaign{}, err
	}
	if action != ActionClaim && action != ActionRelease {
		if _, _, err := s.read(ctx, id); err != nil {
			return Campaign{}, err
		}
		return Campaign{}, molt.Invalid("action", `action must be "claim" or "release"`)
	}
	return s.ask(ctx, id, Request{Action: action})
}

// Submit asks for text to be sent as the campaign's next attempt (non
// blocking: the next pass sends it). Errors as Control's, and EINVALID
// (field text), ECONFLICT with ReasonAttemptsSpent.
func (s *Service) Submit(ctx context.Context, c auth.Caller, id, text string) (Campaign, error) {
	if err := full(c); err != nil {
		return Campaign{}, err
	}
	if strings.TrimSpace(text) == "" || len(text) > MaxMission {
		if _, _, err := s.read(ctx, id); err != nil {
			return Campaign{}, err
		}
		return Campaign{}, molt.Invalid("text", "text is required, at most %d bytes", MaxMission)
	}
	return s.ask(ctx, id, Request{Action: ActionSubmit, Text: text})
}

// Cancel asks for the campaign's running task to be canceled. Errors as
// Control's, and ECONFLICT with ReasonNoTask.
func (s *Service) Cancel(ctx context.Context, c auth.Caller, id string) (Campaign, error) {
	if err := full(c); err != nil {
		return Campaign{}, err
	}
	return s.ask(ctx, id, Request{Action: ActionCancel})
}

// refusal says why request r cannot be carried out for cp, or nil.
func refusal(cp Campaign, r Request) error {
	if cp.Capabilities == nil {
		return molt.Conflict(ReasonControlUnsupported, "the remote's capabilities are not discovered yet (its card was not read)")
	}
	if !cp.Capabilities.Control {
		return molt.Conflict(ReasonControlUnsupported, "the remote cannot be controlled: its card lacks %s",
			strings.Join(cp.Capabilities.Missing, ", "))
	}
	if r.Action != ActionClaim && cp.Mode != ModeController && !queued(cp, ActionClaim) {
		return molt.Conflict(ReasonNotController, "campaign %s is an observer: claim control first", cp.ID)
	}
	switch r.Action {
	case ActionSubmit:
		if cp.AttemptsUsed+count(cp, ActionSubmit) >= cp.MaxAttempts {
			return molt.Conflict(ReasonAttemptsSpent, "campaign %s used its %d attempts", cp.ID, cp.MaxAttempts)
		}
	case ActionCancel:
		if cp.TaskID == "" && !queued(cp, ActionSubmit) {
			return molt.Conflict(ReasonNoTask, "campaign %s has no task to cancel", cp.ID)
		}
	}
	return nil
}

func count(cp Campaign, action string) int {
	n := 0
	for _, r := range cp.Requests {
		if r.Action == action {
			n++
		}
	}
	return n
}

func queued(cp Campaign, action string) bool { return count(cp, action) > 0 }

// maxRequests bounds the actions waiting on one campaign.
const maxRequests = 10

// ask queues r on campaign id (a write conditional on the campaign as read,
// while no pass holds it) and wakes the campaign.
func (s *Service) ask(ctx context.Context, id string, r Request) (Campaign, error) {
	r.At = s.clock.Now().UTC()
	for try := 0; try < 50; try++ {
		it, cp, err := s.read(ctx, id)
		if err != nil {
			return Campaign{}, err
		}
		if err := refusal(cp, r); err != nil {
			return Campaign{}, err
		}
		if len(cp.Requests) >= maxRequests {
			return Campaign{}, molt.Conflict(ReasonBusy, "campaign %s has %d actions waiting", id, maxRequests)
		}
		if it.Active {
			// A pass holds it; passes are short (bounded calls).
			select {
			case <-ctx.Done():
				return Campaign{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		cp.Requests = append(cp.Requests, r)
		got, err := s.proto.UpdateSeen(ctx, it, work.Edit{Data: cp.encode()})
		if molt.ErrorCode(err) == molt.ECONFLICT {
			continue
		}
		if err != nil {
			return Campaign{}, fmt.Errorf("queue %s on campaign %s: %w", r.Action, id, err)
		}
		s.wake(ctx, id)
		it.Data, it.OpID, it.UpdatedAt = got.Data, got.OpID, got.UpdatedAt
		return parse(it)
	}
	return Campaign{}, molt.Conflict(ReasonBusy, "campaign %s stayed busy; try again", id)
}

// Delete deletes campaign id (not while a pass holds it: ReasonBusy). A
// campaign in controller mode with its lease unexpired is refused with
// ReasonReleaseFirst: authority is given up explicitly (control release),
// never dropped by forgetting it; once the local lease has run out, delete
// goes ahead. Its events expire.
func (s *Service) Delete(ctx context.Context, c auth.Caller, id string) error {
	if err := full(c); err != nil {
		return err
	}
	for try := 0; try < 50; try++ {
		it, cp, err := s.read(ctx, id)
		if err != nil {
			return err
		}
		if cp.Mode == ModeController && s.clock.Now().Before(cp.LeaseExpiresAt) {
			return molt.Conflict(ReasonReleaseFirst, "campaign %s holds the remote's lease until %s: release control first",
				id, cp.LeaseExpiresAt.Format(time.RFC3339))
		}
		if it.Active {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		err = s.proto.DeleteSeen(ctx, it)
		if molt.ErrorCode(err) == molt.ECONFLICT {
			continue
		}
		return err
	}
	return molt.Conflict(ReasonBusy, "campaign %s stayed busy; try again", id)
}

func (s *Service) wake(ctx context.Context, id string) {
	if err := s.queue.Send(ctx, queue.Message{Kind: string(KindCampaign), ID: id}); err != nil {
		s.log.WarnContext(ctx, "campaign wake-up not sent; the tick re-sends it", slog.String("campaign_id", id),
			slog.String("error", err.Error()))
	}
}

// Handle is the campaign worker (queue.Handler for KindCampaign wake-ups).
func (s *Service) Handle(ctx context.Context, m queue.Message) error { return s.exec.Handle(ctx, m) }

// HandleBatch handles wake-ups together (queue.BatchHandler): their claims in
// one store round trip, their final writes sharing one when ready together.
func (s *Service) HandleBatch(ctx context.Context, ms []queue.Message, rep queue.Report) {
	s.exec.HandleBatch(ctx, ms, rep)
}
