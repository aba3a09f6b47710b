package applies_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
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

var epoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// env is an App on one store adapter (behind a request counter), a blob folder
// (behind a request counter), in-process queues, a manual clock, the offline
// model with its evolution answers and a test scorer, and the crash hook.
type env struct {
	t     testing.TB
	ctx   context.Context
	app   *app.App
	svc   *applies.Service
	store *countStore
	blobs *countBlobs
	q     *memqueue.Queues
	clock *molt.ManualClock
	ids   molt.IDs

	mu      sync.Mutex
	crashes []crashRule
	onStep  func(step, id string) error
	low     map[string]bool // runs whose regression score is low
	model   *countModel
}

// countModel counts model calls; fail, when set, may refuse a call.
type countModel struct {
	model.Model
	calls atomic.Int64
	mu    sync.Mutex
	fail  func(agent string) (model.Response, error, bool)
}

func (m *countModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.calls.Add(1)
	m.mu.Lock()
	fail := m.fail
	m.mu.Unlock()
	if fail != nil {
		agent, _ := evolution.AgentFromSystem(req.System)
		if resp, err, ok := fail(agent); ok {
			return resp, err
		}
	}
	return m.Model.Generate(ctx, req)
}

// setFail makes the model answer agent's calls with f's (nil f: the offline model).
func (m *countModel) setFail(f func(agent string) (model.Response, error, bool)) {
	m.mu.Lock()
	m.fail = f
	m.mu.Unlock()
}

type crashRule struct {
	step  string // step name, or prefix ending in "*"
	apply string // "" any apply
	times int    // crashes left; -1 forever
}

var errCrash = errors.New("injected crash")

func setup(t testing.TB, open opener) *env {
	t.Helper()
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	st := &countStore{Store: open(t, clock, ids)}
	dir, err := dirblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dir.Close() })
	e := &env{t: t, store: st, blobs: &countBlobs{Store: dir}, q: memqueue.New(), clock: clock, ids: ids, low: map[string]bool{}}
	m := &countModel{Model: offline.New(e.lowScore, offlineevo.Handle)}
	e.model = m
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir(),
		Runs: runs.Config{HeartbeatEvery: time.Hour}, Applies: applies.Config{Crash: e.crash}}
	e.app = app.New(cfg, app.Deps{Store: st, Blobs: e.blobs, Queue: e.q, Local: e.q, Clock: clock, IDs: ids, Model: m},
		slog.New(slog.NewJSONHandler(io.Discard, nil)))
	e.svc = e.app.Applies
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	for _, ws := range []string{"acme", "beta"} {
		if _, _, err := st.PutWorkspace(ctx, workspace.Workspace{Name: ws}); err != nil {
			t.Fatalf("put workspace: %v", err)
		}
	}
	return e
}

// crash is the service's Crash hook.
func (e *env) crash(step, id string) error {
	e.mu.Lock()
	on := e.onStep
	for i := range e.crashes {
		r := &e.crashes[i]
		match := r.step == step || (strings.HasSuffix(r.step, "*") && strings.HasPrefix(step, strings.TrimSuffix(r.step, "*")))
		if match && (r.apply == "" || r.apply == id) && r.times != 0 {
			if r.times > 0 {
				r.times--
			}
			e.mu.Unlock()
			return fmt.Errorf("%w at %s", errCrash, step)
		}
	}
	e.mu.Unlock()
	if on != nil {
		return on(step, id)
	}
	return nil
}

func (e *env) crashAt(step, apply string, times int) {
	e.mu.Lock()
	e.crashes = append(e.crashes, crashRule{step: step, apply: apply, times: times})
	e.mu.Unlock()
}

