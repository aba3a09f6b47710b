// Package a2aclient is a small A2A client (JSON-RPC, protocol v1.0) for the
// delegation of a chat message to a remote agent: read the agent card, send
// a message without blocking, read the task until it ends. Its errors carry
// a safe Reason (an HTTP status, a JSON-RPC code, "unreachable"): nothing the
// remote wrote in an error reaches a conversation.
package a2aclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/molt-dev/molt/internal/a2astate"
	"io"
	"net/http"
	"strings"
	"time"
)

// Task states, v1.0 spelling (v0.3 answers are read into these): a2astate's.
const (
	StateSubmitted = a2astate.Submitted
	StateWorking   = a2astate.Working
	StateCompleted = a2astate.Completed
	StateFailed    = a2astate.Failed
	StateCanceled  = a2astate.Canceled
	StateRejected  = a2astate.Rejected
)

// Terminal reports whether a task in state has ended.
func Terminal(state string) bool { return a2astate.Terminal(state) }

// MaxBody bounds a response body read from a remote.
const MaxBody = 1 << 20

// Error is a failed call; Reason is safe to show ("http_401", "rpc_-32001",
// "unreachable", "bad_response").
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "a2a: " + e.Reason + ": " + e.Err.Error()
	}
	return "a2a: " + e.Reason
}

func (e *Error) Unwrap() error { return e.Err }

// Reason is err's safe reason ("error" for an error not from this package).
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return "error"
}

// Client calls remote A2A agents. The zero value uses a client with a 30 s
// timeout.
type Client struct {
	HTTP *http.Client
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

func (c *Client) http() *http.Client {
	if c != nil && c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

// Task is what the client reads of a task.
type Task struct {
	ID        string
	ContextID string
	State     string
	// Text is the reply: the artifacts' text parts, else the status message's.
	Text string
}

// Endpoint reads the agent card at cardURL and returns its JSON-RPC URL for
// protocol 1.0 (a v0.3-only card's "url" otherwise).
func (c *Client) Endpoint(ctx context.Context, cardURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return "", &Error{Reason: "bad_card_url", Err: err}
	}
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Accept", "application/json")
	body, err := c.do(req)
	if err != nil {
		return "", err
	}
	var card struct {
		URL        string `json:"url"`
		Interfaces []struct {
			URL      string `json:"url"`
			Binding  string `json:"protocolBinding"`
			Protocol string `json:"protocolVersion"`
		} `json:"supportedInterfaces"`
	}
	if err := json.Unmarshal(body, &card); err != nil {
		return "", &Error{Reason: "bad_card", Err: err}
	}
	for _, i := range card.Interfaces {
		if strings.EqualFold(i.Binding, "JSONRPC") && strings.HasPrefix(i.Protocol, "1") && i.URL != "" {
			return i.URL, nil
		}
	}
	if card.URL != "" {
		return card.URL, nil
	}
	return "", &Error{Reason: "bad_card", Err: errors.New("the card names no JSON-RPC interface")}
}

// Send sends text as a user message (messageID lets a remote tell a resend)
// with returnImmediately: the task comes back at once, usually still working.
func (c *Client) Send(ctx context.Context, endpoint, token, messageID, text string) (Task, error) {
	params := map[string]any{
		"message": map[string]any{"messageId": messageID, "role": "ROLE_USER",
			"parts": []any{map[string]any{"text": text}}},
		"configuration": map[string]any{"returnImmediately": true},
	}
	var res struct {
		Task    *wireTask `json:"task"`
		Message *wireMsg  `json:"message"`
	}
	if err := c.call(ctx, endpoint, token, "SendMessage", params, &res); err != nil {
		return Task{}, err
	}
	switch {
	case res.Task != nil:
		return res.Task.task(), nil
	case res.Message != nil:
		// A direct reply: a task that has ended.
		return Task{ContextID: res.Message.ContextID, State: StateCompleted, Text: res.Message.text()}, nil
	}
	return Task{}, &Error{Reason: "bad_response", Err: errors.New("SendMessage result is neither a task nor a message")}
}

// Get reads task id.
func (c *Client) Get(ctx context.Context, endpoint, token, id string) (Task, error) {
	var res wireTask
	if err := c.call(ctx, endpoint, token, "GetTask", map[string]any{"id": id, "historyLength": 0}, &res); err != nil {
		return Task{}, err
	}
	return res.task(), nil
}

type wirePart struct {
	Text string `json:"text"`
}

type wireMsg struct {
	ContextID string     `json:"contextId"`
	Parts     []wirePart `json:"parts"`
}

func (m *wireMsg) text() string {
	if m == nil {
		return ""
	}
	var b []string
	for _, p := range m.Parts {
		if p.Text != "" {
			b = append(b, p.Text)
		}
	}
	return strings.Join(b, "\n")
}

type wireTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string   `json:"state"`
		Message *wireMsg `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		Parts []wirePart `json:"parts"`
	} `json:"artifacts"`
}

func (t wireTask) task() Task {
	out := Task{ID: t.ID, ContextID: t.ContextID, State: state(t.Status.State)}
	var b []string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if p.Text != "" {
				b = append(b, p.Text)
			}
		}
	}
	out.Text = strings.Join(b, "\n")
	if out.Text == "" {
		out.Text = t.Status.Message.text()
	}
	return out
}

// state reads a state in either spelling (v0.3: "completed", "input-required").
func state(s string) string {
	if s == "" || strings.HasPrefix(s, "TASK_STATE_") {
		return s
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

func (c *Client) call(ctx context.Context, endpoint, token, method string, params, result any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return &Error{Reason: "bad_request", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(b))
	if err != nil {
		return &Error{Reason: "bad_endpoint", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	body, err := c.do(req)
	if err != nil {
		return err
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return &Error{Reason: "bad_response", Err: err}
	}
	if resp.Error != nil {
		return &Error{Reason: fmt.Sprintf("rpc_%d", resp.Error.Code)}
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return &Error{Reason: "bad_response", Err: err}
	}
	return nil
}

func (c *Client) do(req *http.Request) ([]byte, error) {
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, &Error{Reason: "unreachable", Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return nil, &Error{Reason: "unreachable", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Reason: fmt.Sprintf("http_%d", resp.StatusCode)}
	}
	return body, nil
}
