// Command smoke checks a deployed molt after a release:
//
//	MOLT_SMOKE_URL=https://api.example.com MOLT_SMOKE_SHA=abc123 \
//	MOLT_SMOKE_TOKEN=... MOLT_SMOKE_WORKSPACE=acme go run ./scripts/smoke
//
// It reads its configuration from the environment: MOLT_SMOKE_URL (the API's
// base URL, required), MOLT_SMOKE_SHA (the git SHA /health must report,
// required), MOLT_SMOKE_TOKEN (a full token or a chat workspace token of the
// workspace, required), MOLT_SMOKE_WORKSPACE (default "smoke") and
// MOLT_SMOKE_AGENT (default "main"): the A2A agent it talks to, which must
// exist; MOLT_SMOKE_TIMEOUT (default 60s) bounds the wait for the A2A task to
// end. It prints one line per check ("ok   name: detail" or "FAIL name:
// detail") and exits 1 when any check failed, 2 when it is misconfigured.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	cfg, err := configFrom(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "smoke:", err)
		os.Exit(2)
	}
	// Behind API Gateway no request outlasts 30 s.
	if failed := run(context.Background(), cfg, &http.Client{Timeout: 45 * time.Second}, os.Stdout); failed > 0 {
		fmt.Fprintf(os.Stdout, "%d check(s) failed\n", failed)
		os.Exit(1)
	}
}

// config is what one smoke run checks.
type config struct {
	URL, SHA, Token  string
	Workspace, Agent string
	Timeout          time.Duration
	Poll             time.Duration
}

func configFrom(getenv func(string) string) (config, error) {
	c := config{URL: strings.TrimRight(getenv("MOLT_SMOKE_URL"), "/"), SHA: getenv("MOLT_SMOKE_SHA"),
		Token: getenv("MOLT_SMOKE_TOKEN"), Workspace: getenv("MOLT_SMOKE_WORKSPACE"), Agent: getenv("MOLT_SMOKE_AGENT"),
		Timeout: 60 * time.Second, Poll: time.Second}
	var missing []string
	for _, kv := range [][2]string{{"MOLT_SMOKE_URL", c.URL}, {"MOLT_SMOKE_SHA", c.SHA}, {"MOLT_SMOKE_TOKEN", c.Token}} {
		if kv[1] == "" {
			missing = append(missing, kv[0])
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("set %s", strings.Join(missing, ", "))
	}
	if c.Workspace == "" {
		c.Workspace = "smoke"
	}
	if c.Agent == "" {
		c.Agent = "main"
	}
	if s := getenv("MOLT_SMOKE_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("MOLT_SMOKE_TIMEOUT %q is not a positive duration", s)
		}
		c.Timeout = d
	}
	return c, nil
}

// smoker runs the checks of one configuration.
type smoker struct {
	cfg    config
	client *http.Client
}

// run runs every check in order, prints one line each to out and returns
// how many failed. A check that needs an earlier one's result fails when
// that one did.
func run(ctx context.Context, cfg config, client *http.Client, out io.Writer) int {
	s := &smoker{cfg: cfg, client: client}
	failed := 0
	check := func(name string, fn func() (string, error)) bool {
		detail, err := fn()
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL %s: %v\n", name, err)
			return false
		}
		fmt.Fprintf(out, "ok   %s: %s\n", name, detail)
		return true
	}
	check("health", s.health)
	check("api", s.api)
	var taskID string
	if !check("a2a SendMessage", func() (string, error) {
		var err error
		taskID, err = s.send()
		return "task " + taskID, err
	}) {
		taskID = ""
	}
	check("a2a GetTask", func() (string, error) {
		if taskID == "" {
			return "", errors.New("no task: SendMessage failed")
		}
		return s.getTask(ctx, taskID)
	})
	check("a2a malformed body", s.malformed)
	check("a2a without token", s.noToken)
	return failed
}

func (s *smoker) rpcURL() string { return s.cfg.URL + "/a2a/" + s.cfg.Workspace + "/" + s.cfg.Agent }

// do sends one request; token "" sends none.
func (s *smoker) do(method, url, token string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, b, err
}

func (s *smoker) health() (string, error) {
	st, _, b, err := s.do("GET", s.cfg.URL+"/health", "", nil)
	if err != nil {
		return "", err
	}
	var h struct{ Status, Version, SHA string }
	if st != http.StatusOK || json.Unmarshal(b, &h) != nil {
		return "", fmt.Errorf("HTTP %d: %s", st, snippet(b))
	}
	if h.SHA != s.cfg.SHA {
		return "", fmt.Errorf("sha %q, want %q", h.SHA, s.cfg.SHA)
	}
	return fmt.Sprintf("version %s sha %s", h.Version, h.SHA), nil
}

