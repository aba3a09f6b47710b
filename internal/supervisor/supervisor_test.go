package supervisor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/apptest"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// card is the path of the remote molt's card of acme's main agent.
const card = "/a2a/acme/main/.well-known/agent-card.json"

// remoteMolt runs a second molt (molt serve's wiring) on loopback with a
// workspace acme; it returns its base URL, a full token of it and its App.
func remoteMolt(t testing.TB) (base, token string, a *app.App) {
	t.Helper()
	return apptest.Remote(t, app.Config{DataDir: t.TempDir(), A2AWait: 5 * time.Second})
}

// faults is the supervisor's transport: it records every JSON-RPC call and
// can lose the answer of one method (the request reaches the remote) or fail
// one before it is sent.
type faults struct {
	mu     sync.Mutex
	lose   string // method whose answer is lost
	refuse string // method that never reaches the remote
	calls  []string
	down   bool                // every request fails before it is sent
	before func(method string) // called before a request is sent
	reject map[string]int      // method → a JSON-RPC error answered instead of the remote
	reqIDs map[string]int
	inner  http.RoundTripper
}

func (f *faults) RoundTrip(r *http.Request) (*http.Response, error) {
	var method string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(b, &msg)
		method = msg.Method
		for _, key := range []string{`"requestId":"`} {
			if i := strings.Index(string(msg.Params), key); i >= 0 && method != "campaign/getRequest" {
				rest := string(msg.Params)[i+len(key):]
				id := rest[:strings.Index(rest, `"`)]
				f.mu.Lock()
				f.reqIDs[id]++
				f.mu.Unlock()
			}
		}
	}
	f.mu.Lock()
	lose, refuse := f.lose == method && method != "", (f.refuse == method && method != "") || f.down
	code, rejected := f.reject[method]
	if rejected {
		f.mu.Unlock()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":%d,"message":"injected"}}`, code)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	if method != "" && !refuse {
		f.calls = append(f.calls, method)
	}
	f.mu.Unlock()
	if refuse {
		return nil, errors.New("injected: connection refused")
	}
	if f.before != nil {
		f.before(method)
	}
	resp, err := f.inner.RoundTrip(r)
	if lose && err == nil {
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, errors.New("injected: response lost")
	}
	return resp, err
}

func (f *faults) set(lose, refuse string) {
	f.mu.Lock()
	f.lose, f.refuse = lose, refuse
	f.mu.Unlock()
}

// setDown makes every call to the remote fail (down) or pass again.
func (f *faults) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *faults) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.calls {
		if m == method {
			n++
		}
	}
	return n
}

type env struct {
	t     testing.TB
	ctx   context.Context
	app   *app.App
	svc   *supervisor.Service
	f     *faults
	admin auth.Caller
	token string
	model *scripted
	// writes counts the store writes (commits) of the supervisor's protocol.
	writes *atomic.Int64
}

// countingBackend counts the commits (store writes) made through it.
type countingBackend struct {
	work.Backend
	commits atomic.Int64
}

func (b *countingBackend) Commit(ctx context.Context, ops ...work.Op) error {
	b.commits.Add(1)
	return b.Backend.Commit(ctx, ops...)
}

func (b *countingBackend) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	b.commits.Add(int64(len(cs)))
	return b.Backend.CommitEach(ctx, cs...)
}

// setup builds the supervising molt (its App on SQLite, no workers: passes
// are run by hand) with a workspace acme, calling remotes through faults.
// The token_ref env:SUP_TOKEN reads token.
func setup(t testing.TB, token string) *env {
	t.Helper()
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir()}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	d, err := localbackend.Open(cfg, clock, ids)
	if err != nil {
		t.Fatal(err)
	}
	d.Clock, d.IDs = clock, ids
	a := app.New(cfg, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { _ = a.Close() })
	if _, _, err := a.Store.PutWorkspace(context.Background(), workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	f := &faults{inner: http.DefaultTransport, reqIDs: map[string]int{}, reject: map[string]int{}}
	cb := &countingBackend{Backend: a.Protocol.Backend}
	proto := *a.Protocol
	proto.Backend = cb
	m := &scripted{inner: a.Model}
	svc := supervisor.New(supervisor.Deps{Store: a.Store, Protocol: &proto, Queue: a.Queue, Model: m,
		HTTP: &http.Client{Transport: f, Timeout: 10 * time.Second},
		Token: func(_ context.Context, ref string) (string, error) {
			if ref != "env:SUP_TOKEN" {
				return "", molt.Unavailable(nil, "no such token")
			}
			return token, nil
		}, Clock: clock, IDs: ids}, supervisor.Config{Tick: 2 * time.Second, CallTimeout: 5 * time.Second, RelayWait: 100 * time.Millisecond})
	return &env{t: t, ctx: context.Background(), app: a, svc: svc, f: f, token: token, model: m, writes: &cb.commits,
		admin: auth.Caller{Token: auth.Token{Level: auth.Full}}}
}

