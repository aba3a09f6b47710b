package runs_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/storetest/adapters"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// opener, openSQLite, openDynamo and eachStore are the shared adapter openers
// (internal/storetest/adapters).
type opener = adapters.Opener

var (
	openSQLite = adapters.OpenSQLite
	openDynamo = adapters.OpenDynamo
)

func eachStore(t *testing.T, f func(t *testing.T, open opener)) { adapters.Each(t, f) }

// env is an App on one store adapter, a blob folder, in-process queues, a
// manual clock and a controllable offline model.
type env struct {
	t     testing.TB
	ctx   context.Context
	app   *app.App
	runs  *runs.Service
	store *signalStore
	blobs *ctlBlobs
	q     *memqueue.Queues
	clock *molt.ManualClock
	model *ctlModel
	ws    string
}

var epoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

var (
	fullCaller = auth.Caller{Token: auth.Token{Level: auth.Full}}
	wsCaller   = auth.Caller{Token: auth.Token{Level: auth.Workspace, Workspace: "acme"}}
)

func setup(t testing.TB, open opener, opts ...func(*app.Config)) *env {
	t.Helper()
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	st := &signalStore{Store: open(t, clock, ids), changed: make(chan struct{})}
	dir, err := dirblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dir.Close() })
	bl := &ctlBlobs{Store: dir}
	q := memqueue.New()
	cm := &ctlModel{inner: offlineevo.New()}
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir(),
		Runs: runs.Config{HeartbeatEvery: time.Hour}}
	for _, o := range opts {
		o(&cfg)
	}
	a := app.New(cfg, app.Deps{Store: st, Blobs: bl, Queue: q, Local: q, Clock: clock, IDs: ids, Model: cm},
		slog.New(slog.NewJSONHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, app: a, runs: a.Runs, store: st, blobs: bl, q: q, clock: clock, model: cm, ws: "acme"}
	if _, _, err := st.PutWorkspace(ctx, workspace.Workspace{Name: e.ws}); err != nil {
		t.Fatalf("put workspace: %v", err)
	}
	return e
}

// settings changes the evolution settings.
func (e *env) settings(f func(ev *settings.Evolution)) {
	e.t.Helper()
	s, err := e.store.GetSettings(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	f(&s.Evolution)
	if err := e.store.PutSettings(e.ctx, s); err != nil {
		e.t.Fatalf("put settings: %v", err)
	}
}

// session opens a root session of acme (default agent) as caller.
func (e *env) session(c auth.Caller) session.Session {
	e.t.Helper()
	ss, err := e.app.Chat.CreateSession(e.ctx, c, chat.NewSession{Workspace: e.ws})
	if err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	return ss
}

// evo posts "/evo hint" to a session as the full caller and returns the run.
func (e *env) evo(sessionID, hint string) work.Item {
	e.t.Helper()
	it, err := e.app.Chat.Post(e.ctx, fullCaller, sessionID, strings.TrimSpace("/evo "+hint))
	if err != nil {
		e.t.Fatalf("/evo: %v", err)
	}
	if it.Kind != work.KindRun || it.Status != runs.StatusPending {
		e.t.Fatalf("/evo returned %s %s, want a pending run", it.Kind, it.Status)
	}
	return it
}

// receive takes every visible wake-up of kind off its queue.
func (e *env) receive(kind work.Kind) []queue.Message {
	e.t.Helper()
	rcv := e.q.Receiver(string(kind))
	var out []queue.Message
	for {
		ds, err := rcv.Receive(e.ctx, 10, 0)
		if err != nil {
			e.t.Fatalf("receive: %v", err)
		}
		if len(ds) == 0 {
			return out
		}
		for _, d := range ds {
			_ = rcv.Delete(e.ctx, d)
			out = append(out, d.Message)
		}
	}
}

// drain is the run consumer by hand: it handles run wake-ups until none is
// left and returns the handlers' errors.
func (e *env) drain() []error {
	e.t.Helper()
	var errs []error
	for {
		ms := e.receive(work.KindRun)
		if len(ms) == 0 {
			return errs
		}
		for _, m := range ms {
			if err := e.runs.Handle(e.ctx, m); err != nil {
				errs = append(errs, err)
			}
		}
	}
}

func (e *env) item(kind work.Kind, id string) work.Item {
	e.t.Helper()
	it, err := e.store.GetItem(e.ctx, kind, id)
	if err != nil {
		e.t.Fatalf("get %s %s: %v", kind, id, err)
	}
	return it
}

func (e *env) detail(id string) runs.Detail {
	e.t.Helper()
	d, err := e.runs.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get run %s: %v", id, err)
	}
	return d
}

