package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/bedrock"
	"github.com/molt-dev/molt/internal/molt"
)

const (
	modelID    = "anthropic.claude-test-v1:0"
	accessKey  = "AKIDTESTMOLT"
	secretKey  = "SECRETKEY-9b27e1"
	bodySecret = "BODY-SECRET-7c1e"
)

// converseServer speaks the Converse REST/JSON wire format on 127.0.0.1.
type converseServer struct {
	*httptest.Server
	attempts atomic.Int32
	mu       sync.Mutex
	lastBody map[string]any
}

func newConverseServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, attempt int)) *converseServer {
	t.Helper()
	s := &converseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.attempts.Add(1))
		if r.Method != http.MethodPost || r.URL.Path != "/model/"+modelID+"/converse" {
			t.Errorf("request %s %s; want POST /model/%s/converse", r.Method, r.URL.Path, modelID)
		}
		if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+accessKey+"/") ||
			!strings.Contains(auth, "/us-east-1/bedrock/aws4_request") {
			t.Errorf("Authorization = %q; want a SigV4 signature for bedrock in us-east-1", auth)
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

func newModel(t *testing.T, s *converseServer) *bedrock.Model {
	t.Helper()
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	}
	client := bedrock.NewClient(cfg, func(o *bedrockruntime.Options) {
		o.BaseEndpoint = aws.String(s.URL)
		o.Retryer = bedrock.Retryer(3, time.Millisecond)
	})
	m, err := bedrock.New(client, modelID)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Requestid", "req-1")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// writeError answers as Bedrock does: status, X-Amzn-ErrorType and a JSON message.
func writeError(w http.ResponseWriter, status int, errType string) {
	w.Header().Set("X-Amzn-ErrorType", errType+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, status, `{"message":"`+bodySecret+` details"}`)
}

const textReply = `{"metrics":{"latencyMs":312},"output":{"message":{"content":[{"text":"Hello"},{"text":" there!"}],"role":"assistant"}},
"stopReason":"end_turn","usage":{"inputTokens":21,"outputTokens":7,"totalTokens":28}}`

const toolReply = `{"metrics":{"latencyMs":800},"output":{"message":{"role":"assistant","content":[
{"text":"Let me check."},
{"toolUse":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","name":"get_weather","input":{"location":"Boston, MA","days":3}}}]}},
"stopReason":"tool_use","usage":{"inputTokens":390,"outputTokens":89,"totalTokens":479}}`

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
	for _, secret := range []string{bodySecret, secretKey} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
	}
}