// lowScore answers the __score__ agent with lint 40 for runs marked low.
func (e *env) lowScore(req model.Request) (model.Response, bool) {
	if id, _ := evolution.AgentFromSystem(req.System); id != evolution.AgentScore || len(req.Messages) == 0 {
		return model.Response{}, false
	}
	text := req.Messages[len(req.Messages)-1].Text
	e.mu.Lock()
	defer e.mu.Unlock()
	for run := range e.low {
		if strings.Contains(text, "run: "+run+"\n") {
			return model.Response{Text: "```json\n" + `{"lint": 40, "behavior": 80, "scope": 80, "avg": 60, "confidence": "high",
 "checks": {"usedInDryRun": true, "probe": true, "probeLanguage": true}}` + "\n```"}, true
		}
	}
	return model.Response{}, false
}

func (e *env) settings(f func(s *settings.Settings)) {
	e.t.Helper()
	s, err := e.store.GetSettings(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	f(&s)
	if err := e.store.PutSettings(e.ctx, s); err != nil {
		e.t.Fatalf("put settings: %v", err)
	}
}

func (e *env) put(ws, path, content string) {
	e.t.Helper()
	if _, err := e.store.PutFile(e.ctx, workspace.NewFile(ws, path, []byte(content), e.clock.Now())); err != nil {
		e.t.Fatalf("put %s/%s: %v", ws, path, err)
	}
}

// files returns a workspace's files by path.
func (e *env) files(ws string) map[string]string {
	e.t.Helper()
	fs, err := e.store.ListFiles(e.ctx, ws)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fs {
		out[f.Path] = string(f.Content)
	}
	return out
}

// runSpec is an approved run to seed.
type runSpec struct {
	ws      string
	files   map[string]string // what the patch writes
	deletes []string
	auto    bool
	session string // source session
	// base, when set, is the surface content the run drafted against (default:
	// the workspace's effective files now).
	base map[string]string
}

// approve seeds an approved run with its patch (runs/<id>/attempt-1/patch.json)
// and surface snapshot, and its pending apply, in one write (as runs.Approve
// or the auto-apply gate do), then sends the apply's wake-up. It returns the run
// and apply ids.
func (e *env) approve(r runSpec) (string, string) {
	e.t.Helper()
	ids := e.approveAll(r)
	return ids[0], ids[1]
}

// approveAll is approve with several runs in one apply: the first spec's
// workspace and approver, the runs in order. It returns the run ids, then the
// apply's.
func (e *env) approveAll(specs ...runSpec) []string {
	e.t.Helper()
	applyID := e.ids.NewID()
	var ops []work.Op
	var runIDs []string
	for _, r := range specs {
		op, id := e.seedRun(r, specs[0].auto, applyID)
		ops, runIDs = append(ops, op), append(runIDs, id)
	}
	r := specs[0]
	if r.ws == "" {
		r.ws = "acme"
	}
	by := runs.ApprovedByReviewer
	if r.auto {
		by = runs.ApprovedByAuto
	}
	now := e.clock.Now()
	ad, _ := json.Marshal(runs.ApplyData{Workspace: r.ws, Runs: runIDs, ApprovedBy: by})
	ap := work.Item{Kind: work.KindApply, ID: applyID, Workspace: r.ws, LockKey: runs.ApplyLockKey(r.ws),
		Status: work.StatusPending, Data: ad, CreatedAt: now, UpdatedAt: now, OpID: e.ids.NewID()}
	if err := e.store.Commit(e.ctx, append(ops, work.CreateItem{Item: ap})...); err != nil {
		e.t.Fatalf("seed runs and apply: %v", err)
	}
	if err := e.q.Send(e.ctx, queue.Message{Kind: string(work.KindApply), ID: applyID}); err != nil {
		e.t.Fatal(err)
	}
	return append(runIDs, applyID)
}

// seedRun writes an approved run's artifacts and returns the op creating it.
func (e *env) seedRun(r runSpec, auto bool, applyID string) (work.Op, string) {
	e.t.Helper()
	if r.ws == "" {
		r.ws = "acme"
	}
	now := e.clock.Now()
	runID := e.ids.NewID()
	p := evolution.Patch{Deletes: r.deletes, Rationale: "because the session showed it",
		TestScenario: evolution.TestScenario{Description: "answers well", Message: "Introduce yourself."}}
	var paths []string
	for path, content := range r.files {
		p.Files = append(p.Files, evolution.PatchFile{Path: path, Content: content})
		paths = append(paths, path)
	}
	pb, _ := json.Marshal(p)
	if err := e.blobs.Put(e.ctx, runs.AttemptKey(runID, 1, runs.ArtifactPatch), pb); err != nil {
		e.t.Fatal(err)
	}
	base := r.base
	if base == nil {
		base = map[string]string{}
		for path, c := range e.files(r.ws) {
			base[path] = c
		}
	}
	sc := runs.SurfaceContext{}
	for path, c := range base {
		sc.Files = append(sc.Files, runs.SurfaceFile{Path: path, Scope: "workspace", Content: c})
	}
	sb, _ := json.Marshal(sc)
	if err := e.blobs.Put(e.ctx, runs.SnapshotKey(runID, runs.ArtifactSurface), sb); err != nil {
		e.t.Fatal(err)
	}
	by := runs.ApprovedByReviewer
	if auto {
		by = runs.ApprovedByAuto
	}
	score := offlineevo.Score
	rd := runs.Data{Workspace: r.ws, SourceSession: r.session, Agent: "main", Trigger: runs.TriggerEvo,
		SourceAccess: "full", CreatedAt: now, ApprovedBy: by, LatestApply: applyID, Applies: []string{applyID},
		Result: &runs.Result{Attempt: 1, Patch: &runs.PatchSummary{Files: paths, TestScenario: p.TestScenario, Rationale: p.Rationale},
			Score: &score, Observation: "users keep asking for French", HasObservation: true}}
	run := work.Item{Kind: work.KindRun, ID: runID, Workspace: r.ws, Status: runs.StatusApproved, Attempts: 1,
		Data: rd.Encode(), CreatedAt: now, UpdatedAt: now, OpID: e.ids.NewID()}
	return work.CreateItem{Item: run}, runID
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

// drain is the apply consumer by hand: it handles apply wake-ups until none is
// left and returns the handlers' errors.
func (e *env) drain() []error {
	e.t.Helper()
	var errs []error
	for {
		ms := e.receive(work.KindApply)
		if len(ms) == 0 {
			return errs
		}
		for _, m := range ms {
			if err := e.svc.Handle(e.ctx, m); err != nil {
				errs = append(errs, err)
			}
		}
	}
}

// drainOK drains and fails on any error.
func (e *env) drainOK() {
	e.t.Helper()
	if errs := e.drain(); len(errs) > 0 {
		e.t.Fatalf("apply worker errors: %v", errs)
	}
}

// tick runs one full tick (maintenance, notices, retention gate).
func (e *env) tick() app.TickResult {
	e.t.Helper()
	res, err := e.app.Tick(e.ctx, e.app.Maintainer())
	if err != nil {
		e.t.Fatalf("tick: %v", err)
	}
	return res
}

func (e *env) item(kind work.Kind, id string) work.Item {
	e.t.Helper()
	it, err := e.store.GetItem(e.ctx, kind, id)
	if err != nil {
		e.t.Fatalf("get %s %s: %v", kind, id, err)
	}
	return it
}

func (e *env) wantStatus(kind work.Kind, id string, want work.Status) work.Item {
	e.t.Helper()
	it := e.item(kind, id)
	if it.Status != want {
		e.t.Fatalf("%s %s is %s (reason %q), want %s", kind, id, it.Status, it.Reason, want)
	}
	return it
}

func (e *env) data(id string) applies.Data {
	e.t.Helper()
	d, err := applies.ParseData(e.item(work.KindApply, id).Data)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) blob(key string) ([]byte, bool) {
	e.t.Helper()
	b, err := e.blobs.Get(e.ctx, key)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return nil, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return b, true
}

func (e *env) manifest(id string) (applies.Manifest, []byte) {
	e.t.Helper()
	b, ok := e.blob("applies/" + id + "/MANIFEST.json")
	if !ok {
		e.t.Fatalf("apply %s has no manifest", id)
	}
	var m applies.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatal(err)
	}
	return m, b
}

// lockFree checks that no apply holds ws's lock and no apply slot is taken.
func (e *env) lockFree(ws string) {
	e.t.Helper()
	if h, err := e.store.LockHolder(e.ctx, applies.LockKey(ws)); err != nil || h != "" {
		e.t.Fatalf("lock of %s held by %q (%v)", ws, h, err)
	}
	for _, k := range []work.Kind{work.KindApply, applies.KindRollback} {
		if n, err := e.store.ActiveCount(e.ctx, k); err != nil || n != 0 {
			e.t.Fatalf("%s slots = %d (%v), want 0", k, n, err)
		}
	}
}

// inFlight lists the applies of ws that are running or syncing.
func (e *env) inFlight(ws string) []work.Item {
	e.t.Helper()
	var out []work.Item
	for _, st := range []work.Status{applies.StatusRunning, applies.StatusSyncing} {
		pg, err := e.store.ListItems(e.ctx, work.ListQuery{Kind: work.KindApply, Status: st, Page: page.Query{Limit: 100}})
		if err != nil {
			e.t.Errorf("list: %v", err)
			return nil
		}
		for _, it := range pg.Items {
			if it.Workspace == ws {
				out = append(out, it)
			}
		}
	}
	return out
}

func (e *env) messages(sessionID string) []session.Message {
	e.t.Helper()
	ms, err := e.store.ListMessages(e.ctx, sessionID, 0, 500)
	if err != nil {
		e.t.Fatal(err)
	}
	return ms
}

func wantReason(t testing.TB, err error, reason string) *molt.Error {
	t.Helper()
	if got := molt.ErrorReason(err); got != reason {
		t.Fatalf("error %v: reason %q, want %q", err, got, reason)
	}
	var me *molt.Error
	errors.As(err, &me)
	return me
}

// countStore counts store requests by method.
type countStore struct {
	store.Store
	mu      sync.Mutex
	counts  map[string]int
	failPut func(workspace.File) error
	// failGet, when set, may fail a GetItem (a store error in transit).
	failGet func(kind work.Kind, id string) error
	// beforeCommit, when set, runs before each Commit (to let another writer
	// in between a caller's read and its write).
	beforeCommit func(ops []work.Op)
	changed      chan struct{} // closed at every write
	listed       atomic.Int64  // items ListItems returned
}

// setFailGet makes GetItem fail with f's error (nil f: no failures).
func (s *countStore) setFailGet(f func(kind work.Kind, id string) error) {
	s.mu.Lock()
	s.failGet = f
	s.mu.Unlock()
}

// changes returns a channel closed at the next write.
func (s *countStore) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *countStore) signal() {
	s.mu.Lock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

func (s *countStore) count(name string) {
	s.mu.Lock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[name]++
	s.mu.Unlock()
}

// reset returns the counts so far and starts again.
func (s *countStore) reset() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.counts
	s.counts = map[string]int{}
	return out
}