// wantStatus fails unless run id is in status want.
func (e *env) wantStatus(id string, want work.Status) work.Item {
	e.t.Helper()
	it := e.item(work.KindRun, id)
	if it.Status != want {
		e.t.Fatalf("run %s is %s (reason %q), want %s", id, it.Status, it.Reason, want)
	}
	return it
}

// messages returns a session's messages.
func (e *env) messages(id string) []session.Message {
	e.t.Helper()
	ms, err := e.store.ListMessages(e.ctx, id, 0, 500)
	if err != nil {
		e.t.Fatal(err)
	}
	return ms
}

// tick runs the maintenance pass.
func (e *env) tick() work.Result {
	e.t.Helper()
	res, err := e.app.Maintainer().RunOnce(e.ctx)
	if err != nil {
		e.t.Fatalf("tick: %v", err)
	}
	return res
}

// applies lists the apply items.
func (e *env) applies() []work.Item {
	e.t.Helper()
	pg, err := e.store.ListItems(e.ctx, work.ListQuery{Kind: work.KindApply, Page: page.Query{Limit: 100}})
	if err != nil {
		e.t.Fatal(err)
	}
	return pg.Items
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := molt.ErrorCode(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	if got := molt.ErrorReason(err); got != reason {
		t.Fatalf("error %v: reason %q, want %q", err, got, reason)
	}
}

// signalStore counts store requests and closes a channel at every commit.
type signalStore struct {
	store.Store

	mu      sync.Mutex
	counts  map[string]int
	claims  map[string]time.Time // run id → when its claim committed
	changed chan struct{}
	// before, when set, runs before each commit (to let another writer in
	// between a caller's read and its write).
	before func(ops []work.Op)
}

// setBefore sets the hook run before each commit (nil: none).
func (s *signalStore) setBefore(f func(ops []work.Op)) {
	s.mu.Lock()
	s.before = f
	s.mu.Unlock()
}

func (s *signalStore) count(name string) {
	s.mu.Lock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[name]++
	s.mu.Unlock()
}

// reset returns the request counts so far and starts counting again.
func (s *signalStore) reset() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.counts
	s.counts = map[string]int{}
	return out
}

// changes returns a channel closed at the next commit.
func (s *signalStore) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// claimedAt returns when run id was last claimed (zero if never).
func (s *signalStore) claimedAt(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[id]
}

func (s *signalStore) Commit(ctx context.Context, ops ...work.Op) error {
	s.count("Commit")
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(ops)
	}
	err := s.Store.Commit(ctx, ops...)
	now := time.Now()
	s.mu.Lock()
	if u, ok := ops[0].(work.UpdateItem); ok && err == nil && u.Kind == work.KindRun && u.Set.Status == work.StatusRunning {
		if s.claims == nil {
			s.claims = map[string]time.Time{}
		}
		s.claims[u.ID] = now
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return err
}

// CommitEach is Commit for a batch (the executor's claims and final writes
// that land together): the hook before each, one signal after.
func (s *signalStore) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	s.count("CommitEach")
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		for _, ops := range cs {
			before(ops)
		}
	}
	errs := s.Store.CommitEach(ctx, cs...)
	now := time.Now()
	s.mu.Lock()
	for k, ops := range cs {
		if u, ok := ops[0].(work.UpdateItem); ok && errs[k] == nil && u.Kind == work.KindRun && u.Set.Status == work.StatusRunning {
			if s.claims == nil {
				s.claims = map[string]time.Time{}
			}
			s.claims[u.ID] = now
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return errs
}

func (s *signalStore) GetItem(ctx context.Context, k work.Kind, id string) (work.Item, error) {
	s.count("GetItem")
	return s.Store.GetItem(ctx, k, id)
}

func (s *signalStore) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	s.count("ListItems")
	return s.Store.ListItems(ctx, q)
}

