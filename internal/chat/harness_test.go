package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// countingStore counts the store requests the runtime makes, and signals every
// commit (tests wait on it instead of sleeping).
type countingStore struct {
	store.Store

	mu        sync.Mutex
	counts    map[string]int
	summaries int // SetSummary ops committed
	changed   chan struct{}
}

func newCountingStore(s store.Store) *countingStore {
	return &countingStore{Store: s, counts: map[string]int{}, changed: make(chan struct{})}
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	c.counts[name]++
	c.mu.Unlock()
}

// snapshot returns the counts so far.
func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// changes returns a channel closed at the next commit.
func (c *countingStore) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *countingStore) Commit(ctx context.Context, ops ...work.Op) error {
	c.count("Commit")
	err := c.Store.Commit(ctx, ops...)
	c.mu.Lock()
	if err == nil {
		for _, op := range ops {
			if _, ok := op.(session.SetSummary); ok {
				c.summaries++
			}
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return err
}

// CommitEach is Commit for a batch (the executor's claims and final writes
// that land together): one signal after.
func (c *countingStore) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	c.count("CommitEach")
	errs := c.Store.CommitEach(ctx, cs...)
	c.mu.Lock()
	for k, ops := range cs {
		if errs[k] != nil {
			continue
		}
		for _, op := range ops {
			if _, ok := op.(session.SetSummary); ok {
				c.summaries++
			}
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return errs
}

func (c *countingStore) GetItem(ctx context.Context, k work.Kind, id string) (work.Item, error) {
	c.count("GetItem")
	return c.Store.GetItem(ctx, k, id)
}

func (c *countingStore) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	c.count("ListItems")
	return c.Store.ListItems(ctx, q)
}

func (c *countingStore) GetSession(ctx context.Context, id string) (session.Session, error) {
	c.count("GetSession")
	return c.Store.GetSession(ctx, id)
}

func (c *countingStore) ListMessages(ctx context.Context, id string, after, limit int) ([]session.Message, error) {
	c.count("ListMessages")
	return c.Store.ListMessages(ctx, id, after, limit)
}

func (c *countingStore) ListFiles(ctx context.Context, ws string) ([]workspace.File, error) {
	c.count("ListFiles")
	return c.Store.ListFiles(ctx, ws)
}

func (c *countingStore) ListSurface(ctx context.Context, ws string) (global, own []workspace.File, err error) {
	c.count("ListSurface")
	return c.Store.ListSurface(ctx, ws)
}

func (c *countingStore) TokenByHash(ctx context.Context, h string) (auth.Token, error) {
	c.count("TokenByHash")
	return c.Store.TokenByHash(ctx, h)
}

// ctlModel wraps a model with a hook that runs before each call (to block, fail
// or observe it) and counts calls.
type ctlModel struct {
	inner model.Model

	mu     sync.Mutex
	calls  int
	before func(ctx context.Context, n int, req model.Request) error
}

func (m *ctlModel) Name() string { return m.inner.Name() }

func (m *ctlModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	m.calls++
	n, before := m.calls, m.before
	m.mu.Unlock()
	if before != nil {
		if err := before(ctx, n, req); err != nil {
			return model.Response{}, err
		}
	}
	return m.inner.Generate(ctx, req)
}

func (m *ctlModel) setBefore(f func(ctx context.Context, n int, req model.Request) error) {
	m.mu.Lock()
	m.before = f
	m.mu.Unlock()
}

func (m *ctlModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// harness is an App on the local backend (SQLite file, in-process queues), a
// manual clock and a controllable model.
type harness struct {
	t     testing.TB
	app   *app.App
	store *countingStore
	clock *molt.ManualClock
	model *ctlModel
	ctx   context.Context
	// drainer, when set, replaces the in-process consumer of drain (the AWS
	// tests deliver through SQS and the Lambda handler).
	drainer func() []error
}

type options struct {
	model model.Model
	cfg   chat.Config
	tools []chat.Tool
	dir   string            // data directory; default a new temporary one
	clock *molt.ManualClock // default a new manual clock
}

func newHarness(t testing.TB, o options) *harness {
	t.Helper()
	clock := o.clock
	if clock == nil {
		clock = molt.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	ids := &molt.SortableIDs{Clock: clock}
	cfg := app.Config{Backend: app.BackendLocal, DataDir: o.dir, Chat: o.cfg}
	d, err := localbackend.Open(cfg, clock, ids)
	if err != nil {
		t.Fatalf("open local backend: %v", err)
	}
	cs := newCountingStore(d.Store)
	inner := o.model
	if inner == nil {
		inner = offline.New()
	}
	cm := &ctlModel{inner: inner}
	d.Store, d.Clock, d.IDs, d.Model = cs, clock, ids, cm
	a := app.New(cfg, d, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	// The turn alone: background naming (its own kind, tested in
	// internal/naming) is not asked for after these replies, so request
	// counts and title revisions are the turn's.
	a.Chat.HandleReplied(nil)
	t.Cleanup(func() { _ = a.Close() })
	for _, tool := range o.tools {
		if err := a.Chat.Tools().Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h := &harness{t: t, app: a, store: cs, clock: clock, model: cm, ctx: ctx}
	if _, _, err := cs.PutWorkspace(ctx, workspace.Workspace{Name: "acme", Description: "test"}); err != nil {
		t.Fatalf("put workspace: %v", err)
	}
	return h
}

// fullCaller is a caller with a full token.
var fullCaller = auth.Caller{Token: auth.Token{Level: auth.Full}}

// session opens a session of acme with the default agent.
func (h *harness) session() session.Session {
	h.t.Helper()
	ss, err := h.app.Chat.CreateSession(h.ctx, fullCaller, chat.NewSession{Workspace: "acme"})
	if err != nil {
		h.t.Fatalf("create session: %v", err)
	}
	return ss
}

// post posts text and returns the turn.
func (h *harness) post(sessionID, text string) work.Item {
	h.t.Helper()
	it, err := h.app.Chat.Post(h.ctx, fullCaller, sessionID, text)
	if err != nil {
		h.t.Fatalf("post %q: %v", text, err)
	}
	return it
}

// receive takes every visible turn wake-up off the in-process queue.
func (h *harness) receive() []queue.Delivery {
	h.t.Helper()
	rcv := h.app.Local.Receiver(string(work.KindTurn))
	var out []queue.Delivery
	for {
		ds, err := rcv.Receive(h.ctx, 10, 0)
		if err != nil {
			h.t.Fatalf("receive: %v", err)
		}
		if len(ds) == 0 {
			return out
		}
		for _, d := range ds {
			_ = rcv.Delete(h.ctx, d)
		}
		out = append(out, ds...)
	}
}

// drain is the consumer, run by hand: it handles wake-ups until none is left
// (handling may send more), and returns the handlers' errors.
func (h *harness) drain() []error {
	h.t.Helper()
	if h.drainer != nil {
		return h.drainer()
	}
	var errs []error
	for {
		ds := h.receive()
		if len(ds) == 0 {
			return errs
		}
		for _, d := range ds {
			if err := h.app.Chat.Handle(h.ctx, d.Message); err != nil {
				errs = append(errs, err)
			}
		}
	}
}

// mustDrain drains and fails on any handler error.
func (h *harness) mustDrain() {
	h.t.Helper()
	if errs := h.drain(); len(errs) > 0 {
		h.t.Fatalf("handler errors: %v", errs)
	}
}

// messages returns every message of a session.
func (h *harness) messages(sessionID string) []session.Message {
	h.t.Helper()
	msgs, err := h.store.ListMessages(h.ctx, sessionID, 0, 500)
	if err != nil {
		h.t.Fatalf("list messages: %v", err)
	}
	return msgs
}

// turn reads a turn and its data.
func (h *harness) turn(id string) (work.Item, chat.TurnData) {
	h.t.Helper()
	it, err := h.store.GetItem(h.ctx, work.KindTurn, id)
	if err != nil {
		h.t.Fatalf("get turn %s: %v", id, err)
	}
	d, err := chat.ParseTurnData(it.Data)
	if err != nil {
		h.t.Fatalf("turn data: %v", err)
	}
	return it, d
}

// tick runs one maintenance pass.
func (h *harness) tick() work.Result {
	h.t.Helper()
	res, err := h.app.Maintainer().RunOnce(h.ctx)
	if err != nil {
		h.t.Fatalf("tick: %v", err)
	}
	return res
}

// roles renders a log as "role:turn" lines for comparisons.
func roles(msgs []session.Message) string {
	var b []string
	for _, m := range msgs {
		b = append(b, m.Role)
	}
	return strings.Join(b, " ")
}

// waitFor waits until cond holds, re-checking at every commit.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		ch := h.store.changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// httpDo sends one request to a running server.
func httpDo(t testing.TB, method, url, token, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}
