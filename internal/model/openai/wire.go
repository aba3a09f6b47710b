package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
)

// The chat completions wire format, the subset molt uses.

type chatRequest struct {
	Model     string        `json:"model"`
	Messages  []chatMessage `json:"messages"`
	Tools     []chatTool    `json:"tools,omitempty"`
	MaxTokens int           `json:"max_tokens,omitempty"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"` // null on an assistant message with only tool calls
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object, encoded as a string
}

type chatTool struct {
	Type     string          `json:"type"`
	Function chatFunctionDef `json:"function"`
}

type chatFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

var emptyObject = json.RawMessage(`{}`)

func (c *Client) wireRequest(req model.Request) chatRequest {
	out := chatRequest{Model: c.model, MaxTokens: max(req.MaxTokens, 0)}
	if req.System != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		// Tool results become one "tool" message each, whatever the role they came in.
		for _, r := range m.ToolResults {
			content := r.Content
			if r.IsError {
				// The format has no error flag: say it in the content.
				content = "error: " + content
			}
			out.Messages = append(out.Messages, chatMessage{Role: "tool", Content: &content, ToolCallID: r.CallID})
		}
		switch m.Role {
		case model.RoleTool:
			if m.Text != "" {
				text := m.Text
				out.Messages = append(out.Messages, chatMessage{Role: "user", Content: &text})
			}
		case model.RoleAssistant:
			msg := chatMessage{Role: "assistant"}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				text := m.Text
				msg.Content = &text
			}
			for _, tc := range m.ToolCalls {
				args := tc.Input
				if len(bytes.TrimSpace(args)) == 0 {
					args = emptyObject
				}
				msg.ToolCalls = append(msg.ToolCalls, chatToolCall{
					ID: tc.ID, Type: "function",
					Function: chatFunction{Name: tc.Name, Arguments: string(args)},
				})
			}
			out.Messages = append(out.Messages, msg)
		default:
			if m.Text != "" || len(m.ToolResults) == 0 {
				text := m.Text
				out.Messages = append(out.Messages, chatMessage{Role: "user", Content: &text})
			}
		}
	}
	for _, t := range req.Tools {
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function",
			Function: chatFunctionDef{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	return out
}

func (c *Client) parse(data []byte) (model.Response, *molt.Error) {
	const what = "openai chat completions"
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return model.Response{}, model.Fail(model.ReasonMalformedResponse, what+": response is not the expected JSON", nil)
	}
	if len(cr.Choices) == 0 {
		return model.Response{}, model.Fail(model.ReasonMalformedResponse, what+": response has no choices", nil)
	}
	ch := cr.Choices[0]
	resp := model.Response{
		StopReason: stopReason(ch.FinishReason),
		Usage:      model.Usage{InputTokens: cr.Usage.PromptTokens, OutputTokens: cr.Usage.CompletionTokens},
		Model:      cr.Model,
	}
	if resp.Model == "" {
		resp.Model = c.model
	}
	if ch.Message.Content != nil {
		resp.Text = *ch.Message.Content
	}
	for i, tc := range ch.Message.ToolCalls {
		if tc.Function.Name == "" {
			return model.Response{}, model.Fail(model.ReasonMalformedResponse,
				fmt.Sprintf("%s: tool call %d has no name", what, i), nil)
		}
		input := json.RawMessage(tc.Function.Arguments)
		if len(bytes.TrimSpace(input)) == 0 {
			input = emptyObject
		}
		if !json.Valid(input) {
			return model.Response{}, model.Fail(model.ReasonMalformedResponse,
				fmt.Sprintf("%s: tool call %d arguments are not JSON", what, i), nil)
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	if len(resp.ToolCalls) > 0 && resp.StopReason == model.StopEndTurn {
		resp.StopReason = model.StopToolUse
	}
	return resp, nil
}

func stopReason(finish string) string {
	switch finish {
	case "stop", "":
		return model.StopEndTurn
	case "tool_calls", "function_call":
		return model.StopToolUse
	case "length":
		return model.StopMaxTokens
	case "content_filter":
		return "content_filtered"
	default:
		return finish
	}
}