func (e *env) create(cardURL string, lease int) supervisor.Campaign {
	e.t.Helper()
	c, err := e.svc.Create(e.ctx, e.admin, supervisor.Input{Name: "c", Workspace: "acme",
		Remote: supervisor.Remote{CardURL: cardURL, TokenRef: "env:SUP_TOKEN"}, Mission: "say hello",
		HeartbeatSeconds: 1, LeaseSeconds: lease})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// pass runs one heartbeat of campaign id and returns it as stored after.
func (e *env) pass(id string) supervisor.Campaign {
	e.t.Helper()
	if err := e.svc.Handle(e.ctx, queue.Message{Kind: string(supervisor.KindCampaign), ID: id}); err != nil {
		e.t.Fatalf("pass: %v", err)
	}
	c, err := e.svc.Get(e.ctx, e.admin, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) events(id string) map[string]int {
	e.t.Helper()
	evs, err := e.svc.Events(e.ctx, e.admin, id, 0, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	n := map[string]int{}
	for i, ev := range evs {
		if ev.Seq != i+1 {
			e.t.Errorf("event %d has seq %d", i+1, ev.Seq)
		}
		n[ev.Type]++
	}
	return n
}

// escalations counts campaign id's BLOCKED events that record an escalation.
func (e *env) escalations(id string) int {
	e.t.Helper()
	evs, err := e.svc.Events(e.ctx, e.admin, id, 0, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == supervisor.EventBlocked && strings.HasPrefix(ev.Detail, "escalated: ") {
			n++
		}
	}
	return n
}

// noToken checks that the remote's token is nowhere in the supervisor's store.
func (e *env) noToken() {
	e.t.Helper()
	for _, k := range []work.Kind{supervisor.KindCampaign, supervisor.KindEvent, supervisor.KindDecision} {
		pg, err := e.app.Store.ListItems(e.ctx, work.ListQuery{Kind: k})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, it := range pg.Items {
			if strings.Contains(string(it.Data), e.token) {
				e.t.Errorf("%s %s holds the remote's token", k, it.ID)
			}
		}
	}
	for _, text := range e.model.texts() {
		if strings.Contains(text, e.token) || strings.Contains(text, "SUP_TOKEN") {
			e.t.Errorf("a decision's prompt holds the remote's token or its token_ref")
		}
	}
}

func TestClaimSubmitCompleteRelease(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	if c.Controller != "molt-local" || c.MaxAttempts != 3 || c.Mode != supervisor.ModeObserver {
		t.Errorf("defaults: controller %q, max attempts %d, mode %s", c.Controller, c.MaxAttempts, c.Mode)
	}
	c = e.pass(c.ID)
	if c.Capabilities == nil || !c.Capabilities.Control {
		t.Fatalf("capabilities %+v, want control", c.Capabilities)
	}
	if _, err := e.svc.Submit(e.ctx, e.admin, c.ID, "hi"); molt.ErrorReason(err) != supervisor.ReasonNotController {
		t.Errorf("submit as observer: %v, want %s", err, supervisor.ReasonNotController)
	}
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	c = e.pass(c.ID)
	if c.Mode != supervisor.ModeController || c.Epoch != 1 || !c.LeaseExpiresAt.After(time.Now()) {
		t.Fatalf("after claim: mode %s epoch %d lease %v", c.Mode, c.Epoch, c.LeaseExpiresAt)
	}
	if _, err := e.svc.Submit(e.ctx, e.admin, c.ID, "hello there"); err != nil {
		t.Fatal(err)
	}
	c = e.pass(c.ID)
	if c.TaskID == "" || c.AttemptsUsed != 1 {
		t.Fatalf("after submit: task %q attempts %d intents %+v", c.TaskID, c.AttemptsUsed, c.Intents)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.State != supervisor.StateCompleted && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		c = e.pass(c.ID)
	}
	if c.State != supervisor.StateCompleted {
		t.Fatalf("state %s (task %s), want completed", c.State, c.TaskState)
	}
	c = e.pass(c.ID) // nothing new
	if n := e.events(c.ID); n[supervisor.EventAttemptCompleted] != 1 || n[supervisor.EventMissionCompleted] != 0 {
		t.Errorf("events %v before the decisions ran: want one ATTEMPT_COMPLETED and no MISSION_COMPLETED", n)
	}
	// The completed attempt's decision: finish proposed, approved, relayed;
	// the next pass completes the mission.
	e.decide()
	c = e.pass(c.ID)
	e.decide()
	c = e.pass(c.ID) // nothing new
	if c.State != supervisor.StateFinished {
		t.Errorf("state %s after the decisions, want finished", c.State)
	}
	n := e.events(c.ID)
	if n[supervisor.EventAttemptCompleted] != 1 || n[supervisor.EventMissionCompleted] != 1 || n[supervisor.EventControlChanged] != 1 {
		t.Errorf("events %v: want one ATTEMPT_COMPLETED, one MISSION_COMPLETED, one CONTROL_CHANGED", n)
	}
	if err := e.svc.Delete(e.ctx, e.admin, c.ID); molt.ErrorReason(err) != supervisor.ReasonReleaseFirst {
		t.Errorf("delete while holding the lease: %v, want %s", err, supervisor.ReasonReleaseFirst)
	}
	e.finishDecided(c)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "release"); err != nil {
		t.Fatal(err)
	}
	c = e.pass(c.ID)
	if c.Mode != supervisor.ModeObserver {
		t.Errorf("after release: mode %s", c.Mode)
	}
	if got := e.events(c.ID)[supervisor.EventControlChanged]; got != 2 {
		t.Errorf("CONTROL_CHANGED events %d after the release, want 2", got)
	}
	if n := e.f.count("SendMessage"); n != 1 {
		t.Errorf("SendMessage sent %d times, want 1", n)
	}
	e.noToken()
	if b, _ := json.Marshal(c); strings.Contains(string(b), token) {
		t.Errorf("the campaign as the API shows it holds the remote's token")
	}
	if err := e.svc.Delete(e.ctx, e.admin, c.ID); err != nil {
		t.Errorf("delete after the release: %v", err)
	}
	if _, err := e.svc.Get(e.ctx, e.admin, c.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Errorf("get after delete: %v, want not found", err)
	}
}

func TestNoExtensionObserverOnly(t *testing.T) {
	t.Parallel()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			b, _ := io.ReadAll(r.Body)
			if bytes.Contains(b, []byte("campaign/")) || r.Header.Get("A2A-Extensions") != "" {
				t.Errorf("an observer of a remote without the extension sent %s", b)
			}
			task := `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}`
			if bytes.Contains(b, []byte(`"ListTasks"`)) {
				task = `{"tasks":[` + task + `]}`
			}
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":`+task+`}`)
			return
		}
		_, _ = io.WriteString(w, `{"name":"plain","supportedInterfaces":[{"url":"`+srv.URL+`/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],`+
			`"capabilities":{"extensions":[]},"skills":[{"id":"x","description":"campaign control with leases and epochs"}]}`)
	}))
	defer srv.Close()
	e := setup(t, "tok")
	c := e.create(srv.URL+"/card", 600)
	c = e.pass(c.ID)
	if c.Capabilities == nil || c.Capabilities.Control || len(c.Capabilities.Missing) == 0 {
		t.Fatalf("capabilities %+v, want no control", c.Capabilities)
	}
	_, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim")
	if molt.ErrorReason(err) != supervisor.ReasonControlUnsupported || !strings.Contains(err.Error(), "campaign-control") {
		t.Errorf("claim: %v, want %s naming the extension", err, supervisor.ReasonControlUnsupported)
	}
	if c.Mode != supervisor.ModeObserver {
		t.Errorf("mode %s", c.Mode)
	}
	// It observes with the standard reads: the remote's newest task ended.
	if c.TaskID != "t1" || c.State != supervisor.StateCompleted {
		t.Errorf("observed task %q state %s, want t1 completed", c.TaskID, c.State)
	}
	e.pass(c.ID)
	if n := e.events(c.ID); n[supervisor.EventAttemptCompleted] != 1 || n[supervisor.EventControlChanged] != 0 {
		t.Errorf("events %v, want one ATTEMPT_COMPLETED and no CONTROL_CHANGED", n)
	}
}