func TestRequestShapeAndTextReply(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, 200, textReply) })
	m := newModel(t, s)
	resp, err := m.Generate(context.Background(), model.Request{
		System: "You are helpful.",
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "What's the weather?"},
			{Role: model.RoleAssistant, Text: "Checking.", ToolCalls: []model.ToolCall{
				{ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"location":"Boston","days":3}`)},
				{ID: "call_2", Name: "get_time"},
			}},
			{Role: model.RoleTool, ToolResults: []model.ToolResult{
				{CallID: "call_1", Content: "sunny"},
				{CallID: "call_2", Content: "no clock", IsError: true},
			}},
			// Follows the tool results directly: merged into the same user turn.
			{Role: model.RoleUser, Text: "Thanks"},
		},
		Tools: []model.Tool{
			{Name: "get_weather", Description: "Weather for a place", InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)},
			{Name: "get_time"},
		},
		MaxTokens: 256,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Response{Text: "Hello there!", StopReason: model.StopEndTurn,
		Usage: model.Usage{InputTokens: 21, OutputTokens: 7}, Model: modelID}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response = %+v\nwant       %+v", resp, want)
	}
	var wantBody map[string]any
	if err := json.Unmarshal([]byte(`{
		"system": [{"text": "You are helpful."}],
		"inferenceConfig": {"maxTokens": 256},
		"messages": [
			{"role": "user", "content": [{"text": "What's the weather?"}]},
			{"role": "assistant", "content": [
				{"text": "Checking."},
				{"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"location": "Boston", "days": 3}}},
				{"toolUse": {"toolUseId": "call_2", "name": "get_time", "input": {}}}
			]},
			{"role": "user", "content": [
				{"toolResult": {"toolUseId": "call_1", "content": [{"text": "sunny"}]}},
				{"toolResult": {"toolUseId": "call_2", "content": [{"text": "no clock"}], "status": "error"}},
				{"text": "Thanks"}
			]}
		],
		"toolConfig": {"tools": [
			{"toolSpec": {"name": "get_weather", "description": "Weather for a place",
				"inputSchema": {"json": {"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}},
			{"toolSpec": {"name": "get_time", "inputSchema": {"json": {"type": "object"}}}}
		]}
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
	if m.Name() != "bedrock:"+modelID {
		t.Errorf("Name = %q", m.Name())
	}
}

func TestToolUseReply(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, 200, toolReply) })
	resp, err := newModel(t, s).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "weather?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != model.StopToolUse || resp.Text != "Let me check." || len(resp.ToolCalls) != 1 {
		t.Fatalf("response = %+v", resp)
	}
	tc := resp.ToolCalls[0]
	var input map[string]any
	if err := json.Unmarshal(tc.Input, &input); err != nil {
		t.Fatalf("input %s: %v", tc.Input, err)
	}
	if tc.ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || tc.Name != "get_weather" || input["location"] != "Boston, MA" || input["days"] != 3.0 {
		t.Errorf("tool call = %+v (%s)", tc, tc.Input)
	}
	if resp.Usage != (model.Usage{InputTokens: 390, OutputTokens: 89}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	s.mu.Lock()
	_, hasTools := s.lastBody["toolConfig"]
	_, hasInference := s.lastBody["inferenceConfig"]
	_, hasSystem := s.lastBody["system"]
	s.mu.Unlock()
	if hasTools || hasInference || hasSystem {
		t.Errorf("toolConfig, inferenceConfig or system sent though empty: %v", s.lastBody)
	}
}

func TestErrorMatrix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		answer       func(w http.ResponseWriter, n int)
		code, reason string
		attempts     int32
	}{
		{"throttled then success", func(w http.ResponseWriter, n int) {
			if n == 1 {
				writeError(w, 429, "ThrottlingException")
				return
			}
			writeJSON(w, 200, textReply)
		}, "", "", 2},
		{"throttled three times", func(w http.ResponseWriter, _ int) { writeError(w, 429, "ThrottlingException") },
			molt.EUNAVAILABLE, model.ReasonRateLimited, 3},
		{"500 three times", func(w http.ResponseWriter, _ int) { writeError(w, 500, "InternalServerException") },
			molt.EUNAVAILABLE, model.ReasonServerError, 3},
		{"503 three times", func(w http.ResponseWriter, _ int) { writeError(w, 503, "ServiceUnavailableException") },
			molt.EUNAVAILABLE, model.ReasonServerError, 3},
		{"bare 502", func(w http.ResponseWriter, _ int) { writeJSON(w, 502, "<html>"+bodySecret+"</html>") },
			molt.EUNAVAILABLE, model.ReasonServerError, 3},
		{"validation not retried", func(w http.ResponseWriter, _ int) { writeError(w, 400, "ValidationException") },
			molt.EINVALID, model.ReasonBadRequest, 1},
		{"model not found", func(w http.ResponseWriter, _ int) { writeError(w, 404, "ResourceNotFoundException") },
			molt.EINVALID, model.ReasonBadRequest, 1},
		{"access denied", func(w http.ResponseWriter, _ int) { writeError(w, 403, "AccessDeniedException") },
			molt.EINVALID, model.ReasonAuth, 1},
		{"bad signature", func(w http.ResponseWriter, _ int) { writeError(w, 403, "UnrecognizedClientException") },
			molt.EINVALID, model.ReasonAuth, 1},
		{"garbage body", func(w http.ResponseWriter, _ int) { writeJSON(w, 200, "<html>"+bodySecret+"</html>") },
			molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
		{"no output", func(w http.ResponseWriter, _ int) {
			writeJSON(w, 200, `{"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`)
		}, molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
		{"oversize body", func(w http.ResponseWriter, _ int) {
			writeJSON(w, 200, `{"output":{"message":{"role":"assistant","content":[{"text":"`+
				strings.Repeat("x", bedrock.MaxBodyBytes)+bodySecret+`"}]}},"stopReason":"end_turn"}`)
		}, molt.EUNAVAILABLE, model.ReasonMalformedResponse, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newConverseServer(t, func(w http.ResponseWriter, r *http.Request, n int) { tc.answer(w, n) })
			resp, err := newModel(t, s).Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
			if got := s.attempts.Load(); got != tc.attempts {
				t.Errorf("attempts = %d; want %d", got, tc.attempts)
			}
			if tc.code == "" {
				if err != nil || resp.Text != "Hello there!" {
					t.Fatalf("got %+v, %v; want a reply", resp, err)
				}
				return
			}
			t.Logf("error: %v", err)
			wantFailure(t, err, tc.code, tc.reason)
		})
	}
}

func hangingServer(t *testing.T) (*converseServer, chan struct{}) {
	t.Helper()
	started := make(chan struct{}, 10)
	s := newConverseServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		started <- struct{}{}
		<-r.Context().Done()
	})
	return s, started
}

func TestPerCallTimeout(t *testing.T) {
	t.Parallel()
	s, _ := hangingServer(t)
	start := time.Now()
	_, err := newModel(t, s).Generate(context.Background(), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}},
		Timeout:  50 * time.Millisecond,
	})
	wantFailure(t, err, molt.EUNAVAILABLE, model.ReasonTimeout)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timed out after %v; want about 50ms", d)
	}
}

func TestCancelAbortsPromptly(t *testing.T) {
	t.Parallel()
	s, started := hangingServer(t)
	m := newModel(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		done <- err
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		wantFailure(t, err, molt.EUNAVAILABLE, model.ReasonCanceled)
	case <-time.After(2 * time.Second):
		t.Fatal("Generate still running 2s after cancel")
	}
	if got := s.attempts.Load(); got != 1 {
		t.Errorf("attempts = %d; want 1", got)
	}
}

func TestInvalidToolInputIsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeJSON(w, 200, textReply) })
	_, err := newModel(t, s).Generate(context.Background(), model.Request{Messages: []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "t", Input: json.RawMessage(`[1]`)}}},
	}})
	if molt.ErrorCode(err) != molt.EINVALID {
		t.Errorf("err = %v; want EINVALID", err)
	}
	if got := s.attempts.Load(); got != 0 {
		t.Errorf("attempts = %d; want 0", got)
	}
	if _, err := bedrock.New(nil, ""); molt.ErrorCode(err) != molt.EINVALID {
		t.Errorf("New with empty model id = %v; want EINVALID", err)
	}
}
