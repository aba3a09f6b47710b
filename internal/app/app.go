package app

import (
	"context"
	"errors"
	"github.com/molt-dev/molt/internal/a2a"
	"log/slog"
	"net/http"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/buildinfo"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/naming"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/search"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/supervisor/offlinesup"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// App is molt's wired-up dependencies. Build it once per process (outside a
// Lambda handler) with New — localbackend.NewApp and awsbackend.NewApp build the
// adapters first; Close releases what they opened.
type App struct {
	Config   Config
	Store    store.Store
	Blobs    blob.Store
	Queue    queue.Sender
	Clock    molt.Clock
	IDs      molt.IDs
	Logger   *slog.Logger
	Protocol *work.Protocol
	Model    model.Model
	// Chat is the agent runtime: sessions, posting, the turn worker.
	Chat *chat.Service
	// Runs is the evolution run pipeline: /evo and pre-compact enqueue, the run
	// worker, the admin operations.
	Runs *runs.Service
	// Applies runs evolution applies: the apply worker, rollback, the auto-apply
	// notices and retention.
	Applies *applies.Service
	// Delegate is the delegation registry and resolver (internal/delegate).
	Delegate *delegate.Service
	// Naming names sessions in the background after their replies.
	Naming *naming.Service
	// Supervisor watches and steers campaigns on remote A2A agents (the API's
	// campaign routes, the campaign worker).
	Supervisor *supervisor.Service
	// Tokens creates, lists and revokes tokens (`molt token`, /api/tokens).
	Tokens *auth.Tokens
	// Search is the web search chain behind web_search and GET /api/search;
	// Fetch reads public documents for web_fetch.
	Search *search.Client
	Fetch  *search.Fetcher

	// Local backend: the in-process queues workers receive from.
	Local *memqueue.Queues
	// receivers opens the other backends' queues (see Deps.Receivers).
	receivers func(kind string) (queue.Receiver, error)

	workers []Worker
	closers []func() error
}

// Worker is a kind of background work: its policy (from settings) and its
// wake-up handler. Features add theirs to registry; New builds them.
type Worker struct {
	Kind    work.Kind
	Policy  func(settings.Settings) work.Policy
	Handler queue.Handler
}

// Deps are the adapters an App runs on, built by internal/localbackend or
// internal/awsbackend (separate packages, so a Lambda binary links no SQLite).
type Deps struct {
	Store store.Store
	Blobs blob.Store
	Queue queue.Sender
	Local *memqueue.Queues // local backend: the queues workers receive from
	// Receivers opens the receiving end of a kind's queue when Local is nil (the
	// aws backend: its SQS queue), for the workers of `molt serve`; nil when
	// nothing receives in process (a Lambda function gets its messages as
	// events).
	Receivers func(kind string) (queue.Receiver, error)
	Close     func() error // releases what the backend opened; may be nil
	Clock     molt.Clock   // nil: the system clock
	IDs       molt.IDs     // nil: sortable ids on Clock
	// Model answers chat turns and evolution agents; nil: the offline development
	// model with its evolution answers (offlineevo). Both backends
	// build it from MOLT_MODEL (internal/app/modelenv).
	Model model.Model
	// Models returns the model a naming.model setting names (the backends build
	// it as MOLT_MODEL would); nil: naming.model is ignored.
	Models func(name string) (model.Model, error)
	// RemoteToken reads the token a campaign's token_ref names (supervisor.
	// Deps.Token); nil: env:NAME only (delegate.EnvToken). The schemes it
	// reads are Config.Supervisor.TokenSchemes.
	RemoteToken func(ctx context.Context, ref string) (string, error)
	// RemoteHTTP calls the supervisor's remote agents; nil: a plain client (molt
	// serve, where a loopback remote is the normal case). The aws backend's
	// Lambda functions pass one whose dials refuse non-public addresses
	// (search.GuardedTransport).
	RemoteHTTP *http.Client
}

// New wires an App on deps.
func New(cfg Config, d Deps, logger *slog.Logger) *App {
	if logger == nil {
		logger = slog.Default()
	}
	var clock molt.Clock = molt.SystemClock{}
	if d.Clock != nil {
		clock = d.Clock
	}
	var ids molt.IDs = &molt.SortableIDs{Clock: clock}
	if d.IDs != nil {
		ids = d.IDs
	}
	a := &App{Config: cfg, Clock: clock, IDs: ids, Logger: logger,
		Store: d.Store, Blobs: d.Blobs, Queue: d.Queue, Local: d.Local, receivers: d.Receivers}
	if d.Close != nil {
		a.closers = append(a.closers, d.Close)
	}
	a.Protocol = &work.Protocol{Backend: a.Store, Clock: clock, IDs: ids}
	a.Model = d.Model
	if a.Model == nil {
		a.Model = offline.New(append(offlineevo.Handlers(), offlinesup.Handlers()...)...)
	}
	a.Chat = chat.New(chat.Deps{Store: a.Store, Protocol: a.Protocol, Queue: a.Queue, Model: a.Model,
		Clock: clock, IDs: ids, Logger: logger}, cfg.Chat)
	a.Runs = runs.New(runs.Deps{Store: a.Store, Protocol: a.Protocol, Blobs: a.Blobs, Queue: a.Queue, Model: a.Model,
		Clock: clock, IDs: ids, Logger: logger}, cfg.Runs)
	a.Runs.Register(a.Chat)
	a.Search = search.New(cfg.Search, logger)
	a.Fetch = search.NewFetcher(cfg.Search, logger, search.FetchOptions{})
	a.closers = append(a.closers, func() error { a.Search.Close(); a.Fetch.Close(); return nil })
	for _, t := range webTools(a.Search, a.Fetch) {
		_ = a.Chat.Tools().Register(t)
	}
	a.Applies = applies.New(applies.Deps{Store: a.Store, Blobs: a.Blobs, Queue: a.Queue, Protocol: a.Protocol,
		Model: a.Model, Clock: clock, IDs: ids, Logger: logger}, cfg.Applies)
	a.Delegate = &delegate.Service{Store: a.Store, Protocol: a.Protocol,
		Surfaces: &workspace.Surfaces{Store: a.Store, Builtin: chat.Builtin()}}
	a.Naming = naming.New(naming.Deps{Store: a.Store, Protocol: a.Protocol, Queue: a.Queue, Model: a.Model,
		Models: d.Models, Clock: clock, Logger: logger}, cfg.Naming)
	a.Chat.HandleReplied(a.Naming.Replied)
	a.Chat.GateTools(a2a.ToolGate(a.Store))
	a.Chat.GuardPosts(a2a.PostGuard(a.Store))
	a.Tokens = &auth.Tokens{Store: a.Store, Workspaces: a.Store, Clock: clock}
	a.Supervisor = supervisor.New(supervisor.Deps{Store: a.Store, Protocol: a.Protocol, Queue: a.Queue,
		Model: a.Model, HTTP: d.RemoteHTTP, Token: d.RemoteToken, Clock: clock, IDs: ids, Logger: logger}, cfg.Supervisor)
	for _, r := range registry {
		if w := r.build(a); w.Handler != nil {
			a.workers = append(a.workers, w)
		}
	}
	return a
}

// Close releases the store.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	return errors.Join(errs...)
}