func TestLostSubmitReconciledNeverResent(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	e.pass(c.ID)
	if _, err := e.svc.Submit(e.ctx, e.admin, c.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	e.f.set("SendMessage", "")
	c = e.pass(c.ID)
	open := c.OpenIntents()
	if len(open) != 1 || open[0].Status != supervisor.IntentUnknown || open[0].Method != "SendMessage" {
		t.Fatalf("open intents %+v, want the send unknown", open)
	}
	// The readback cannot be made: the intent stays unknown, writes wait.
	e.f.set("", "campaign/getRequest")
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "release"); err != nil {
		t.Fatal(err)
	}
	c = e.pass(c.ID)
	if len(c.OpenIntents()) != 1 || len(c.Requests) != 1 || c.Mode != supervisor.ModeController {
		t.Fatalf("blocked pass: open %+v, requests %+v, mode %s", c.OpenIntents(), c.Requests, c.Mode)
	}
	if n := e.f.count("campaign/release"); n != 0 {
		t.Errorf("release sent %d times while an intent was unknown", n)
	}
	e.f.set("", "")
	c = e.pass(c.ID)
	if len(c.OpenIntents()) != 0 || c.TaskID == "" {
		t.Fatalf("after reconciliation: open %+v, task %q", c.OpenIntents(), c.TaskID)
	}
	if c.Mode != supervisor.ModeObserver {
		t.Errorf("the queued release was not carried out after reconciliation: mode %s", c.Mode)
	}
	if n := e.f.count("SendMessage"); n != 1 {
		t.Errorf("SendMessage sent %d times, want 1 (never resent)", n)
	}
	for id, n := range e.f.reqIDs {
		if n != 1 {
			t.Errorf("request id %s sent %d times", id, n)
		}
	}
}