// setBeforeFinish sets the hook run before each Commit (nil: none).
func (s *countStore) setBeforeFinish(f func(ops []work.Op)) {
	s.mu.Lock()
	s.beforeCommit = f
	s.mu.Unlock()
}

func (s *countStore) Commit(ctx context.Context, ops ...work.Op) error {
	s.count("Commit")
	s.mu.Lock()
	before := s.beforeCommit
	s.mu.Unlock()
	if before != nil {
		before(ops)
	}
	defer s.signal()
	return s.Store.Commit(ctx, ops...)
}

// CommitEach is Commit for a batch: the hook before each, one signal after.
func (s *countStore) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	s.count("CommitEach")
	s.mu.Lock()
	before := s.beforeCommit
	s.mu.Unlock()
	if before != nil {
		for _, ops := range cs {
			before(ops)
		}
	}
	defer s.signal()
	return s.Store.CommitEach(ctx, cs...)
}

func (s *countStore) GetItem(ctx context.Context, k work.Kind, id string) (work.Item, error) {
	s.count("GetItem")
	s.mu.Lock()
	fail := s.failGet
	s.mu.Unlock()
	if fail != nil {
		if err := fail(k, id); err != nil {
			return work.Item{}, err
		}
	}
	return s.Store.GetItem(ctx, k, id)
}
func (s *countStore) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	s.count("ListItems")
	pg, err := s.Store.ListItems(ctx, q)
	s.listed.Add(int64(len(pg.Items)))
	return pg, err
}
func (s *countStore) PutFile(ctx context.Context, f workspace.File) (workspace.File, error) {
	s.count("PutFile")
	s.mu.Lock()
	fail := s.failPut
	s.mu.Unlock()
	if fail != nil {
		if err := fail(f); err != nil {
			return workspace.File{}, err
		}
	}
	defer s.signal()
	return s.Store.PutFile(ctx, f)
}