// api reads the workspace: a token of either kind may.
func (s *smoker) api() (string, error) {
	st, _, b, err := s.do("GET", s.cfg.URL+"/api/workspaces/"+s.cfg.Workspace, s.cfg.Token, nil)
	if err != nil {
		return "", err
	}
	if st != http.StatusOK {
		return "", fmt.Errorf("GET /api/workspaces/%s: HTTP %d: %s", s.cfg.Workspace, st, snippet(b))
	}
	return "GET /api/workspaces/" + s.cfg.Workspace + " 200", nil
}

type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type wireTask struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

func (s *smoker) call(method string, params any) (rpcAnswer, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return rpcAnswer{}, err
	}
	body := []byte(`{"jsonrpc":"2.0","id":"smoke","method":"` + method + `","params":` + string(p) + `}`)
	st, _, b, err := s.do("POST", s.rpcURL(), s.cfg.Token, body)
	if err != nil {
		return rpcAnswer{}, err
	}
	var a rpcAnswer
	if st != http.StatusOK || json.Unmarshal(b, &a) != nil {
		return a, fmt.Errorf("%s: HTTP %d: %s", method, st, snippet(b))
	}
	if a.Error != nil {
		return a, fmt.Errorf("%s: error %d: %s", method, a.Error.Code, a.Error.Message)
	}
	return a, nil
}

// send starts a task without waiting (a blocking send behind API Gateway may
// outlast its 30 s cut); getTask then polls it to its end.
func (s *smoker) send() (string, error) {
	a, err := s.call("SendMessage", map[string]any{
		"message": map[string]any{"messageId": fmt.Sprintf("smoke-%d", time.Now().UnixNano()), "role": "ROLE_USER",
			"parts": []any{map[string]any{"text": "molt release smoke: reply with one word."}}},
		"configuration": map[string]any{"returnImmediately": true}})
	if err != nil {
		return "", err
	}
	var r struct{ Task wireTask }
	if json.Unmarshal(a.Result, &r) != nil || r.Task.ID == "" {
		return "", fmt.Errorf("SendMessage: no task in %s", snippet(a.Result))
	}
	return r.Task.ID, nil
}

func (s *smoker) getTask(ctx context.Context, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	for {
		a, err := s.call("GetTask", map[string]any{"id": id})
		if err != nil {
			return "", err
		}
		var t wireTask
		if json.Unmarshal(a.Result, &t) != nil || t.ID != id {
			return "", fmt.Errorf("GetTask: task %s not in %s", id, snippet(a.Result))
		}
		switch t.Status.State {
		case "TASK_STATE_COMPLETED":
			return "task " + id + " completed", nil
		case "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED":
			return "", fmt.Errorf("task %s ended %s", id, t.Status.State)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("task %s still %s after %s", id, t.Status.State, s.cfg.Timeout)
		case <-time.After(s.cfg.Poll):
		}
	}
}

// malformed: a body that is not JSON is a JSON-RPC parse error (-32700),
// answered with HTTP 200 as JSON-RPC over HTTP does, never a 5xx.
func (s *smoker) malformed() (string, error) {
	st, _, b, err := s.do("POST", s.rpcURL(), s.cfg.Token, []byte(`{"jsonrpc":`))
	if err != nil {
		return "", err
	}
	var a rpcAnswer
	if json.Unmarshal(b, &a) != nil || a.Error == nil {
		return "", fmt.Errorf("HTTP %d: %s, want a JSON-RPC error", st, snippet(b))
	}
	if a.Error.Code != -32700 || st != http.StatusOK {
		return "", fmt.Errorf("HTTP %d error %d, want HTTP 200 error -32700", st, a.Error.Code)
	}
	return "HTTP 200 error -32700", nil
}

func (s *smoker) noToken() (string, error) {
	st, h, b, err := s.do("POST", s.rpcURL(), "", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
	if err != nil {
		return "", err
	}
	if st != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		return "", fmt.Errorf("HTTP %d WWW-Authenticate %q: %s, want 401 Bearer", st, h.Get("WWW-Authenticate"), snippet(b))
	}
	return "HTTP 401", nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