func (s *signalStore) GetSession(ctx context.Context, id string) (session.Session, error) {
	s.count("GetSession")
	return s.Store.GetSession(ctx, id)
}

func (s *signalStore) ListMessages(ctx context.Context, id string, after, limit int) ([]session.Message, error) {
	s.count("ListMessages")
	return s.Store.ListMessages(ctx, id, after, limit)
}

func (s *signalStore) ListFiles(ctx context.Context, ws string) ([]workspace.File, error) {
	s.count("ListFiles")
	return s.Store.ListFiles(ctx, ws)
}

func (s *signalStore) GetSettings(ctx context.Context) (settings.Settings, error) {
	s.count("GetSettings")
	return s.Store.GetSettings(ctx)
}

func (s *signalStore) TokenByHash(ctx context.Context, h string) (auth.Token, error) {
	s.count("TokenByHash")
	return s.Store.TokenByHash(ctx, h)
}

// phase names the phase a model request belongs to.
func phase(req model.Request) string {
	if id, ok := evolution.AgentFromSystem(req.System); ok {
		switch id {
		case evolution.AgentEvo:
			return "draft"
		case evolution.AgentScore:
			return "score"
		}
		return id
	}
	return "dryrun"
}

// ctlModel wraps a model with a hook that runs before each call (to block, fail
// or observe it).
type ctlModel struct {
	inner model.Model

	mu     sync.Mutex
	calls  map[string]int
	before func(ctx context.Context, phase string, req model.Request) error
	// answer, when set, may answer a call instead of the inner model.
	answer func(phase string, req model.Request) (model.Response, bool)
}

func (m *ctlModel) Name() string { return m.inner.Name() }

func (m *ctlModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	ph := phase(req)
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[ph]++
	before, answer := m.before, m.answer
	m.mu.Unlock()
	if before != nil {
		if err := before(ctx, ph, req); err != nil {
			return model.Response{}, err
		}
	}
	if answer != nil {
		if resp, ok := answer(ph, req); ok {
			return resp, nil
		}
	}
	return m.inner.Generate(ctx, req)
}

func (m *ctlModel) setBefore(f func(ctx context.Context, phase string, req model.Request) error) {
	m.mu.Lock()
	m.before = f
	m.mu.Unlock()
}

func (m *ctlModel) setAnswer(f func(phase string, req model.Request) (model.Response, bool)) {
	m.mu.Lock()
	m.answer = f
	m.mu.Unlock()
}

func (m *ctlModel) count(phase string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[phase]
}

// ctlBlobs wraps a blob store, records the keys read and written, and runs a
// hook before each Put.
type ctlBlobs struct {
	blob.Store

	mu     sync.Mutex
	puts   []string
	gets   []string
	before func(ctx context.Context, key string) error
}

func (b *ctlBlobs) Put(ctx context.Context, key string, data []byte) error {
	b.mu.Lock()
	before := b.before
	b.mu.Unlock()
	if before != nil {
		if err := before(ctx, key); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.puts = append(b.puts, key)
	b.mu.Unlock()
	return b.Store.Put(ctx, key, data)
}

func (b *ctlBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	b.gets = append(b.gets, key)
	b.mu.Unlock()
	return b.Store.Get(ctx, key)
}

func (b *ctlBlobs) setBefore(f func(ctx context.Context, key string) error) {
	b.mu.Lock()
	b.before = f
	b.mu.Unlock()
}

// log returns the keys read and written so far.
func (b *ctlBlobs) log() (puts, gets []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.puts...), append([]string(nil), b.gets...)
}
