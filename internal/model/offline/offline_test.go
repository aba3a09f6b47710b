package offline_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
)

var echoTool = model.Tool{Name: "echo", Description: "echoes", InputSchema: json.RawMessage(`{"type":"object"}`)}

func generate(t *testing.T, m model.Model, req model.Request) model.Response {
	t.Helper()
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return resp
}

func TestEchoIsLabelledAndDeterministic(t *testing.T) {
	t.Parallel()
	req := model.Request{
		System: "You are the main agent.\nMore rules.",
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "first"},
			{Role: model.RoleAssistant, Text: "ok"},
			{Role: model.RoleUser, Text: "hello\nthere   world"},
		},
	}
	a := generate(t, offline.New(), req)
	b := generate(t, offline.New(), req)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("not deterministic:\n%+v\n%+v", a, b)
	}
	if !strings.HasPrefix(a.Text, offline.Label) {
		t.Errorf("text %q does not start with %q", a.Text, offline.Label)
	}
	for _, want := range []string{"not a real model", "Messages: 3.", `"You are the main agent."`, `"hello there world"`} {
		if !strings.Contains(a.Text, want) {
			t.Errorf("text %q lacks %q", a.Text, want)
		}
	}
	if strings.Contains(a.Text, "More rules") {
		t.Errorf("text %q quotes more than the system prompt's first line", a.Text)
	}
	if a.Model != "offline" || a.StopReason != model.StopEndTurn {
		t.Errorf("model, stop = %q, %q; want offline, end_turn", a.Model, a.StopReason)
	}
	wantIn := model.EstimateTokens(req.System) + model.EstimateTokens("first") + model.EstimateTokens("ok") + model.EstimateTokens("hello\nthere   world")
	if a.Usage.InputTokens != wantIn || a.Usage.OutputTokens != model.EstimateTokens(a.Text) {
		t.Errorf("usage = %+v; want input %d, output %d", a.Usage, wantIn, model.EstimateTokens(a.Text))
	}
	// A different request gives a different answer.
	req.Messages[2].Text = "something else"
	if c := generate(t, offline.New(), req); c.Text == a.Text {
		t.Errorf("different input, same reply %q", c.Text)
	}
}

func TestToolTriggerAndResult(t *testing.T) {
	t.Parallel()
	m := offline.New()
	msgs := []model.Message{{Role: model.RoleUser, Text: "please\n/tool echo {\"text\": \"hi\"}\n/tool echo"}}
	req := model.Request{Messages: msgs, Tools: []model.Tool{echoTool}}
	resp := generate(t, m, req)
	if resp.StopReason != model.StopToolUse || len(resp.ToolCalls) != 2 {
		t.Fatalf("stop %q, calls %+v; want tool_use with 2 calls", resp.StopReason, resp.ToolCalls)
	}
	if got := string(resp.ToolCalls[0].Input); got != `{"text":"hi"}` {
		t.Errorf("input 0 = %s", got)
	}
	if got := string(resp.ToolCalls[1].Input); got != `{}` {
		t.Errorf("input 1 = %s; want {}", got)
	}
	if resp.ToolCalls[0].Name != "echo" || !strings.HasPrefix(resp.ToolCalls[0].ID, "offline-") || resp.ToolCalls[0].ID == resp.ToolCalls[1].ID {
		t.Errorf("calls = %+v", resp.ToolCalls)
	}
	if again := generate(t, m, req); !reflect.DeepEqual(again, resp) {
		t.Errorf("tool call not deterministic: %+v vs %+v", again, resp)
	}
	if !strings.HasPrefix(resp.Text, offline.Label) {
		t.Errorf("text %q not labelled", resp.Text)
	}

	// Without tools offered the trigger is just text.
	if plain := generate(t, m, model.Request{Messages: msgs}); len(plain.ToolCalls) != 0 {
		t.Errorf("tool called without tools offered: %+v", plain.ToolCalls)
	}

	// The tool result is summarised, and no further tool is called.
	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, ToolResults: []model.ToolResult{
			{CallID: resp.ToolCalls[0].ID, Content: "hi\nsecond line"},
			{CallID: resp.ToolCalls[1].ID, Content: "boom", IsError: true},
		}})
	after := generate(t, m, model.Request{Messages: msgs, Tools: []model.Tool{echoTool}})
	if len(after.ToolCalls) != 0 || after.StopReason != model.StopEndTurn {
		t.Fatalf("after results: calls %+v stop %q", after.ToolCalls, after.StopReason)
	}
	want := offline.Label + " Tool results:\n- echo (" + resp.ToolCalls[0].ID + "): hi\n- echo (" + resp.ToolCalls[1].ID + ") failed: boom"
	if after.Text != want {
		t.Errorf("text = %q\nwant   %q", after.Text, want)
	}
}

func TestToolTriggerRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{"/tool missing {}", `Cannot call tool "missing": it is not offered.`},
		{"/tool echo [1,2]", `Cannot call tool "echo": its input is not a JSON object.`},
		{"/tool echo {broken", `Cannot call tool "echo": its input is not a JSON object.`},
	} {
		resp := generate(t, offline.New(), model.Request{
			Messages: []model.Message{{Role: model.RoleUser, Text: tc.text}},
			Tools:    []model.Tool{echoTool},
		})
		if len(resp.ToolCalls) != 0 || resp.Text != offline.Label+" "+tc.want {
			t.Errorf("%q: got %q calls %+v; want %q", tc.text, resp.Text, resp.ToolCalls, tc.want)
		}
	}
}

func TestSummarizeMarker(t *testing.T) {
	t.Parallel()
	var msgs []model.Message
	for i := range 10 {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Text: strings.Repeat("u", i+1) + "\nmore"},
			model.Message{Role: model.RoleAssistant, Text: "a" + strings.Repeat("x", 100)})
	}
	msgs = append(msgs, model.Message{Role: model.RoleTool, ToolResults: []model.ToolResult{{CallID: "c", Content: "r"}}})
	req := model.Request{System: model.SummarizeMarker + "\nSummarise the conversation.", Messages: msgs}
	resp := generate(t, offline.New(), req)
	lines := strings.Split(resp.Text, "\n")
	if lines[0] != offline.Label+" Summary of 21 messages (10 user, 10 assistant, 1 tool)." {
		t.Errorf("header = %q", lines[0])
	}
	if len(lines) != 9 {
		t.Fatalf("got %d lines, want header + 8:\n%s", len(lines), resp.Text)
	}
	if lines[1] != "- user: uuuuuuu" || lines[8] != "- assistant: a"+strings.Repeat("x", 78)+"…" {
		t.Errorf("listing:\n%s", resp.Text)
	}
	if again := generate(t, offline.New(), req); again.Text != resp.Text {
		t.Error("summary not deterministic")
	}
	// Without the marker the same messages are echoed, not summarised.
	req.System = "Summarise.\n" + model.SummarizeMarker
	if echo := generate(t, offline.New(), req); strings.Contains(echo.Text, "Summary of") {
		t.Errorf("marker not at the start still summarised: %q", echo.Text)
	}
}

func TestMaxTokensCutsText(t *testing.T) {
	t.Parallel()
	resp := generate(t, offline.New(), model.Request{
		Messages:  []model.Message{{Role: model.RoleUser, Text: "héllo wörld"}},
		MaxTokens: 5,
	})
	if resp.StopReason != model.StopMaxTokens || len(resp.Text) > 20 || !strings.HasPrefix(resp.Text, offline.Label) {
		t.Errorf("got %q (%d bytes), stop %q; want at most 20 bytes, max_tokens", resp.Text, len(resp.Text), resp.StopReason)
	}
}

func TestHandlersComeFirst(t *testing.T) {
	t.Parallel()
	m := offline.New(
		func(req model.Request) (model.Response, bool) { return model.Response{}, false },
		func(req model.Request) (model.Response, bool) {
			if strings.HasPrefix(req.System, "draft") {
				return model.Response{Text: offline.Label + " draft"}, true
			}
			return model.Response{}, false
		},
	)
	if r := generate(t, m, model.Request{System: "draft a patch"}); r.Text != offline.Label+" draft" || r.Model != "offline" || r.StopReason != model.StopEndTurn {
		t.Errorf("handler reply = %+v", r)
	}
	if r := generate(t, m, model.Request{System: "chat"}); !strings.Contains(r.Text, "not a real model") {
		t.Errorf("fallthrough reply = %q", r.Text)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := offline.New().Generate(ctx, model.Request{})
	if molt.ErrorCode(err) != molt.EUNAVAILABLE || molt.ErrorReason(err) != model.ReasonCanceled {
		t.Errorf("err = %v; want unavailable/canceled", err)
	}
}