// Workers returns the registered kinds of background work.
func (a *App) Workers() []Worker { return a.workers }

// HTTPHandler returns the UI API.
func (a *App) HTTPHandler() http.Handler {
	return httpapi.New(httpapi.Config{Store: a.Store, Clock: a.Clock, Logger: a.Logger,
		Version: buildinfo.Version, SHA: buildinfo.SHA, Chat: a.Chat, Runs: a.Runs, Applies: a.Applies,
		Delegate: a.Delegate, A2A: a.A2A(a.Config.Backend != BackendAWS), Naming: a.Naming,
		Supervisor: a.Supervisor, Tokens: a.Tokens, RequestTimeout: a.Config.RequestTimeout,
		Checks: []httpapi.Check{{Name: "queue", Run: a.pingQueue}}, Search: a.Search})
}

// A2AStreamHandler returns what the streaming function URL serves (functions/
// a2a-stream, RESPONSE_STREAM mode): /health and the A2A routes, streaming.
func (a *App) A2AStreamHandler() http.Handler {
	return httpapi.New(httpapi.Config{Store: a.Store, Clock: a.Clock, Logger: a.Logger,
		Version: buildinfo.Version, SHA: buildinfo.SHA, A2A: a.A2A(true), A2AOnly: true})
}

// A2A returns the A2A endpoint; streaming says whether the server in front
// of it passes SSE through (molt serve, a function URL; not API Gateway).
func (a *App) A2A(streaming bool) *a2a.Handler {
	return a2a.New(a2a.Config{Store: a.Store, Chat: a.Chat, Protocol: a.Protocol, Clock: a.Clock, Logger: a.Logger,
		BlockWait: a.Config.A2AWait, Streaming: streaming, StreamURL: a.Config.A2AStreamURL})
}

