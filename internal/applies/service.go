package applies

import (
	"context"
	"errors"
	"fmt"
	"github.com/molt-dev/molt/internal/chat"
	"log/slog"
	"slices"
	"time"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// KindRollback is the kind of a rollback's own work item: created already
// claimed, holding the workspace's apply lock while it restores files (see the
// package documentation).
const KindRollback = evolution.KindRollback

// KindNotice is the kind of a pending auto-apply notice: created by the finalize
// of an auto apply, deleted in the write that sends its line.
const KindNotice = evolution.KindNotice

// Statuses of a rollback item.
const (
	rollbackDone   = evolution.RollbackDone
	rollbackFailed = evolution.RollbackFailed
)

// LockKey is the lock every apply (and rollback) of a workspace holds while
// claimed: one at a time per workspace.
func LockKey(ws string) string { return evolution.ApplyLockKey(ws) }

// Store is what applies need of the state port (store.Store has it all): work
// items are read here and written only through the Protocol.
type Store interface {
	work.Reader
	workspace.Store
	workspace.SurfaceStore
	settings.Store
	session.Store
}

// Deps are the service's dependencies. Store, Blobs, Queue, Protocol and Model
// are required.
type Deps struct {
	Store    Store
	Blobs    blob.Store
	Queue    queue.Sender
	Protocol *work.Protocol
	Model    model.Model
	Clock    molt.Clock   // default molt.SystemClock
	IDs      molt.IDs     // default the protocol's
	Logger   *slog.Logger // default slog.Default()
}

// Config tunes the service. Zero fields take the defaults.
type Config struct {
	// RollbackTimeout is the claim timeout of a rollback item (default 2m): a
	// rollback that crashed releases the workspace lock after it.
	RollbackTimeout time.Duration
	// ArchiveAfter: a run or apply terminal this long is archived (default 14 days).
	ArchiveAfter time.Duration
	// PurgeAfter: an archived item is purged this long after archived_at
	// (default 30 days).
	PurgeAfter time.Duration
	// ExpiryGrace is how long after its purge time an archived apply's TTL
	// (work.Item.ExpiresAt) lets DynamoDB delete it, as a backstop of the tick's
	// purge (default 2 days).
	ExpiryGrace time.Duration
	// RetentionEvery bounds how often the tick runs the retention pass in one
	// process (default 1h).
	RetentionEvery time.Duration
	// Crash, when set, is called after each step of the worker with the step's
	// name ("claim", "merge", "regress", "preflight", "checkpoint", "publish:<k>",
	// "published", "takeover"; a rollback's "rollback:claimed" and
	// "rollback:file:<k>" before its k-th file) and the apply's id; an error
	// stops the worker or rollback right there, writing nothing more, as if its
	// process had died. Tests only.
	Crash func(step, applyID string) error
}

func (c Config) withDefaults() Config {
	if c.RollbackTimeout <= 0 {
		c.RollbackTimeout = 2 * time.Minute
	}
	if c.ArchiveAfter <= 0 {
		c.ArchiveAfter = 14 * 24 * time.Hour
	}
	if c.PurgeAfter <= 0 {
		c.PurgeAfter = 30 * 24 * time.Hour
	}
	if c.ExpiryGrace <= 0 {
		c.ExpiryGrace = 48 * time.Hour
	}
	if c.RetentionEvery <= 0 {
		c.RetentionEvery = time.Hour
	}
	return c
}

// Service runs applies: the worker (Handle), rollback, notices and retention.
type Service struct {
	store     Store
	blobs     blob.Store
	queue     queue.Sender
	proto     *work.Protocol
	model     model.Model
	clock     molt.Clock
	ids       molt.IDs
	log       *slog.Logger
	cfg       Config
	retain    retentionGate
	exec      *work.Executor[settings.Settings] // the apply kind's lifecycle (Handle)
	rollbacks *work.Executor[struct{}]          // the rollback kind's (Rollback)
	surfaces  *workspace.Surfaces
}

// New returns a Service. It panics when a required dependency is missing.
func New(d Deps, cfg Config) *Service {
	if d.Store == nil || d.Blobs == nil || d.Queue == nil || d.Protocol == nil || d.Model == nil {
		panic("applies: Store, Blobs, Queue, Protocol and Model are required")
	}
	s := &Service{store: d.Store, blobs: d.Blobs, queue: d.Queue, proto: d.Protocol, model: d.Model,
		clock: d.Clock, ids: d.IDs, log: d.Logger, cfg: cfg.withDefaults()}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	if s.ids == nil {
		s.ids = d.Protocol.IDs
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.exec, s.rollbacks = s.executor(), s.rollbackExecutor()
	s.surfaces = &workspace.Surfaces{Store: d.Store, Builtin: chat.Builtin()}
	return s
}

func (s *Service) now() time.Time { return s.clock.Now().UTC() }

// Policy is the apply kind's claim policy for the tick, from the settings: budget
// max_concurrent_apply, timeout apply_timeout_minutes, max_attempts; claimed in
// running and syncing; a stale syncing apply is resumed in place (never
// requeued); retries spent → timeout from running, failed from syncing (with its
// last failure reason), an auto apply's runs back to awaiting_review in the same
// write.
func (s *Service) Policy(set settings.Settings) work.Policy {
	e := set.Evolution
	return work.Policy{
		Kind:        work.KindApply,
		Budget:      e.MaxConcurrentApply,
		Timeout:     time.Duration(e.ApplyTimeoutMinutes) * time.Minute,
		MaxAttempts: e.MaxAttempts,
		Expired:     StatusTimeout,
		Claimed:     []work.Status{StatusRunning, StatusSyncing},
		Resume:      []work.Status{StatusSyncing},
		OnExpire:    s.onExpire,
		Expiry:      expiry,
	}
}

// RollbackPolicy is the rollback kind's policy: a rollback item whose heartbeat
// went stale (its request died mid-way) ends failed, releasing the workspace's
// lock. Its files stay as they were; rolling back again finishes the job (the
// files already restored read as reverted).
func (s *Service) RollbackPolicy(settings.Settings) work.Policy {
	return work.Policy{Kind: KindRollback, Timeout: s.cfg.RollbackTimeout, MaxAttempts: 1,
		Expired: rollbackFailed, Claimed: []work.Status{work.StatusRunning}}
}

func expiry(it work.Item) (work.Status, string) {
	if it.Status == StatusSyncing {
		reason := ReasonTimeout + ": publish did not finish and attempts are spent"
		if it.Reason != "" {
			reason = clip(ReasonTimeout+": attempts spent; last failure: "+it.Reason, 1900)
		}
		return StatusFailed, reason
	}
	return "", ""
}

// onExpire returns the extra ops of a stale apply's terminal move: its
// still-approved runs where a failed apply leaves them (failureOps).
func (s *Service) onExpire(ctx context.Context, it work.Item) ([]work.Op, error) {
	d, err := ParseData(it.Data)
	if err != nil {
		return nil, nil
	}
	return s.failureOps(ctx, d)
}

// failureOps returns the ops that move a failed apply's still-approved source
// runs where evolution.ApplyFailureSendsRunBack says: back to awaiting_review
// for an auto apply, nowhere (they stay approved) for a reviewer's.
func (s *Service) failureOps(ctx context.Context, d Data) ([]work.Op, error) {
	to, back := evolution.ApplyFailureSendsRunBack(d.ApprovedBy)
	if !back {
		return nil, nil
	}
	return s.runOps(ctx, d.Runs, runApproved, to, nil)
}

// runOps returns one conditional update per run of ids that is in from and not
// claimed, moving it to to (and setting expires when not nil).
func (s *Service) runOps(ctx context.Context, ids []string, from, to work.Status, expires *time.Time) ([]work.Op, error) {
	var ops []work.Op
	now := s.now()
	for _, id := range ids {
		r, err := s.store.GetItem(ctx, work.KindRun, id)
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", id, err)
		}
		if r.Status != from || r.Active {
			continue
		}
		ops = append(ops, work.UpdateItem{Kind: work.KindRun, ID: id,
			If:  work.Cond{Statuses: []work.Status{from}, Active: work.Ptr(false)},
			Set: work.Set{Status: to, ExpiresAt: expires, UpdatedAt: now, OpID: s.ids.NewID()}})
	}
	return ops, nil
}

// nextApplies chooses the pending applies to wake when an apply of ws let go
// of the lock or a slot: up to two of ws (the lock), then up to four others
// (the budget), oldest first, but not except.
func (s *Service) nextApplies(ctx context.Context, ws string, except ...string) ([]string, error) {
	pg, err := s.store.ListItems(ctx, work.ListQuery{Kind: work.KindApply, Status: StatusPending, Oldest: true,
		Page: page.Query{Limit: 50}})
	if err != nil {
		return nil, err
	}
	var ids []string
	same, others := 0, 0
	for _, it := range pg.Items {
		if slices.Contains(except, it.ID) {
			continue
		}
		mine := it.LockKey == LockKey(ws)
		switch {
		case mine && same < 2:
			same++
		case !mine && others < 4:
			others++
		default:
			continue
		}
		ids = append(ids, it.ID)
	}
	return ids, nil
}

// Get returns an apply and its data; ENOTFOUND when absent or not an apply.
func (s *Service) Get(ctx context.Context, id string) (work.Item, Data, error) {
	if work.ValidateKey(work.KindApply, id) != nil {
		return work.Item{}, Data{}, molt.NotFound("apply %s not found", id)
	}
	it, err := s.store.GetItem(ctx, work.KindApply, id)
	if err != nil {
		return work.Item{}, Data{}, err
	}
	d, err := ParseData(it.Data)
	if err != nil {
		return it, Data{}, fmt.Errorf("apply %s: %w", id, err)
	}
	return it, d, nil
}

// errCrashed wraps a Config.Crash error: the worker stops writing.
type errCrashed struct{ err error }

func (e *errCrashed) Error() string { return "crashed: " + e.err.Error() }
func (e *errCrashed) Unwrap() error { return e.err }

func (s *Service) crash(step, applyID string) error {
	if s.cfg.Crash == nil {
		return nil
	}
	if err := s.cfg.Crash(step, applyID); err != nil {
		return &errCrashed{err}
	}
	return nil
}

func isCrash(err error) bool {
	var c *errCrashed
	return errors.As(err, &c)
}
