package a2a_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/apptest"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
)

type env struct {
	t     *testing.T
	base  string // http://host
	admin string
	app   *app.App
}

// setup runs molt serve's wiring on a free port with a workspace acme.
func setup(t *testing.T) *env { t.Helper(); return setupWith(t, nil) }

func setupWith(t *testing.T, beforeFinish func(chat.TurnContext) error) *env {
	t.Helper()
	return setupOn(t, nil, beforeFinish)
}

// setupOn is setupWith on clock (nil: the system clock).
func setupOn(t *testing.T, clock molt.Clock, beforeFinish func(chat.TurnContext) error) *env {
	t.Helper()
	e, _ := serveOn(t, t.TempDir(), auth.NewSecret(), clock, beforeFinish)
	if st, body := e.do("PUT", "/api/workspaces/acme", e.admin, nil, `{"description":"test"}`); st/100 != 2 {
		t.Fatalf("create workspace: %d %s", st, body)
	}
	return e
}

// serveOn runs molt serve's wiring on dir with admin token secret; stop
// shuts it down and closes the App (a cleanup does it too).
func serveOn(t *testing.T, dir, secret string, clock molt.Clock, beforeFinish func(chat.TurnContext) error) (e *env, stop func()) {
	t.Helper()
	cfg := app.Config{DataDir: dir, A2AWait: 10 * time.Second}
	cfg.Chat.BeforeFinish = beforeFinish
	base, a, stop := apptest.Serve(t, cfg, apptest.Options{Clock: clock, AdminToken: secret, Logger: slog.Default()})
	return &env{t: t, base: base, admin: secret, app: a}, stop
}

func (e *env) do(method, path, token string, hdr map[string]string, body string) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type rpcResp struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpc calls method with params (v "" sends no A2A-Version header).
func (e *env) rpc(v, method string, params any) rpcResp {
	e.t.Helper()
	p, _ := json.Marshal(params)
	body := `{"jsonrpc":"2.0","id":"1","method":"` + method + `","params":` + string(p) + `}`
	return e.raw(v, body)
}

func (e *env) raw(v, body string) rpcResp {
	e.t.Helper()
	hdr := map[string]string{}
	if v != "" {
		hdr["A2A-Version"] = v
	}
	st, b := e.do("POST", "/a2a/acme/main", e.admin, hdr, body)
	if st != 200 {
		e.t.Fatalf("POST: %d %s", st, b)
	}
	var r rpcResp
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatalf("response %s: %v", b, err)
	}
	return r
}

type wireTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Kind      string `json:"kind"`
	Status    struct {
		State   string `json:"state"`
		Message *struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
	} `json:"status"`
	History   []json.RawMessage `json:"history"`
	Artifacts []struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"artifacts"`
}

func userMsg(text string, extra map[string]any) map[string]any {
	m := map[string]any{"messageId": "m1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestCard(t *testing.T) {
	e := setup(t)
	st, b := e.do("GET", "/a2a/acme/main/.well-known/agent-card.json", "", map[string]string{"A2A-Version": "1.0"}, "")
	if st != 200 {
		t.Fatalf("card: %d %s", st, b)
	}
	var card map[string]any
	_ = json.Unmarshal(b, &card)
	for _, k := range []string{"name", "description", "version", "supportedInterfaces", "capabilities", "securitySchemes", "securityRequirements", "skills", "defaultInputModes"} {
		if _, ok := card[k]; !ok {
			t.Errorf("v1.0 card lacks %s", k)
		}
	}
	if _, ok := card["url"]; ok {
		t.Error("v1.0 card carries the v0.3 url")
	}
	if !strings.Contains(string(b), `"httpAuthSecurityScheme":{`) || !strings.Contains(string(b), `"schemes":{"bearer":{"list":[]}}`) {
		t.Errorf("card security not in ProtoJSON form: %s", b)
	}
	st, b = e.do("GET", "/a2a/acme/main/.well-known/agent-card.json", "", nil, "")
	_ = json.Unmarshal(b, &card)
	if st != 200 || card["url"] != e.base+"/a2a/acme/main" || card["preferredTransport"] != "JSONRPC" || card["protocolVersion"] == nil || card["security"] == nil {
		t.Errorf("v0.3 card: %d %s", st, b)
	}
	if st, _ := e.do("GET", "/a2a/acme/nobody/.well-known/agent-card.json", "", nil, ""); st != 404 {
		t.Errorf("unknown agent's card: %d, want 404", st)
	}
	// A client resolving ".well-known/agent-card.json" relative to {api}/a2a/acme/main
	// (@a2a-js/sdk) asks the workspace for it: main's card.
	if st, b := e.do("GET", "/a2a/acme/.well-known/agent-card.json", "", map[string]string{"A2A-Version": "1.0"}, ""); st != 200 || !strings.Contains(string(b), `"url":"`+e.base+`/a2a/acme/main"`) {
		t.Errorf("workspace card: %d %s, want main's", st, b)
	}
	if st, _ := e.do("GET", "/a2a/nowhere/.well-known/agent-card.json", "", nil, ""); st != 404 {
		t.Errorf("unknown workspace's card: %d, want 404", st)
	}
	if st, _ := e.do("GET", "/.well-known/agent-card.json", "", nil, ""); st != 404 {
		t.Errorf("root card without a2a.default_agent: %d, want 404", st)
	}
	if st, b := e.do("PUT", "/api/settings", e.admin, nil, `{"a2a":{"default_agent":"acme/main"}}`); st != 200 {
		t.Fatalf("set default agent: %d %s", st, b)
	}
	if st, b := e.do("GET", "/.well-known/agent-card.json", "", nil, ""); st != 200 || !strings.Contains(string(b), "/a2a/acme/main") {
		t.Errorf("root card: %d %s", st, b)
	}
}

func TestAuth(t *testing.T) {
	e := setup(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`
	req, _ := http.NewRequest("POST", e.base+"/a2a/acme/main", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("no token: %d %q, want 401 with WWW-Authenticate: Bearer", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if st, _ := e.do("POST", "/a2a/acme/main", "wrong-token-0123456789", nil, body); st != 401 {
		t.Errorf("wrong token: %d, want 401", st)
	}
}

func TestSendGetListCancel(t *testing.T) {
	e := setup(t)
	r := e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("hello", nil)})
	if r.Error != nil {
		t.Fatalf("SendMessage: %+v", r.Error)
	}
	var sent struct{ Task wireTask }
	_ = json.Unmarshal(r.Result, &sent)
	tk := sent.Task
	if tk.Status.State != "TASK_STATE_COMPLETED" || len(tk.Artifacts) != 1 || tk.Status.Message == nil || tk.Status.Message.Role != "ROLE_AGENT" {
		t.Fatalf("blocking send: %s", r.Result)
	}
	// Non-blocking, in the same context.
	r = e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("again", map[string]any{"contextId": tk.ContextID}),
		"configuration": map[string]any{"returnImmediately": true}})
	var second struct{ Task wireTask }
	_ = json.Unmarshal(r.Result, &second)
	if r.Error != nil || second.Task.ContextID != tk.ContextID || (second.Task.Status.State != "TASK_STATE_SUBMITTED" && second.Task.Status.State != "TASK_STATE_WORKING") {
		t.Fatalf("non-blocking send: %s %+v", r.Result, r.Error)
	}
	for _, c := range []struct {
		hl   any
		want int
	}{{nil, 2}, {0, 0}, {1, 1}} {
		p := map[string]any{"id": tk.ID}
		if c.hl != nil {
			p["historyLength"] = c.hl
		}
		r = e.rpc("1.0", "GetTask", p)
		var got wireTask
		_ = json.Unmarshal(r.Result, &got)
		if r.Error != nil || got.ID != tk.ID || len(got.History) != c.want {
			t.Errorf("GetTask historyLength %v: %d messages (%s), want %d", c.hl, len(got.History), r.Result, c.want)
		}
	}
	r = e.rpc("1.0", "ListTasks", map[string]any{"contextId": tk.ContextID})
	var list struct {
		Tasks         []wireTask
		NextPageToken *string
	}
	_ = json.Unmarshal(r.Result, &list)
	if r.Error != nil || len(list.Tasks) != 2 || list.Tasks[0].ID != second.Task.ID || list.NextPageToken == nil {
		t.Errorf("ListTasks: %s %+v", r.Result, r.Error)
	}
	// @a2a-js/sdk sends a status the caller left out as "UNRECOGNIZED": no filter.
	r = e.rpc("1.0", "ListTasks", map[string]any{"contextId": tk.ContextID, "status": "UNRECOGNIZED"})
	_ = json.Unmarshal(r.Result, &list)
	if r.Error != nil || len(list.Tasks) != 2 {
		t.Errorf("ListTasks status UNRECOGNIZED: %s %+v", r.Result, r.Error)
	}
	r = e.rpc("1.0", "ListTasks", map[string]any{"pageSize": 1})
	_ = json.Unmarshal(r.Result, &list)
	if r.Error != nil || len(list.Tasks) != 1 || list.NextPageToken == nil || *list.NextPageToken == "" {
		t.Errorf("ListTasks page 1: %s %+v", r.Result, r.Error)
	}
	if r := e.rpc("1.0", "CancelTask", map[string]any{"id": tk.ID}); r.Error == nil || r.Error.Code != -32002 {
		t.Errorf("cancel of a completed task: %+v", r.Error)
	}
	if r := e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("more", map[string]any{"taskId": tk.ID})}); r.Error == nil || r.Error.Code != -32004 {
		t.Errorf("message to a terminal task: %+v", r.Error)
	}
	// v0.3 names and shapes.
	r = e.rpc("", "message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "x", "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": "hi"}}}})
	var v03 wireTask
	_ = json.Unmarshal(r.Result, &v03)
	if r.Error != nil || v03.Kind != "task" || v03.Status.State != "completed" {
		t.Errorf("message/send: %s %+v", r.Result, r.Error)
	}
	if r := e.rpc("", "tasks/get", map[string]any{"id": v03.ID}); r.Error != nil {
		t.Errorf("tasks/get: %+v", r.Error)
	}
}