// setFailPut makes PutFile fail with f's error (nil f: no failures).
func (s *countStore) setFailPut(f func(workspace.File) error) {
	s.mu.Lock()
	s.failPut = f
	s.mu.Unlock()
}
func (s *countStore) GetFile(ctx context.Context, ws, p string) (workspace.File, error) {
	s.count("GetFile")
	return s.Store.GetFile(ctx, ws, p)
}
func (s *countStore) ListFiles(ctx context.Context, ws string) ([]workspace.File, error) {
	s.count("ListFiles")
	return s.Store.ListFiles(ctx, ws)
}
func (s *countStore) DeleteFile(ctx context.Context, ws, p string) error {
	s.count("DeleteFile")
	return s.Store.DeleteFile(ctx, ws, p)
}
func (s *countStore) GetSettings(ctx context.Context) (settings.Settings, error) {
	s.count("GetSettings")
	return s.Store.GetSettings(ctx)
}
func (s *countStore) LockHolder(ctx context.Context, key string) (string, error) {
	s.count("LockHolder")
	return s.Store.LockHolder(ctx, key)
}
func (s *countStore) GetSession(ctx context.Context, id string) (session.Session, error) {
	s.count("GetSession")
	return s.Store.GetSession(ctx, id)
}

// countBlobs counts blob requests by method.
type countBlobs struct {
	blob.Store
	mu     sync.Mutex
	counts map[string]int
	// beforePut, when set, runs before each Put (to let another writer in).
	beforePut func(key string)
	// afterGet, when set, runs after each Get, before it returns.
	afterGet func(key string)
}

