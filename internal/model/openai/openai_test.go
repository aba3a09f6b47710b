package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/openai"
	"github.com/molt-dev/molt/internal/molt"
)

// Distinctive strings that must never surface in an error or a log line.
const (
	apiKey     = "sk-test-SECRETKEY-4f9d2c"
	bodySecret = "BODY-SECRET-7c1e"
)

// chatServer is a chat completions endpoint on 127.0.0.1. answer is called for
// each attempt (1-based) after the request's method, path and headers were checked.
type chatServer struct {
	*httptest.Server
	attempts atomic.Int32
	mu       sync.Mutex
	lastBody map[string]any
}

func newChatServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, attempt int)) *chatServer {
	t.Helper()
	s := &chatServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.attempts.Add(1))
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("request %s %s; want POST /v1/chat/completions", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+apiKey {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		s.mu.Lock()
		s.lastBody = body
		s.mu.Unlock()
		answer(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newClient(t *testing.T, s *chatServer, opts ...openai.Option) (*openai.Client, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts = append([]openai.Option{
		openai.WithRetry(3, time.Millisecond, 2*time.Millisecond),
		openai.WithRetryAfterCap(20 * time.Millisecond),
		openai.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}, opts...)
	c, err := openai.New(openai.Config{BaseURL: s.URL + "/v1/", APIKey: apiKey, Model: "gpt-test"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, logs
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// A real-shaped chat completion with a text answer.
const plainReply = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,
"model":"gpt-test-2025-01-01","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?","refusal":null,"annotations":[]},
"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,
"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},
"service_tier":"default","system_fingerprint":"fp_test"}`

const toolReply = `{"id":"chatcmpl-abc123","object":"chat.completion","created":1699896916,"model":"gpt-test",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123","type":"function",
"function":{"name":"get_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99}}`

// checkSafe fails when err or the logs quote the body or the key.
func checkSafe(t *testing.T, err error, logs *logBuffer) {
	t.Helper()
	for _, secret := range []string{apiKey, bodySecret} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
		if logs != nil && strings.Contains(logs.String(), secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
}

func wantFailure(t *testing.T, err error, code, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s/%s", code, reason)
	}
	var me *molt.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %v is %T, not *molt.Error", err, err)
	}
	if me.Code != code || me.Reason != reason {
		t.Errorf("error %q: code/reason = %s/%s; want %s/%s", err, me.Code, me.Reason, code, reason)
	}
}

func TestRequestShapeAndPlainReply(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, 200, plainReply) })
	c, _ := newClient(t, s)
	req := model.Request{
		System: "You are helpful.",
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "What's the weather?"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
				{ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"location":"Boston"}`)},
				{ID: "call_2", Name: "get_time"},
			}},
			{Role: model.RoleTool, ToolResults: []model.ToolResult{
				{CallID: "call_1", Content: "sunny"},
				{CallID: "call_2", Content: "no clock", IsError: true},
			}},
			{Role: model.RoleAssistant, Text: "It is sunny."},
			{Role: model.RoleUser, Text: "Thanks"},
		},
		Tools: []model.Tool{
			{Name: "get_weather", Description: "Weather for a place", InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)},
			{Name: "get_time"},
		},
		MaxTokens: 256,
	}
	resp, err := c.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Response{Text: "Hello! How can I help?", StopReason: model.StopEndTurn,
		Usage: model.Usage{InputTokens: 19, OutputTokens: 10}, Model: "gpt-test-2025-01-01"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response = %+v\nwant       %+v", resp, want)
	}

	var wantBody map[string]any
	if err := json.Unmarshal([]byte(`{
		"model": "gpt-test",
		"max_tokens": 256,
		"messages": [
			{"role": "system", "content": "You are helpful."},
			{"role": "user", "content": "What's the weather?"},
			{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Boston\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
			{"role": "tool", "tool_call_id": "call_2", "content": "error: no clock"},
			{"role": "assistant", "content": "It is sunny."},
			{"role": "user", "content": "Thanks"}
		],
		"tools": [
			{"type": "function", "function": {"name": "get_weather", "description": "Weather for a place",
				"parameters": {"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}},
			{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
		]
	}`), &wantBody); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	got := s.lastBody
	s.mu.Unlock()
	if !reflect.DeepEqual(got, wantBody) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("request body:\n%s", g)
	}
	if c.Name() != "openai:gpt-test" {
		t.Errorf("Name = %q", c.Name())
	}
}

func TestToolCallReply(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, 200, toolReply) })
	c, _ := newClient(t, s)
	resp, err := c.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "weather?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != model.StopToolUse || resp.Text != "" || len(resp.ToolCalls) != 1 {
		t.Fatalf("response = %+v", resp)
	}
	tc := resp.ToolCalls[0]
	var input map[string]string
	if err := json.Unmarshal(tc.Input, &input); err != nil || tc.ID != "call_abc123" || tc.Name != "get_weather" || input["location"] != "Boston, MA" {
		t.Errorf("tool call = %+v (%s), %v", tc, tc.Input, err)
	}
	if resp.Usage != (model.Usage{InputTokens: 82, OutputTokens: 17}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	// Nothing offered, nothing sent.
	s.mu.Lock()
	_, hasTools := s.lastBody["tools"]
	_, hasMax := s.lastBody["max_tokens"]
	s.mu.Unlock()
	if hasTools || hasMax {
		t.Errorf("tools or max_tokens sent though not requested")
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "1") // one second, capped to 20 ms by the client
			writeJSON(w, 429, `{"error":{"message":"`+bodySecret+`","type":"rate_limit_exceeded"}}`)
			return
		}
		writeJSON(w, 200, plainReply)
	})
	c, logs := newClient(t, s)
	start := time.Now()
	resp, err := c.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello! How can I help?" {
		t.Errorf("text = %q", resp.Text)
	}
	if got := s.attempts.Load(); got != 2 {
		t.Errorf("attempts = %d; want 2", got)
	}
	if d := time.Since(start); d < 20*time.Millisecond || d > 900*time.Millisecond {
		t.Errorf("took %v; want Retry-After honoured up to the 20ms cap", d)
	}
	if !strings.Contains(logs.String(), `"reason":"rate_limited"`) {
		t.Errorf("retry not logged: %s", logs)
	}
	if strings.Contains(logs.String(), bodySecret) || strings.Contains(logs.String(), apiKey) {
		t.Errorf("logs leak: %s", logs)
	}
}

func TestErrorMatrix(t *testing.T) {
	t.Parallel()
	secretBody := `{"error":{"message":"` + bodySecret + ` ` + apiKey + `","type":"x"}}`
	for _, tc := range []struct {
		name         string
		answer       func(w http.ResponseWriter, n int)
		opts         []openai.Option
		code, reason string
		attempts     int32
	}{
		{"500 three times", func(w http.ResponseWriter, _ int) { writeJSON(w, 500, secretBody) }, nil,
			molt.EUNAVAILABLE, model.ReasonServerError, 3},
		{"503 then 502 then 200", func(w http.ResponseWriter, n int) {
			if n < 3 {
				writeJSON(w, 500+n+1, secretBody)
				return
			}
			writeJSON(w, 200, plainReply)
		}, nil, "", "", 3},
		{"429 three times", func(w http.ResponseWriter, _ int) { writeJSON(w, 429, secretBody) }, nil,
			molt.EUNAVAILABLE, model.ReasonRateLimited, 3},
		{"400 not retried", func(w http.ResponseWriter, _ int) { writeJSON(w, 400, secretBody) }, nil,
			molt.EINVALID, model.ReasonBadRequest, 1},
		{"404 not retried", func(w http.ResponseWriter, _ int) { writeJSON(w, 404, secretBody) }, nil,
			molt.EINVALID, model.ReasonBadRequest, 1},
		{"401", func(w http.ResponseWriter, _ int) { writeJSON(w, 401, secretBody) }, nil,
			molt.EINVALID, model.ReasonAuth, 1},
		{"403", func(w http.ResponseWriter, _ int) { writeJSON(w, 403, secretBody) }, nil,
			molt.EINVALID, model.ReasonAuth, 1},
		{"garbage body", func(w http.ResponseWriter, _ int) { writeJSON(w, 200, "<html>"+bodySecret+"</html>") }, nil,
			molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
		{"truncated JSON", func(w http.ResponseWriter, _ int) { writeJSON(w, 200, plainReply[:80]) }, nil,
			molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
		{"empty choices", func(w http.ResponseWriter, _ int) {
			writeJSON(w, 200, `{"id":"x","object":"chat.completion","model":"gpt-test","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}`)
		}, nil, molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
		{"tool arguments not JSON", func(w http.ResponseWriter, _ int) {
			writeJSON(w, 200, strings.Replace(toolReply, `"{\n\"location\": \"Boston, MA\"\n}"`, `"{`+bodySecret+`"`, 1))
		}, nil, molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
		{"oversize body", func(w http.ResponseWriter, _ int) {
			writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"`+strings.Repeat(bodySecret, 200)+`"}}]}`)
		}, []openai.Option{openai.WithMaxBodyBytes(1024)}, molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newChatServer(t, func(w http.ResponseWriter, r *http.Request, n int) { tc.answer(w, n) })
			c, logs := newClient(t, s, tc.opts...)
			resp, err := c.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
			if got := s.attempts.Load(); got != tc.attempts {
				t.Errorf("attempts = %d; want %d", got, tc.attempts)
			}
			if tc.code == "" {
				if err != nil || resp.Text == "" {
					t.Fatalf("got %+v, %v; want a reply", resp, err)
				}
				return
			}
			t.Logf("error: %v", err)
			wantFailure(t, err, tc.code, tc.reason)
			checkSafe(t, err, logs)
		})
	}
}

// hangingServer accepts requests and never answers them; started reports each one.
func hangingServer(t *testing.T) (*chatServer, chan struct{}) {
	t.Helper()
	started := make(chan struct{}, 10)
	s := newChatServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		started <- struct{}{}
		<-r.Context().Done()
	})
	return s, started
}

func TestPerCallTimeout(t *testing.T) {
	t.Parallel()
	s, _ := hangingServer(t)
	c, logs := newClient(t, s)
	start := time.Now()
	_, err := c.Generate(context.Background(), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}},
		Timeout:  50 * time.Millisecond,
	})
	wantFailure(t, err, molt.EUNAVAILABLE, model.ReasonTimeout)
	checkSafe(t, err, logs)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timed out after %v; want about 50ms", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
}

func TestDefaultTimeout(t *testing.T) {
	t.Parallel()
	s, _ := hangingServer(t)
	c, _ := newClient(t, s, openai.WithDefaultTimeout(30*time.Millisecond))
	_, err := c.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	wantFailure(t, err, molt.EUNAVAILABLE, model.ReasonTimeout)
}

func TestCancelAbortsPromptly(t *testing.T) {
	t.Parallel()
	s, started := hangingServer(t)
	c, _ := newClient(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		done <- err
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		wantFailure(t, err, molt.EUNAVAILABLE, model.ReasonCanceled)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not wrap context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Generate still running 2s after cancel")
	}
	if got := s.attempts.Load(); got != 1 {
		t.Errorf("attempts = %d; want 1 (a cancelled call is not retried)", got)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", APIKey: apiKey, Model: "m"},
		openai.WithRetry(3, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Generate(context.Background(), model.Request{})
	wantFailure(t, err, molt.EUNAVAILABLE, model.ReasonNetwork)
	checkSafe(t, err, nil)
	if !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("error %q; want it retried 3 times", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []openai.Config{
		{BaseURL: "ftp://x", Model: "m"},
		{BaseURL: "not a url", Model: "m"},
		{BaseURL: "http://x", Model: " "},
	} {
		if _, err := openai.New(cfg); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("New(%+v) = %v; want EINVALID", cfg, err)
		}
	}
	c, err := openai.New(openai.Config{Model: "gpt-4o"})
	if err != nil || c.Name() != "openai:gpt-4o" {
		t.Errorf("New with defaults = %v, %v", c, err)
	}
}
