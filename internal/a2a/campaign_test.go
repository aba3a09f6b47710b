package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/a2a"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
)

// call sends one v1.0 JSON-RPC request with token; ext activates the
// campaign-control extension.
func (e *env) call(token string, ext bool, method string, params any) rpcResp {
	e.t.Helper()
	p, _ := json.Marshal(params)
	hdr := map[string]string{"A2A-Version": "1.0"}
	if ext {
		hdr["A2A-Extensions"] = "https://example.com/other/v1, " + a2a.ExtCampaign
	}
	st, b := e.do("POST", "/a2a/acme/main", token, hdr, `{"jsonrpc":"2.0","id":"1","method":"`+method+`","params":`+string(p)+`}`)
	if st != 200 {
		e.t.Fatalf("POST %s: %d %s", method, st, b)
	}
	var r rpcResp
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatalf("response %s: %v", b, err)
	}
	return r
}

func (e *env) token(level auth.Level) string {
	e.t.Helper()
	s, _, err := e.app.CreateToken(context.Background(), level, "acme", "t")
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func wantCode(t *testing.T, what string, r rpcResp, code int) {
	t.Helper()
	if r.Error == nil || r.Error.Code != code {
		t.Errorf("%s: error %+v (result %s), want code %d", what, r.Error, r.Result, code)
	}
}

func wantOK(t *testing.T, what string, r rpcResp) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("%s: %+v", what, r.Error)
	}
}

type leaseRes struct {
	Epoch          int
	LeaseExpiresAt string
	Controller     string
	State          string
}

func decode[T any](t *testing.T, r rpcResp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return v
}

func control(campaign, controller string, epoch int, requestID string, policy any) map[string]any {
	m := map[string]any{"campaignId": campaign, "controller": controller, "epoch": epoch, "requestId": requestID}
	if policy != nil {
		m["policy"] = policy
	}
	return map[string]any{a2a.ExtCampaign: m}
}

func TestCampaignCardAndActivation(t *testing.T) {
	e := setup(t)
	_, b := e.do("GET", "/a2a/acme/main/.well-known/agent-card.json", "", map[string]string{"A2A-Version": "1.0"}, "")
	var card struct {
		Capabilities struct {
			Extensions []struct {
				URI    string
				Params struct{ Methods []string }
			}
		}
	}
	_ = json.Unmarshal(b, &card)
	if len(card.Capabilities.Extensions) != 1 || card.Capabilities.Extensions[0].URI != a2a.ExtCampaign ||
		len(card.Capabilities.Extensions[0].Params.Methods) != 5 {
		t.Errorf("card extensions: %s", b)
	}
	claim := map[string]any{"campaignId": "c1", "controller": "sup", "requestId": "q1"}
	for _, m := range []string{"campaign/claim", "campaign/renew", "campaign/release", "campaign/get", "campaign/getRequest"} {
		wantCode(t, m+" without A2A-Extensions", e.call(e.admin, false, m, claim), -32008)
	}
	wantCode(t, "SendMessage with the extension's metadata, not activated", e.call(e.admin, false, "SendMessage",
		map[string]any{"message": userMsg("x", nil), "metadata": control("c1", "sup", 1, "q2", nil)}), -32008)
	wantCode(t, "CancelTask with the extension's metadata, not activated", e.call(e.admin, false, "CancelTask",
		map[string]any{"id": "t", "metadata": control("c1", "sup", 1, "q3", nil)}), -32008)
	// The v0.3 names reach the same methods.
	wantCode(t, "campaign/get over v0.3 on an unknown campaign", func() rpcResp {
		st, b := e.do("POST", "/a2a/acme/main", e.admin, map[string]string{"A2A-Extensions": a2a.ExtCampaign},
			`{"jsonrpc":"2.0","id":1,"method":"campaign/get","params":{"campaignId":"none"}}`)
		var r rpcResp
		if st != 200 || json.Unmarshal(b, &r) != nil {
			t.Fatalf("v0.3 campaign/get: %d %s", st, b)
		}
		return r
	}(), -32016)
	readonly := e.token(auth.Readonly)
	wantCode(t, "claim with a readonly token", func() rpcResp {
		st, b := e.do("POST", "/a2a/acme/main", readonly, map[string]string{"A2A-Version": "1.0", "A2A-Extensions": a2a.ExtCampaign},
			`{"jsonrpc":"2.0","id":1,"method":"campaign/claim","params":{"campaignId":"c1","controller":"sup","requestId":"q9"}}`)
		var r rpcResp
		_ = json.Unmarshal(b, &r)
		if st != 403 {
			t.Errorf("readonly claim: HTTP %d, want 403", st)
		}
		return r
	}(), -32600)
}