func TestLeaseTakenByAnotherController(t *testing.T) {
	t.Parallel()
	base, token, remoteApp := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 1)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	if c = e.pass(c.ID); c.Mode != supervisor.ModeController {
		t.Fatalf("mode %s after claim", c.Mode)
	}
	time.Sleep(1200 * time.Millisecond) // the remote lease expires
	claimAs(t, base, remoteApp, c.ID, "intruder", 2)
	c = e.pass(c.ID)
	c = e.pass(c.ID)
	if c.Mode != supervisor.ModeObserver {
		t.Errorf("mode %s, want observer", c.Mode)
	}
	if got := e.events(c.ID)[supervisor.EventControlChanged]; got != 2 {
		t.Errorf("CONTROL_CHANGED %d, want 2 (claimed, then lost once)", got)
	}
	if c.Readback == nil || c.Readback.Controller != "intruder" {
		t.Errorf("readback %+v", c.Readback)
	}
}

// claimAs claims campaign id on the remote molt as controller, with a token
// of its own, and checks the lease's epoch is epoch.
func claimAs(t testing.TB, base string, remoteApp *app.App, id, controller string, epoch int) {
	t.Helper()
	other, _, err := remoteApp.CreateToken(context.Background(), auth.Full, "", "other")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"campaign/claim","params":{"campaignId":"` + id +
		`","controller":"` + controller + `","requestId":"x1","leaseSeconds":600}}`
	req, _ := http.NewRequest("POST", base+"/a2a/acme/main", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("A2A-Extensions", "https://github.com/molt-dev/molt/a2a/ext/campaign-control/v1")
	req.Header.Set("Authorization", "Bearer "+other)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), fmt.Sprintf(`"epoch":%d`, epoch)) {
		t.Fatalf("%s's claim: %s", controller, b)
	}
}