func TestStream(t *testing.T) {
	e := setup(t)
	p, _ := json.Marshal(map[string]any{"message": userMsg("stream me", nil)})
	req, _ := http.NewRequest("POST", e.base+"/a2a/acme/main", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":`+string(p)+`}`)))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var kinds []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Result map[string]json.RawMessage }
		_ = json.Unmarshal([]byte(line), &ev)
		for k := range ev.Result {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) < 2 || kinds[0] != "task" || kinds[len(kinds)-1] != "statusUpdate" || !strings.Contains(strings.Join(kinds, ","), "artifactUpdate") {
		t.Errorf("stream events %v", kinds)
	}
}

func TestErrorCodes(t *testing.T) {
	e := setup(t)
	cases := []struct {
		name, v, body string
		want          int
	}{
		{"parse", "1.0", `{"jsonrpc":`, -32700},
		{"invalid request", "1.0", `{"jsonrpc":"1.0","id":1,"method":"GetTask"}`, -32600},
		{"bad id", "1.0", `{"jsonrpc":"2.0","id":{},"method":"GetTask"}`, -32600},
		{"method", "1.0", `{"jsonrpc":"2.0","id":1,"method":"NoSuchMethod"}`, -32601},
		{"v1 name on v0.3", "", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, -32601},
		{"params", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`, -32602},
		{"params not an object", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`, -32602},
		{"task not found", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, -32001},
		{"cancel not found", "1.0", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"nope"}}`, -32001},
		{"push", "1.0", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}`, -32003},
		{"push in send", "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://x"}}}}`, -32003},
		{"content type", "1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://x"}]}}}`, -32005},
		{"subscribe not found", "1.0", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"nope"}}`, -32001},
		{"extended card", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, -32007},
		{"version", "2.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, -32009},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.raw(c.v, c.body)
			if r.Error == nil || r.Error.Code != c.want {
				t.Errorf("error %+v, want code %d", r.Error, c.want)
			}
		})
	}
}

// TestCancelRunning: a cancel of a running task ends it at once (canceled),
// the attempt writes nothing, and the context's next task still runs.
func TestCancelRunning(t *testing.T) {
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
	r := e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("slow", nil), "configuration": map[string]any{"returnImmediately": true}})
	var sent struct{ Task wireTask }
	_ = json.Unmarshal(r.Result, &sent)
	if id := <-started; id != sent.Task.ID {
		t.Fatalf("held turn %s, sent %s", id, sent.Task.ID)
	}
	r = e.rpc("1.0", "CancelTask", map[string]any{"id": sent.Task.ID})
	var got wireTask
	_ = json.Unmarshal(r.Result, &got)
	if r.Error != nil || got.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel of a running task: %s %+v", r.Result, r.Error)
	}
	r = e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("next", map[string]any{"contextId": sent.Task.ContextID})})
	var next struct{ Task wireTask }
	_ = json.Unmarshal(r.Result, &next)
	if r.Error != nil || next.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("next task after a cancel: %s %+v", r.Result, r.Error)
	}
	r = e.rpc("1.0", "GetTask", map[string]any{"id": sent.Task.ID})
	_ = json.Unmarshal(r.Result, &got)
	if got.Status.State != "TASK_STATE_CANCELED" || len(got.History) != 1 {
		t.Errorf("canceled task later: %s", r.Result)
	}
}

// TestSendRetryIsOneTask: a message sent again with the same messageId (a
// retry whose answer was lost), with or without a context, answers the task
// the first send made and posts nothing more; another messageId is a new task.
func TestSendRetryIsOneTask(t *testing.T) {
	e := setup(t)
	send := func(msg map[string]any) wireTask {
		t.Helper()
		r := e.rpc("1.0", "SendMessage", map[string]any{"message": msg, "configuration": map[string]any{"returnImmediately": true}})
		if r.Error != nil {
			t.Fatalf("SendMessage: %+v", r.Error)
		}
		var out struct{ Task wireTask }
		_ = json.Unmarshal(r.Result, &out)
		return out.Task
	}
	first := send(userMsg("retry me", map[string]any{"messageId": "retry-1"}))
	again := send(userMsg("retry me", map[string]any{"messageId": "retry-1"}))
	if again.ID != first.ID || again.ContextID != first.ContextID {
		t.Fatalf("the retry made task %s in %s, want %s in %s", again.ID, again.ContextID, first.ID, first.ContextID)
	}
	inCtx := send(userMsg("and then", map[string]any{"messageId": "retry-2", "contextId": first.ContextID}))
	if send(userMsg("and then", map[string]any{"messageId": "retry-2", "contextId": first.ContextID})).ID != inCtx.ID {
		t.Fatal("a retry in a context made a second task")
	}
	if other := send(userMsg("retry me", map[string]any{"messageId": "retry-3"})); other.ID == first.ID {
		t.Fatal("a new messageId answered an old task")
	}
	r := e.rpc("1.0", "ListTasks", map[string]any{"contextId": first.ContextID})
	var list struct{ Tasks []wireTask }
	_ = json.Unmarshal(r.Result, &list)
	if r.Error != nil || len(list.Tasks) != 2 {
		t.Fatalf("tasks of the context: %s %+v, want 2", r.Result, r.Error)
	}
}

// TestTasksSurviveRestart: tasks written by one molt serve are read back,
// unchanged (states, status messages, history), by the next one on the same
// data directory, by GetTask and ListTasks.
func TestTasksSurviveRestart(t *testing.T) {
	dir, secret := t.TempDir(), auth.NewSecret()
	hold := make(chan struct{})
	started := make(chan string, 1)
	holdText := "hold this one"
	var turns atomic.Int32
	// The first two sends block until their turn ends: the third turn is
	// the held one.
	e, stop := serveOn(t, dir, secret, nil, func(tc chat.TurnContext) error {
		if turns.Add(1) != 3 {
			return nil
		}
		started <- tc.Turn.ID
		<-hold
		return errors.New("held")
	})
	if st, body := e.do("PUT", "/api/workspaces/acme", e.admin, nil, `{"description":"test"}`); st/100 != 2 {
		t.Fatalf("create workspace: %d %s", st, body)
	}
	var first struct{ Task wireTask }
	r := e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("one", nil)})
	_ = json.Unmarshal(r.Result, &first)
	ctxID := first.Task.ContextID
	var second struct{ Task wireTask }
	r = e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg("two", map[string]any{"contextId": ctxID})})
	_ = json.Unmarshal(r.Result, &second)
	var held struct{ Task wireTask }
	r = e.rpc("1.0", "SendMessage", map[string]any{"message": userMsg(holdText, nil), "configuration": map[string]any{"returnImmediately": true}})
	_ = json.Unmarshal(r.Result, &held)
	<-started
	if r := e.rpc("1.0", "CancelTask", map[string]any{"id": held.Task.ID}); r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}
	close(hold)
	if first.Task.Status.State != "TASK_STATE_COMPLETED" || second.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("tasks before the restart: %s, %s", first.Task.Status.State, second.Task.Status.State)
	}
	ids := []string{first.Task.ID, second.Task.ID, held.Task.ID}
	before := map[string]string{}
	for _, id := range ids {
		before[id] = string(e.rpc("1.0", "GetTask", map[string]any{"id": id}).Result)
	}
	listBefore := string(e.rpc("1.0", "ListTasks", map[string]any{"contextId": ctxID, "historyLength": 10}).Result)
	stop()

	e2, _ := serveOn(t, dir, secret, nil, nil)
	for i, want := range []string{"TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"} {
		r := e2.rpc("1.0", "GetTask", map[string]any{"id": ids[i]})
		var got wireTask
		_ = json.Unmarshal(r.Result, &got)
		if r.Error != nil || got.Status.State != want || len(got.History) == 0 {
			t.Errorf("task %s after the restart: %s %+v, want %s with its history", ids[i], r.Result, r.Error, want)
		}
		if string(r.Result) != before[ids[i]] {
			t.Errorf("task %s changed across the restart:\n got %s\nwant %s", ids[i], r.Result, before[ids[i]])
		}
	}
	r = e2.rpc("1.0", "ListTasks", map[string]any{"contextId": ctxID, "historyLength": 10})
	var list struct{ Tasks []wireTask }
	_ = json.Unmarshal(r.Result, &list)
	if r.Error != nil || len(list.Tasks) != 2 || list.Tasks[0].ID != second.Task.ID || list.Tasks[1].ID != first.Task.ID {
		t.Errorf("ListTasks after the restart: %s %+v", r.Result, r.Error)
	}
	if string(r.Result) != listBefore {
		t.Errorf("ListTasks changed across the restart:\n got %s\nwant %s", r.Result, listBefore)
	}
	r = e2.rpc("1.0", "ListTasks", map[string]any{})
	_ = json.Unmarshal(r.Result, &list)
	if r.Error != nil || len(list.Tasks) != 3 || list.Tasks[0].ID != held.Task.ID {
		t.Errorf("agent's ListTasks after the restart: %s %+v", r.Result, r.Error)
	}
}