// TestCampaignLease: claim, a refused claim of another controller, renew,
// release, a takeover after expiry (epoch+1), and every refusal of a control
// write by its code.
func TestCampaignLease(t *testing.T) {
	clock := molt.NewManualClock(time.Now())
	e := setupOn(t, clock, nil)
	a, b := e.admin, e.token(auth.Workspace)

	r := e.call(a, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-a", "leaseSeconds": 30, "requestId": "a-1"})
	wantOK(t, "claim", r)
	got := decode[leaseRes](t, r)
	if got.Epoch != 1 || got.State != "held" {
		t.Fatalf("claim: %s", r.Result)
	}
	first := string(r.Result)
	wantCode(t, "claim of another controller while the lease is live",
		e.call(b, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-b", "requestId": "b-1"}), -32015)
	wantCode(t, "claim under the controller's name from another token while the lease is live",
		e.call(b, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-a", "requestId": "b-1b"}), -32015)
	wantCode(t, "renew by another controller",
		e.call(b, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-b", "epoch": 1, "requestId": "b-2"}), -32012)
	wantCode(t, "renew by the controller's name from another token",
		e.call(b, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-a", "epoch": 1, "requestId": "b-3"}), -32012)
	wantCode(t, "renew at a stale epoch",
		e.call(a, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-a", "epoch": 0, "requestId": "a-2"}), -32010)
	// A refusal is recorded under its requestId: the readback reports it,
	// and a repeat (even one that would now pass) gets the same refusal.
	r = e.call(a, true, "campaign/getRequest", map[string]any{"requestId": "a-2"})
	if got := decode[struct {
		Seen  bool
		Error *struct{ Code int }
	}](t, r); r.Error != nil || !got.Seen || got.Error == nil || got.Error.Code != -32010 {
		t.Errorf("getRequest of a refused renew: %s %+v, want seen with error -32010", r.Result, r.Error)
	}
	wantCode(t, "a refused requestId repeated",
		e.call(a, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-a", "epoch": 1, "requestId": "a-2"}), -32010)

	// A repeated requestId answers the original result and does nothing twice.
	clock.Advance(10 * time.Second)
	r = e.call(a, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-a", "leaseSeconds": 30, "requestId": "a-1"})
	if r.Error != nil || string(r.Result) != first {
		t.Errorf("repeated claim: %s %+v, want the original %s", r.Result, r.Error, first)
	}
	wantCode(t, "a requestId reused for another method",
		e.call(a, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-a", "epoch": 1, "requestId": "a-1"}), -32017)

	r = e.call(a, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-a", "epoch": 1, "leaseSeconds": 60, "requestId": "a-3"})
	wantOK(t, "renew", r)
	if got := decode[leaseRes](t, r); got.Epoch != 1 || got.LeaseExpiresAt <= decode[leaseRes](t, rpcResp{Result: json.RawMessage(first)}).LeaseExpiresAt {
		t.Errorf("renew: %s, want epoch 1 and a later expiry than %s", r.Result, first)
	}

	// The lease expires: the controller's writes are refused, another may claim.
	clock.Advance(61 * time.Second)
	wantCode(t, "send after the lease expired", e.call(a, true, "SendMessage",
		map[string]any{"message": userMsg("late", nil), "metadata": control("c1", "sup-a", 1, "a-4", nil)}), -32011)
	wantCode(t, "renew after the lease expired",
		e.call(a, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup-a", "epoch": 1, "requestId": "a-5"}), -32011)
	r = e.call(b, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-b", "requestId": "b-4"})
	wantOK(t, "claim after expiry", r)
	if got := decode[leaseRes](t, r); got.Epoch != 2 || got.Controller != "sup-b" {
		t.Errorf("claim after expiry: %s, want epoch 2 for sup-b", r.Result)
	}
	wantCode(t, "old controller's send", e.call(a, true, "SendMessage",
		map[string]any{"message": userMsg("x", nil), "metadata": control("c1", "sup-a", 1, "a-6", nil)}), -32012)
	wantCode(t, "new controller's send at the old epoch", e.call(b, true, "SendMessage",
		map[string]any{"message": userMsg("x", nil), "metadata": control("c1", "sup-b", 1, "b-5", nil)}), -32010)
	for _, pol := range []any{map[string]any{"access": "full"}, map[string]any{"autoApply": true}, map[string]any{"budget": 3}} {
		wantCode(t, "send with a policy molt cannot enforce", e.call(b, true, "SendMessage",
			map[string]any{"message": userMsg("x", nil), "metadata": control("c1", "sup-b", 2, "b-6", pol)}), -32013)
	}
	wantCode(t, "claim with a policy molt cannot enforce",
		e.call(b, true, "campaign/claim", map[string]any{"campaignId": "c2", "controller": "sup-b", "requestId": "b-7", "policy": map[string]any{"access": "full"}}), -32013)

	r = e.call(b, true, "campaign/release", map[string]any{"campaignId": "c1", "controller": "sup-b", "epoch": 2, "requestId": "b-8"})
	wantOK(t, "release", r)
	wantCode(t, "send after release", e.call(b, true, "SendMessage",
		map[string]any{"message": userMsg("x", nil), "metadata": control("c1", "sup-b", 2, "b-9", nil)}), -32011)
	r = e.call(a, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-a", "requestId": "a-7"})
	if got := decode[leaseRes](t, r); r.Error != nil || got.Epoch != 3 {
		t.Errorf("claim after release: %s %+v, want epoch 3", r.Result, r.Error)
	}
	r = e.call(b, true, "campaign/get", map[string]any{"campaignId": "c1"})
	var g struct {
		Controller string
		Epoch      int
		State      string
		Policy     a2a.Policy
	}
	_ = json.Unmarshal(r.Result, &g)
	if r.Error != nil || g.Controller != "sup-a" || g.Epoch != 3 || g.State != "held" || g.Policy.Access != "workspace" {
		t.Errorf("campaign/get: %s %+v", r.Result, r.Error)
	}
	// getRequest: what molt saw.
	r = e.call(a, true, "campaign/getRequest", map[string]any{"requestId": "a-3"})
	var q struct {
		Seen   bool
		Method string
		State  string
	}
	_ = json.Unmarshal(r.Result, &q)
	if r.Error != nil || !q.Seen || q.Method != "campaign/renew" || q.State != "done" {
		t.Errorf("getRequest a-3: %s %+v", r.Result, r.Error)
	}
	r = e.call(a, true, "campaign/getRequest", map[string]any{"requestId": "never-sent"})
	_ = json.Unmarshal(r.Result, &q)
	if r.Error != nil || q.Seen {
		t.Errorf("getRequest of an unseen id: %s %+v", r.Result, r.Error)
	}
}

// TestCampaignControlWrites: a send runs in the campaign's context with
// workspace access; a second send while its task works is refused; a
// repeated requestId answers the first task and starts none; a cancel under
// the extension ends the task; get lists the tasks with their states.
func TestCampaignControlWrites(t *testing.T) {
	hold := make(chan struct{})
	started := make(chan string, 4)
	var once sync.Once
	e := setupWith(t, func(tc chat.TurnContext) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		started <- tc.Turn.ID
		<-hold
		return errors.New("held")
	})
	defer close(hold)
	a := e.admin
	wantOK(t, "claim", e.call(a, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup", "requestId": "r1"}))
	send := func(req, text string) rpcResp {
		return e.call(a, true, "SendMessage", map[string]any{"message": userMsg(text, nil),
			"configuration": map[string]any{"returnImmediately": true}, "metadata": control("c1", "sup", 1, req, nil)})
	}
	r := send("r2", "first")
	wantOK(t, "send", r)
	tk := decode[struct{ Task wireTask }](t, r).Task
	if id := <-started; id != tk.ID {
		t.Fatalf("held turn %s, sent %s", id, tk.ID)
	}
	wantCode(t, "a second send while the task works", send("r3", "second"), -32014)
	r = send("r2", "first")
	if again := decode[struct{ Task wireTask }](t, r).Task; r.Error != nil || again.ID != tk.ID {
		t.Errorf("repeated send: %s %+v, want task %s", r.Result, r.Error, tk.ID)
	}
	// The campaign's context was opened with workspace access (the caller's
	// token is full), for outside input: its runs never auto-apply.
	sess, err := e.app.Chat.GetSession(context.Background(), auth.Operator, tk.ContextID)
	if err != nil || sess.Access != session.AccessWorkspace || !sess.External {
		t.Errorf("campaign context: %+v %v, want workspace access and external", sess, err)
	}
	// Outside the extension nobody writes to the campaign's context.
	wantCode(t, "a plain send to the campaign's context", e.call(a, true, "SendMessage",
		map[string]any{"message": userMsg("sneak", map[string]any{"contextId": tk.ContextID})}), -32008)
	wantCode(t, "a plain cancel of the campaign's task", e.call(a, true, "CancelTask", map[string]any{"id": tk.ID}), -32008)
	if _, err := e.app.Chat.Post(context.Background(), auth.Operator, tk.ContextID, "sneak"); molt.ErrorReason(err) != a2a.ReasonCampaignContext {
		t.Errorf("the chat API's post into the campaign's context: %v, want %s", err, a2a.ReasonCampaignContext)
	}
	r = e.call(a, true, "CancelTask", map[string]any{"id": tk.ID, "metadata": control("c1", "sup", 1, "r4", nil)})
	if got := decode[wireTask](t, r); r.Error != nil || got.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel under the extension: %s %+v", r.Result, r.Error)
	}
	r = e.call(a, true, "CancelTask", map[string]any{"id": tk.ID, "metadata": control("c1", "sup", 1, "r4", nil)})
	if got := decode[wireTask](t, r); r.Error != nil || got.Status.State != "TASK_STATE_CANCELED" {
		t.Errorf("repeated cancel: %s %+v, want the original answer", r.Result, r.Error)
	}
	wantCode(t, "cancel of a task that is not the campaign's", e.call(a, true, "CancelTask",
		map[string]any{"id": "nope", "metadata": control("c1", "sup", 1, "r5", nil)}), -32001)
	r = e.call(a, true, "SendMessage", map[string]any{"message": userMsg("third", nil), "metadata": control("c1", "sup", 1, "r6", nil)})
	next := decode[struct{ Task wireTask }](t, r).Task
	if r.Error != nil || next.Status.State != "TASK_STATE_COMPLETED" || next.ContextID != tk.ContextID {
		t.Fatalf("send after the cancel: %s %+v, want completed in context %s", r.Result, r.Error, tk.ContextID)
	}
	r = e.call(a, true, "campaign/get", map[string]any{"campaignId": "c1"})
	var g struct {
		ContextID string
		Tasks     []struct{ ID, State string }
	}
	_ = json.Unmarshal(r.Result, &g)
	if r.Error != nil || g.ContextID != tk.ContextID || len(g.Tasks) != 2 || g.Tasks[0].ID != tk.ID ||
		g.Tasks[0].State != "TASK_STATE_CANCELED" || g.Tasks[1].State != "TASK_STATE_COMPLETED" {
		t.Errorf("campaign/get: %s %+v", r.Result, r.Error)
	}
	r = e.call(a, true, "campaign/getRequest", map[string]any{"requestId": "r2"})
	var q struct {
		Seen   bool
		TaskID string
		State  string
	}
	_ = json.Unmarshal(r.Result, &q)
	if r.Error != nil || !q.Seen || q.TaskID != tk.ID || q.State != "done" {
		t.Errorf("getRequest r2: %s %+v", r.Result, r.Error)
	}
	// Only the campaign's two tasks were created: the repeat started none.
	r = e.call(a, false, "ListTasks", map[string]any{"contextId": tk.ContextID})
	if l := decode[struct{ Tasks []wireTask }](t, r); len(l.Tasks) != 2 {
		t.Errorf("context tasks: %d (%s), want 2", len(l.Tasks), r.Result)
	}
	if !strings.Contains(string(r.Result), tk.ID) {
		t.Errorf("context tasks lack %s", tk.ID)
	}
}

// TestCampaignToolGate: a campaign context's turns get no egress tool unless
// the policy allows it; other sessions keep theirs.
func TestCampaignToolGate(t *testing.T) {
	e := setup(t)
	gate := a2a.ToolGate(e.app.Store)
	tools := []chat.Tool{{Spec: spec("web_fetch"), Egress: true}, {Spec: spec("remote"), CrossWorkspace: true}, {Spec: spec("plain")}}
	a := e.admin
	wantOK(t, "claim", e.call(a, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup", "requestId": "r1"}))
	r := e.call(a, true, "SendMessage", map[string]any{"message": userMsg("x", nil), "metadata": control("c1", "sup", 1, "r2", nil)})
	wantOK(t, "send", r)
	ctxID := decode[struct{ Task wireTask }](t, r).Task.ContextID
	sess, err := e.app.Chat.GetSession(context.Background(), auth.Operator, ctxID)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(gate(context.Background(), sess, tools)); got != "plain" {
		t.Errorf("default policy tools: %s, want plain", got)
	}
	wantOK(t, "renew allowing egress", e.call(a, true, "campaign/renew", map[string]any{"campaignId": "c1", "controller": "sup", "epoch": 1,
		"requestId": "r3", "policy": map[string]any{"allowEgress": true}}))
	if got := names(gate(context.Background(), sess, tools)); got != "web_fetch,plain" {
		t.Errorf("egress policy tools: %s, want web_fetch,plain", got)
	}
	wantOK(t, "send allowing cross-workspace tools", e.call(a, true, "SendMessage", map[string]any{"message": userMsg("y", nil),
		"metadata": control("c1", "sup", 1, "r4", map[string]any{"allowCrossWorkspace": true})}))
	if got := names(gate(context.Background(), sess, tools)); got != "remote,plain" {
		t.Errorf("cross-workspace policy tools: %s, want remote,plain", got)
	}
	r = e.call(a, false, "SendMessage", map[string]any{"message": userMsg("plain", nil)})
	other, _ := e.app.Chat.GetSession(context.Background(), auth.Operator, decode[struct{ Task wireTask }](t, r).Task.ContextID)
	if got := names(gate(context.Background(), other, tools)); got != "web_fetch,remote,plain" {
		t.Errorf("a context outside campaigns: %s, want every tool", got)
	}
}

func spec(name string) model.Tool { return model.Tool{Name: name} }

func names(ts []chat.Tool) string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Spec.Name)
	}
	return strings.Join(n, ",")
}

// TestCampaignClaimRace: controllers claiming one campaign at once: exactly
// one wins, the others are refused -32015; sends racing on one campaign
// (whose turns never end here) start exactly one task.
func TestCampaignClaimRace(t *testing.T) {
	hold := make(chan struct{})
	e := setupWith(t, func(chat.TurnContext) error { <-hold; return errors.New("held") })
	t.Cleanup(func() { close(hold) }) // before the server's shutdown waits for the held turn
	const n = 8
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := e.call(e.admin, true, "campaign/claim", map[string]any{"campaignId": "race", "controller": "sup-" + string(rune('a'+i)),
				"requestId": "claim-" + string(rune('a'+i))})
			if r.Error != nil {
				codes[i] = r.Error.Code
			}
		})
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		switch c {
		case 0:
			won++
		case -32015:
		default:
			t.Errorf("claim refused with %d, want -32015", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won, want 1 (codes %v)", won, codes)
	}
	r := e.call(e.admin, true, "campaign/get", map[string]any{"campaignId": "race"})
	var g struct {
		Controller string
		Epoch      int
	}
	_ = json.Unmarshal(r.Result, &g)
	if g.Epoch != 1 {
		t.Fatalf("campaign/get: %s", r.Result)
	}
	tasks := make([]string, n)
	for i := range n {
		wg.Go(func() {
			r := e.call(e.admin, true, "SendMessage", map[string]any{"message": userMsg("go", nil),
				"configuration": map[string]any{"returnImmediately": true},
				"metadata":      control("race", g.Controller, 1, "send-"+string(rune('a'+i)), nil)})
			if r.Error == nil {
				tasks[i] = decode[struct{ Task wireTask }](t, r).Task.ID
			} else if r.Error.Code != -32014 {
				t.Errorf("send refused with %d, want -32014", r.Error.Code)
			}
		})
	}
	wg.Wait()
	started := 0
	for _, id := range tasks {
		if id != "" {
			started++
		}
	}
	r = e.call(e.admin, true, "campaign/get", map[string]any{"campaignId": "race"})
	var g2 struct{ Tasks []struct{ ID string } }
	_ = json.Unmarshal(r.Result, &g2)
	if started != 1 || len(g2.Tasks) != 1 {
		t.Errorf("%d sends started a task, the campaign lists %d: %s", started, len(g2.Tasks), r.Result)
	}
}