// TestIdleHeartbeatReadsOnceWritesNothing: a heartbeat of a controlled
// campaign where nothing happened is one campaign/get and no store write; a
// change on the remote (another controller, for an observer) is still seen
// and recorded by the next heartbeat.
func TestIdleHeartbeatReadsOnceWritesNothing(t *testing.T) {
	t.Parallel()
	base, token, remoteApp := remoteMolt(t)
	e := setup(t, token)
	cardURL := base + card
	c := e.create(cardURL, 600)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	if c = e.pass(c.ID); c.Mode != supervisor.ModeController {
		t.Fatalf("mode %s after claim", c.Mode)
	}
	e.pass(c.ID)
	gets, writes := e.f.count("campaign/get"), e.writes.Load()
	e.f.mu.Lock()
	calls := len(e.f.calls)
	e.f.mu.Unlock()
	for range 3 {
		e.pass(c.ID)
	}
	e.f.mu.Lock()
	calls = len(e.f.calls) - calls
	e.f.mu.Unlock()
	if got := e.f.count("campaign/get") - gets; got != 3 || calls != 3 {
		t.Errorf("three idle heartbeats made %d remote calls, %d of them campaign/get; want 3 readbacks only", calls, got)
	}
	if got := e.writes.Load() - writes; got != 0 {
		t.Errorf("three idle heartbeats made %d store writes, want 0", got)
	}

	// An observer of a second campaign sees another controller take it.
	o := e.create(cardURL, 600)
	e.pass(o.ID)
	e.pass(o.ID)
	claimAs(t, base, remoteApp, o.ID, "intruder", 1)
	if o = e.pass(o.ID); o.Readback == nil || o.Readback.Controller != "intruder" || o.Readback.Epoch != 1 {
		t.Errorf("after another controller's claim the observer's readback is %+v", o.Readback)
	}
}

func TestRenewalRefused(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 4)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	if c = e.pass(c.ID); c.Mode != supervisor.ModeController {
		t.Fatalf("mode %s after claim", c.Mode)
	}
	time.Sleep(2100 * time.Millisecond) // under half the lease left: the next pass renews
	e.f.mu.Lock()
	e.f.reject["campaign/renew"] = -32012
	e.f.mu.Unlock()
	c = e.pass(c.ID)
	if c.Mode != supervisor.ModeObserver {
		t.Fatalf("mode %s after a refused renewal, want observer", c.Mode)
	}
	e.pass(c.ID)
	if got := e.events(c.ID)[supervisor.EventControlChanged]; got != 2 {
		t.Errorf("CONTROL_CHANGED %d, want 2 (claimed, then the refused renewal once)", got)
	}
	if n := e.f.count("campaign/claim"); n != 1 {
		t.Errorf("campaign/claim sent %d times: control is never claimed again without a request", n)
	}
}

func TestRemoteDownOnceThenRecovers(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	e.f.setDown(true)
	e.pass(c.ID)
	c = e.pass(c.ID)
	if c.Unavailable == "" {
		t.Errorf("the remote is down but the campaign does not say so")
	}
	if got := e.events(c.ID)[supervisor.EventRemoteUnavailable]; got != 1 {
		t.Errorf("REMOTE_UNAVAILABLE %d over two passes, want 1", got)
	}
	e.f.setDown(false)
	if c = e.pass(c.ID); c.Unavailable != "" || c.Capabilities == nil || !c.Capabilities.Control {
		t.Errorf("after recovery: unavailable %q, capabilities %+v", c.Unavailable, c.Capabilities)
	}
}

// TestEscalationWhileRemoteDown: the remote is down, its REMOTE_UNAVAILABLE's
// decision escalates, and the next pass (the remote still down) records the
// escalation for a person: it does not wait for the remote to come back.
func TestEscalationWhileRemoteDown(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	e.f.setDown(true)
	e.pass(c.ID)
	e.model.script(`{"action":"escalate","reason":"the remote is down"}`)
	e.decide()
	c = e.pass(c.ID)
	if len(c.Requests) != 0 {
		t.Errorf("requests left after the pass: %+v", c.Requests)
	}
	if n := e.escalations(c.ID); n != 1 {
		t.Errorf("%d BLOCKED escalations, want one while the remote is down", n)
	}
}

