package offline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/model"
)

// Label starts every reply of the built-in rules.
const Label = "[offline model]"

// Name is the offline provider's name and Response.Model.
const Name = "offline"

// TriggerPrefix starts a line of a user message that asks for a tool call.
const TriggerPrefix = "/tool "

// Handler answers the requests it recognises and returns ok=false for the others.
// It must be a pure function of req, and its replies must stay recognisably
// offline (start with Label where the format allows it).
type Handler func(req model.Request) (resp model.Response, ok bool)

// Model is the offline provider. Its zero value is ready to use.
type Model struct {
	handlers []Handler
}

var _ model.Model = (*Model)(nil)

// New returns an offline Model that consults handlers before its built-in rules.
func New(handlers ...Handler) *Model {
	return &Model{handlers: handlers}
}

// Name returns "offline".
func (m *Model) Name() string { return Name }

// Generate answers req deterministically; see the package documentation.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if ctx.Err() != nil {
		return model.Response{}, model.ContextFailure(ctx, ctx, "offline model")
	}
	var resp model.Response
	ok := false
	for _, h := range m.handlers {
		if resp, ok = h(req); ok {
			break
		}
	}
	if !ok {
		resp = builtin(req)
	}
	if resp.StopReason == "" {
		resp.StopReason = model.StopEndTurn
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = model.StopToolUse
		}
	}
	if req.MaxTokens > 0 && len(resp.ToolCalls) == 0 && len(resp.Text) > req.MaxTokens*4 {
		resp.Text = cut(resp.Text, req.MaxTokens*4)
		resp.StopReason = model.StopMaxTokens
	}
	if resp.Usage == (model.Usage{}) {
		resp.Usage = Usage(req, resp)
	}
	resp.Model = Name
	return resp, nil
}

func builtin(req model.Request) model.Response {
	if strings.HasPrefix(req.System, model.SummarizeMarker) {
		return model.Response{Text: summarize(req.Messages)}
	}
	if strings.HasPrefix(req.System, model.NameMarker) {
		return model.Response{Text: title(req.Messages)}
	}
	if len(req.Messages) > 0 {
		last := req.Messages[len(req.Messages)-1]
		if len(last.ToolResults) > 0 {
			return model.Response{Text: toolResults(req.Messages)}
		}
		if len(req.Tools) > 0 && last.Role == model.RoleUser {
			if resp, ok := trigger(req); ok {
				return resp
			}
		}
	}
	return model.Response{Text: echo(req)}
}

func summarize(msgs []model.Message) string {
	const listed = 8
	count := map[model.Role]int{}
	var lines []string
	for _, m := range msgs {
		count[m.Role]++
		if first := firstLine(m.Text, 80); first != "" {
			lines = append(lines, fmt.Sprintf("- %s: %s", m.Role, first))
		}
	}
	if len(lines) > listed {
		lines = lines[len(lines)-listed:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s Summary of %d messages (%d user, %d assistant, %d tool).",
		Label, len(msgs), count[model.RoleUser], count[model.RoleAssistant], count[model.RoleTool])
	for _, l := range lines {
		b.WriteString("\n" + l)
	}
	return b.String()
}

func toolResults(msgs []model.Message) string {
	names := map[string]string{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
		}
	}
	var b strings.Builder
	b.WriteString(Label + " Tool results:")
	for _, r := range msgs[len(msgs)-1].ToolResults {
		name := names[r.CallID]
		if name == "" {
			name = "unknown tool"
		}
		failed := ""
		if r.IsError {
			failed = " failed"
		}
		fmt.Fprintf(&b, "\n- %s (%s)%s: %s", name, r.CallID, failed, firstLine(r.Content, 200))
	}
	return b.String()
}

func trigger(req model.Request) (model.Response, bool) {
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Name] = true
	}
	last := req.Messages[len(req.Messages)-1]
	var resp model.Response
	var texts []string
	for i, line := range strings.Split(last.Text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, TriggerPrefix) {
			continue
		}
		name, input, _ := strings.Cut(strings.TrimSpace(line[len(TriggerPrefix):]), " ")
		input = strings.TrimSpace(input)
		if input == "" {
			input = "{}"
		}
		switch {
		case !offered[name]:
			return model.Response{Text: fmt.Sprintf("%s Cannot call tool %q: it is not offered.", Label, name)}, true
		case !isObject(input):
			return model.Response{Text: fmt.Sprintf("%s Cannot call tool %q: its input is not a JSON object.", Label, name)}, true
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, []byte(input))
		sum := sha256.Sum256([]byte(strconv.Itoa(len(req.Messages)) + "\x00" + strconv.Itoa(i) + "\x00" + name + "\x00" + compact.String()))
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{
			ID:    "offline-" + hex.EncodeToString(sum[:8]),
			Name:  name,
			Input: json.RawMessage(compact.Bytes()),
		})
		texts = append(texts, fmt.Sprintf("%s Calling tool %s.", Label, name))
	}
	if len(resp.ToolCalls) == 0 {
		return model.Response{}, false
	}
	resp.Text = strings.Join(texts, "\n")
	return resp, true
}

func isObject(s string) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &v) == nil && v != nil
}

func echo(req model.Request) string {
	lastUser := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			lastUser = req.Messages[i].Text
			break
		}
	}
	return fmt.Sprintf("%s This is a deterministic offline reply, not a real model.\nMessages: %d. System prompt: %q.\nLast user message: %q.",
		Label, len(req.Messages), firstLine(req.System, 80), shorten(strings.Join(strings.Fields(lastUser), " "), 200))
}

// Usage estimates the tokens of req (input) and resp (output) with
// model.EstimateTokens.
func Usage(req model.Request, resp model.Response) model.Usage {
	in := model.EstimateTokens(req.System)
	for _, t := range req.Tools {
		in += model.EstimateTokens(t.Name) + model.EstimateTokens(t.Description) + model.EstimateTokens(string(t.InputSchema))
	}
	for _, m := range req.Messages {
		in += model.EstimateTokens(m.Text)
		for _, tc := range m.ToolCalls {
			in += model.EstimateTokens(tc.Name) + model.EstimateTokens(string(tc.Input))
		}
		for _, r := range m.ToolResults {
			in += model.EstimateTokens(r.Content)
		}
	}
	out := model.EstimateTokens(resp.Text)
	for _, tc := range resp.ToolCalls {
		out += model.EstimateTokens(tc.Name) + model.EstimateTokens(string(tc.Input))
	}
	return model.Usage{InputTokens: in, OutputTokens: out}
}

// firstLine returns the first non-blank line of s, trimmed and shortened to n
// characters.
func firstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return shorten(l, n)
		}
	}
	return ""
}

// shorten cuts s to at most n characters, marking a cut with "…".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// cut returns the longest prefix of s of at most n bytes that ends on a character
// boundary.
func cut(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// title is the naming answer: "Offline: " and the first words of the first
// user message.
func title(msgs []model.Message) string {
	for _, m := range msgs {
		if m.Role == model.RoleUser {
			if words := strings.Fields(m.Text); len(words) > 0 {
				return "Offline: " + shorten(strings.Join(words[:min(len(words), 6)], " "), 60)
			}
		}
	}
	return "Offline: untitled conversation"
}
