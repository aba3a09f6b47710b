package runs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Store is what runs need of the state port (store.Store has it all).
type Store interface {
	work.Reader
	session.Store
	settings.Store
	workspace.SurfaceStore
	// GetWorkspace returns ENOTFOUND when absent.
	GetWorkspace(ctx context.Context, name string) (workspace.Workspace, error)
}

// Deps are the service's dependencies. Store, Protocol, Blobs, Queue and Model
// are required.
type Deps struct {
	Store    Store
	Protocol *work.Protocol // on Store
	Blobs    blob.Store
	Queue    queue.Sender // wake-ups of runs (work.KindRun) and applies (work.KindApply)
	Model    model.Model
	Clock    molt.Clock
	IDs      molt.IDs
	Logger   *slog.Logger
}

// Config tunes the worker. Zero fields take the defaults.
type Config struct {
	// ModelTimeout bounds each model call (default 4 minutes).
	ModelTimeout time.Duration
	// CommitMargin is kept free before the handler's deadline (a Lambda's) for
	// the final write: the attempt is cut that long before it (default 15 s).
	CommitMargin time.Duration
	// HeartbeatEvery overrides evolution.heartbeat_seconds (tests set it long so
	// that only an injected clock moves heartbeats).
	HeartbeatEvery time.Duration
	// MaxTranscript bounds the transcript bytes sent to the agents; older
	// messages are left out first (default 200 KiB).
	MaxTranscript int
	// DryRunMaxTokens bounds the dry-run's reply when agent.yaml does not
	// (default 4096).
	DryRunMaxTokens int
}

func (c Config) withDefaults() Config {
	if c.ModelTimeout <= 0 {
		c.ModelTimeout = 4 * time.Minute
	}
	if c.CommitMargin <= 0 {
		c.CommitMargin = 15 * time.Second
	}
	if c.MaxTranscript <= 0 {
		c.MaxTranscript = 200 << 10
	}
	if c.DryRunMaxTokens <= 0 {
		c.DryRunMaxTokens = 4096
	}
	return c
}

// Service enqueues runs, runs them (Handle, the worker) and administers them.
// It holds no state beyond its configuration: every fact lives in the store and
// the blob store.
type Service struct {
	store Store
	proto *work.Protocol
	blobs blob.Store
	queue queue.Sender
	model model.Model
	clock molt.Clock
	ids   molt.IDs
	log   *slog.Logger
	cfg   Config
	exec  *work.Executor[settings.Settings] // the run kind's lifecycle (Handle)

	surfaces *workspace.Surfaces
}

var _ queue.Handler = (*Service)(nil)

// New returns a Service.
func New(d Deps, cfg Config) *Service {
	s := &Service{store: d.Store, proto: d.Protocol, blobs: d.Blobs, queue: d.Queue, model: d.Model,
		clock: d.Clock, ids: d.IDs, log: d.Logger, cfg: cfg.withDefaults(),
		surfaces: &workspace.Surfaces{Store: d.Store, Builtin: chat.Builtin()}}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	if s.ids == nil {
		s.ids = &molt.SortableIDs{Clock: s.clock}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.exec = s.executor()
	return s
}

// Register registers the /evo command and the pre-compact trigger on the chat
// runtime.
func (s *Service) Register(c *chat.Service) {
	c.HandleCommand(EvoCommand, s.Evo)
	c.HandleCompacted(s.PreCompact)
}

// Policy is the run kind's claim policy for the tick, from the settings: budget
// max_concurrent_run, a claim stale after run_timeout_minutes without a
// heartbeat, max_attempts per round, and timeout once they are spent.
func Policy(st settings.Settings) work.Policy {
	e := st.Evolution
	return work.Policy{Kind: work.KindRun, Budget: e.MaxConcurrentRun,
		Timeout:     time.Duration(e.RunTimeoutMinutes) * time.Minute,
		MaxAttempts: e.MaxAttempts, Expired: StatusTimeout}
}

// get reads a run; ENOTFOUND (never revealing why) for a malformed id.
func (s *Service) get(ctx context.Context, id string) (work.Item, Data, error) {
	if work.ValidateKey(work.KindRun, id) != nil {
		return work.Item{}, Data{}, molt.NotFound("run %s not found", id)
	}
	it, err := s.store.GetItem(ctx, work.KindRun, id)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return work.Item{}, Data{}, molt.NotFound("run %s not found", id)
		}
		return work.Item{}, Data{}, fmt.Errorf("get run %s: %w", id, err)
	}
	d, err := ParseData(it.Data)
	if err != nil {
		return work.Item{}, Data{}, fmt.Errorf("run %s: %w", id, err)
	}
	return it, d, nil
}

// wake sends a wake-up. A failed send only delays the work until the tick
// re-sends wake-ups of pending work.
func (s *Service) wake(ctx context.Context, kind work.Kind, id string) {
	if err := s.queue.Send(ctx, queue.Message{Kind: string(kind), ID: id}); err != nil {
		s.log.WarnContext(ctx, "wake-up not sent; the tick will re-send it", slog.String("kind", string(kind)),
			slog.String("id", id), slog.String("error", err.Error()))
	}
}

// surface reads the global and workspace files and the effective surface
// (built-in, global, workspace) in one store request.
func (s *Service) surface(ctx context.Context, ws string) (global, own []workspace.File, eff []workspace.EffectiveFile, err error) {
	sf, err := s.surfaces.Read(ctx, ws)
	if err != nil {
		return nil, nil, nil, err
	}
	return sf.Global, sf.Own, sf.Effective(), nil
}

// loadMessages reads every message of a session in seq order.
func (s *Service) loadMessages(ctx context.Context, id string) ([]session.Message, error) {
	const pageSize = 500
	var out []session.Message
	after := 0
	for {
		page, err := s.store.ListMessages(ctx, id, after, pageSize)
		if err != nil {
			return nil, fmt.Errorf("list messages of session %s: %w", id, err)
		}
		out = append(out, page...)
		if len(page) < pageSize {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

func levelAtLeast(level, min string) bool {
	rank := map[string]int{settings.L0: 0, settings.L1: 1, settings.L2: 2, settings.L3: 3}
	l, ok := rank[level]
	return ok && l >= rank[min]
}