// TestDecisionWaitsOutBusyCampaign: a decision whose campaign stays held by
// a pass through more attempts than its policy allows is given back each time
// without spending them, and relays once the campaign is free.
func TestDecisionWaitsOutBusyCampaign(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	e.f.setDown(true)
	e.pass(c.ID) // REMOTE_UNAVAILABLE: a decision
	e.model.script(`{"action":"escalate","reason":"the remote is down"}`)
	id := supervisor.DecisionID(c.ID, 1)
	it, err := e.app.Store.GetItem(e.ctx, supervisor.KindCampaign, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	held, _, err := e.app.Protocol.Claim(e.ctx, supervisor.KindCampaign, c.ID, it.Attempts, 0)
	if err != nil {
		t.Fatal(err)
	}
	pol := e.svc.Decider().Policy()
	for range pol.MaxAttempts + 2 {
		if err := e.svc.Decider().Handle(e.ctx, queue.Message{Kind: string(supervisor.KindDecision), ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := e.app.Store.GetItem(e.ctx, supervisor.KindDecision, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != work.StatusPending || d.Used() != 0 || d.Reason != supervisor.ReasonBusy {
		t.Fatalf("decision while its campaign is held: %s used %d reason %q, want pending, none used, %s",
			d.Status, d.Used(), d.Reason, supervisor.ReasonBusy)
	}
	if _, err := e.app.Protocol.Transition(e.ctx, held, work.Transition{To: work.StatusPending}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Decider().Handle(e.ctx, queue.Message{Kind: string(supervisor.KindDecision), ID: id}); err != nil {
		t.Fatal(err)
	}
	if d, _ = e.app.Store.GetItem(e.ctx, supervisor.KindDecision, id); d.Status != supervisor.DecisionEscalated {
		t.Fatalf("decision after the campaign was freed: %s %q, want escalated", d.Status, d.Reason)
	}
	if c, _ = e.svc.Get(e.ctx, e.admin, c.ID); len(c.Requests) != 1 || c.Requests[0].Decision != id {
		t.Errorf("campaign requests %+v, want the escalation relayed once", c.Requests)
	}
}

// TestEventPages: events come in pages of at most limit seqs, each page one
// bounded read, skipping expired events, with where the next page starts.
func TestEventPages(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	for _, action := range []string{"claim", "release", "claim"} {
		if _, err := e.svc.Control(e.ctx, e.admin, c.ID, action); err != nil {
			t.Fatal(err)
		}
		e.pass(c.ID)
	}
	seqs := func(evs []supervisor.Event) []int {
		var out []int
		for _, ev := range evs {
			out = append(out, ev.Seq)
		}
		return out
	}
	page := func(after, limit int) ([]int, int) {
		t.Helper()
		evs, next, err := e.svc.EventPage(e.ctx, e.admin, c.ID, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return seqs(evs), next
	}
	if got, next := page(0, 2); !slices.Equal(got, []int{1, 2}) || next != 2 {
		t.Fatalf("first page %v next %d, want [1 2] and 2", got, next)
	}
	if got, next := page(2, 2); !slices.Equal(got, []int{3}) || next != 0 {
		t.Fatalf("second page %v next %d, want [3] and none", got, next)
	}
	// An expired event is skipped, the page still ends where it did.
	if err := e.app.Protocol.Delete(e.ctx, supervisor.KindEvent, supervisor.EventID(c.ID, 2), []work.Status{supervisor.StatusRecorded}, 0); err != nil {
		t.Fatal(err)
	}
	if got, next := page(0, 2); !slices.Equal(got, []int{1}) || next != 2 {
		t.Fatalf("page with an expired event %v next %d, want [1] and 2", got, next)
	}
}

func TestOverlappingTicksRunOnePass(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c, err := e.svc.Create(e.ctx, e.admin, supervisor.Input{Name: "c", Workspace: "acme",
		Remote:  supervisor.Remote{CardURL: base + card, TokenRef: "env:SUP_TOKEN"},
		Mission: "m", HeartbeatSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := e.svc.Handle(e.ctx, queue.Message{Kind: string(supervisor.KindCampaign), ID: c.ID}); err != nil {
				t.Errorf("pass: %v", err)
			}
		})
	}
	wg.Wait()
	if n := e.f.count("campaign/get"); n != 1 {
		t.Errorf("campaign/get read %d times by four overlapping wake-ups, want 1 (one pass)", n)
	}
}

// TestRestartMidPass: the pass's claim ends (its process died) after it saved
// the send's intent and before its final write. The next pass writes the
// events the checkpoint carried, once, and reconciles the send, never sending
// it again.
func TestRestartMidPass(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Submit(e.ctx, e.admin, c.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	e.f.before = func(method string) {
		if method != "SendMessage" {
			return
		}
		it, err := e.app.Store.GetItem(e.ctx, supervisor.KindCampaign, c.ID)
		if err != nil || !it.Active {
			t.Errorf("campaign during the send: active %v, %v", it.Active, err)
			return
		}
		if _, err := e.app.Protocol.Cancel(e.ctx, it, work.StatusPending, "process died"); err != nil {
			t.Errorf("end the claim: %v", err)
		}
	}
	c = e.pass(c.ID)
	e.f.before = nil
	if open := c.OpenIntents(); len(open) != 1 || open[0].Method != "SendMessage" || len(c.Outbox) != 1 {
		t.Fatalf("after the dead pass: open intents %+v, outbox %+v; want the send pending, the claim's event waiting", open, c.Outbox)
	}
	if n := e.events(c.ID); len(n) != 0 {
		t.Fatalf("events %v written by a pass that never made its final write", n)
	}
	c = e.pass(c.ID)
	if len(c.OpenIntents()) != 0 || c.TaskID == "" || c.Mode != supervisor.ModeController {
		t.Fatalf("after the next pass: open %+v, task %q, mode %s", c.OpenIntents(), c.TaskID, c.Mode)
	}
	e.pass(c.ID)
	if got := e.events(c.ID)[supervisor.EventControlChanged]; got != 1 {
		t.Errorf("CONTROL_CHANGED %d, want exactly 1 (the claim's, carried by the checkpoint)", got)
	}
	if n := e.f.count("SendMessage"); n != 1 {
		t.Errorf("SendMessage sent %d times, want 1", n)
	}
}

// BenchmarkIdleHeartbeat is one heartbeat of an idle campaign held under
// control: its remote calls and store writes per heartbeat (the goal: one
// readback and no write).
func BenchmarkIdleHeartbeat(b *testing.B) {
	base, token, _ := remoteMolt(b)
	e := setup(b, token)
	c := e.create(base+card, 600)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		b.Fatal(err)
	}
	e.pass(c.ID)
	e.f.mu.Lock()
	before := len(e.f.calls)
	e.f.mu.Unlock()
	writes := e.writes.Load()
	b.ResetTimer()
	for b.Loop() {
		e.pass(c.ID)
	}
	b.StopTimer()
	e.f.mu.Lock()
	calls := len(e.f.calls) - before
	e.f.mu.Unlock()
	b.ReportMetric(float64(calls)/float64(b.N), "remote_calls/op")
	b.ReportMetric(float64(e.writes.Load()-writes)/float64(b.N), "store_writes/op")
}

// racyStore is the supervisor's store with one trap: armed, the next read of
// a campaign runs queue (a person's request) right after reading, so the
// caller holds the campaign as it was before the request.
type racyStore struct {
	store.Store
	mu    sync.Mutex
	queue func()
}

func (r *racyStore) GetItem(ctx context.Context, kind work.Kind, id string) (work.Item, error) {
	it, err := r.Store.GetItem(ctx, kind, id)
	r.mu.Lock()
	q := r.queue
	if kind == supervisor.KindCampaign {
		r.queue = nil
	}
	r.mu.Unlock()
	if q != nil && kind == supervisor.KindCampaign {
		q()
	}
	return it, err
}

// TestRequestQueuedBeforeClaimKept: a request queued between the wake-up's
// read of the campaign and the pass's claim (which is conditional on the
// status and attempts, not on the data) is carried out, not overwritten by
// the pass's final write.
func TestRequestQueuedBeforeClaimKept(t *testing.T) {
	t.Parallel()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	racy := &racyStore{Store: e.app.Store}
	svc := supervisor.New(supervisor.Deps{Store: racy, Protocol: &work.Protocol{Backend: racy, Clock: molt.SystemClock{}, IDs: e.app.IDs},
		Queue: e.app.Queue, HTTP: &http.Client{Transport: e.f}, Model: e.model,
		Token: func(context.Context, string) (string, error) { return token, nil }}, supervisor.Config{Tick: 2 * time.Second})
	e.svc = svc
	c := e.create(base+card, 600)
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	// The claim's pass (due: a request is queued) is the one raced: an idle
	// heartbeat would not claim at all.
	racy.mu.Lock()
	racy.queue = func() {
		if _, err := svc.Submit(e.ctx, e.admin, c.ID, "queued before the claim"); err != nil {
			t.Errorf("submit: %v", err)
		}
	}
	racy.mu.Unlock()
	c = e.pass(c.ID)
	if n := e.f.count("SendMessage"); n != 1 || c.AttemptsUsed != 1 || len(c.Requests) != 0 {
		t.Errorf("SendMessage sent %d times, attempts %d, requests %+v: the request queued before the claim was lost", n, c.AttemptsUsed, c.Requests)
	}
}