// pingQueue checks that the wake-up queues answer: on SQS one cheap read of each
// queue's attributes; in process there is nothing to reach.
func (a *App) pingQueue(ctx context.Context) error {
	if p, ok := a.Queue.(interface{ Ping(context.Context) error }); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Maintainer returns the tick's maintenance pass over every registered kind, with
// policies read from the settings at each pass.
func (a *App) Maintainer() *work.Maintainer {
	return &work.Maintainer{Protocol: a.Protocol, Queue: a.Queue, Logger: a.Logger,
		Policies: func(ctx context.Context) ([]work.Policy, error) {
			s, err := a.Store.GetSettings(ctx)
			if err != nil {
				return nil, err
			}
			pols := make([]work.Policy, 0, len(a.workers)+1)
			for _, w := range a.workers {
				pols = append(pols, w.Policy(s))
			}
			// Kinds without a queue: a rollback holds the apply lock of its
			// workspace; when its request died the tick releases it.
			pols = append(pols, a.Applies.RollbackPolicy(s))
			return pols, nil
		}}
}

// TickResult is what one tick did: counts only (a flat JSON object of numbers).
type TickResult struct {
	work.Result
	Notified int `json:"notified"` // auto-apply notices sent (or stamped: session gone)
	Archived int `json:"archived"` // runs and applies archived by retention
	Purged   int `json:"purged"`   // archived runs and applies purged
}

// Tick runs one tick: m's maintenance pass over every kind (stale claims, lost
// wake-ups, resumes; m is App.Maintainer, built once per ticker), then the
// auto-apply notices, then retention (at most once per
// applies.Config.RetentionEvery in this process). Every step is safe to run in
// two ticks at once. A failed step does not stop the next; the errors are
// returned joined.
func (a *App) Tick(ctx context.Context, m *work.Maintainer) (TickResult, error) {
	var res TickResult
	var errs []error
	r, err := m.RunOnce(ctx)
	res.Result = r
	if err != nil {
		errs = append(errs, err)
	}
	n, err := a.Applies.Notify(ctx)
	res.Notified = n.Sent + n.Stamped
	if err != nil {
		errs = append(errs, err)
	}
	ret, err := a.Applies.Retain(ctx)
	res.Archived, res.Purged = ret.Archived, ret.Purged
	if err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// Kinds lists the kinds of background work molt registers, i.e. the queues
// `molt bootstrap` creates (local-only kinds left out).
func Kinds() []string {
	var ks []string
	for _, w := range registry {
		if !w.local {
			ks = append(ks, string(w.kind))
		}
	}
	return ks
}

// registry lists the kinds of work features register: each entry builds its
// worker from the app. Features add themselves here as they land.
// A local kind runs in `molt serve` only (no queue, no function yet); its
// build returns a Worker without a Handler elsewhere, which New leaves out.
// Every other kind has a queue and a function on AWS: functions/<kind>-worker
// (one line, awsbackend.MustWorker), and in template.yaml a <Kind>Queue with
// its dead-letter queue and alarm, MOLT_QUEUE_<KIND> and a
// <Kind>WorkerFunction; internal/deploytest fails until they are there.
var registry = []struct {
	kind  work.Kind
	local bool
	build func(a *App) Worker
}{
	{kind: work.KindTurn, build: func(a *App) Worker {
		return Worker{Kind: work.KindTurn, Handler: a.Chat,
			Policy: func(settings.Settings) work.Policy { return a.Chat.Policy() }}
	}},
	{kind: work.KindRun, build: func(a *App) Worker {
		return Worker{Kind: work.KindRun, Handler: a.Runs, Policy: runs.Policy}
	}},
	{kind: work.KindApply, build: func(a *App) Worker {
		return Worker{Kind: work.KindApply, Handler: a.Applies, Policy: a.Applies.Policy}
	}},
	{kind: work.KindNaming, build: func(a *App) Worker {
		return Worker{Kind: work.KindNaming, Handler: a.Naming,
			Policy: func(settings.Settings) work.Policy { return a.Naming.Policy() }}
	}},
	{kind: supervisor.KindCampaign, build: func(a *App) Worker {
		return Worker{Kind: supervisor.KindCampaign, Handler: a.Supervisor,
			Policy: func(settings.Settings) work.Policy { return a.Supervisor.Policy() }}
	}},
	{kind: supervisor.KindDecision, build: func(a *App) Worker {
		return Worker{Kind: supervisor.KindDecision, Handler: a.Supervisor.Decider(),
			Policy: func(settings.Settings) work.Policy { return a.Supervisor.Decider().Policy() }}
	}},
}