// setAfterGet sets the hook run after each Get (nil: none).
func (b *countBlobs) setAfterGet(f func(key string)) {
	b.mu.Lock()
	b.afterGet = f
	b.mu.Unlock()
}

// setBeforePut sets the hook run before each Put (nil: none).
func (b *countBlobs) setBeforePut(f func(key string)) {
	b.mu.Lock()
	b.beforePut = f
	b.mu.Unlock()
}

func (b *countBlobs) count(name string) {
	b.mu.Lock()
	if b.counts == nil {
		b.counts = map[string]int{}
	}
	b.counts[name]++
	b.mu.Unlock()
}

func (b *countBlobs) reset() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.counts
	b.counts = map[string]int{}
	return out
}

func (b *countBlobs) Put(ctx context.Context, k string, d []byte) error {
	b.count("Put")
	b.mu.Lock()
	before := b.beforePut
	b.mu.Unlock()
	if before != nil {
		before(k)
	}
	return b.Store.Put(ctx, k, d)
}
func (b *countBlobs) Get(ctx context.Context, k string) ([]byte, error) {
	b.count("Get")
	data, err := b.Store.Get(ctx, k)
	b.mu.Lock()
	after := b.afterGet
	b.mu.Unlock()
	if after != nil {
		after(k)
	}
	return data, err
}
func (b *countBlobs) Delete(ctx context.Context, k string) error {
	b.count("Delete")
	return b.Store.Delete(ctx, k)
}
func (b *countBlobs) List(ctx context.Context, p string) ([]string, error) {
	b.count("List")
	return b.Store.List(ctx, p)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

type settingsT = settings.Settings

func wake(id string) queue.Message { return queue.Message{Kind: string(work.KindApply), ID: id} }
