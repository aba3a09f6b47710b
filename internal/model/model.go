package model

import (
	"context"
	"encoding/json"
	"time"
)

// Role says who wrote a message. The system prompt is not a message: it travels in
// Request.System.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"      // the person (or caller) talking to the agent
	RoleAssistant Role = "assistant" // the model; may carry ToolCalls
	RoleTool      Role = "tool"      // results of the previous assistant message's ToolCalls
)

// Message is one entry of the conversation sent to a model. An assistant message
// may carry ToolCalls; the message that follows it (Role tool) carries one
// ToolResult per call, in the same order.
type Message struct {
	Role        Role
	Text        string
	ToolCalls   []ToolCall
	ToolResults []ToolResult
}

// ToolCall is a model's request to run a tool. ID is the provider's identifier,
// echoed back in ToolResult.CallID; Input is a JSON object.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// ToolResult is the outcome of one ToolCall. IsError marks a failed tool run whose
// Content explains the failure to the model.
type ToolResult struct {
	CallID  string
	Content string
	IsError bool
}

// Tool is a tool offered to the model. InputSchema is a JSON Schema object; empty
// means `{"type":"object"}`.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Request is one model call.
type Request struct {
	System   string
	Messages []Message
	Tools    []Tool
	// MaxTokens bounds the reply; 0 leaves the provider's default.
	MaxTokens int
	// Timeout bounds the whole call, the provider's retries included; 0 means the
	// provider's default. The caller's ctx deadline applies as well.
	Timeout time.Duration
}

// Usage counts tokens as the provider reports them (the offline provider
// estimates them with EstimateTokens).
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// Response is a model's answer: text, tool calls, or both.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	// StopReason is normalised: StopEndTurn, StopToolUse, StopMaxTokens, or the
	// provider's own value for anything else (e.g. "content_filtered"). A caller
	// running tools should look at len(ToolCalls), not only at StopReason.
	StopReason string
	Usage      Usage
	// Model is the model that answered, as the provider names it.
	Model string
}

// Normalised stop reasons.
const (
	StopEndTurn   = "end_turn"   // the model finished its reply
	StopToolUse   = "tool_use"   // the model wants ToolCalls run
	StopMaxTokens = "max_tokens" // the reply was cut at Request.MaxTokens
)

// Model is the port every provider implements.
//
// Generate returns a *molt.Error on failure, with Reason set to one of the Reason*
// categories of this package:
//   - EUNAVAILABLE (the call may be retried later): ReasonRateLimited,
//     ReasonServerError, ReasonTimeout, ReasonNetwork, ReasonMalformedResponse,
//     ReasonCanceled. The provider's own bounded retries have already been spent.
//   - EINVALID (retrying the same request will not help): ReasonBadRequest,
//     ReasonAuth.
//
// Error messages never contain a response body or a credential. Cancelling ctx
// aborts an in-flight call promptly.
type Model interface {
	Generate(ctx context.Context, req Request) (Response, error)
	// Name identifies the provider and model, e.g. "offline" or "openai:gpt-4o".
	Name() string
}

// SummarizeMarker starts the system prompt of a summarisation (compaction) request.
// Real models just read the prompt; the offline provider recognises the marker and
// answers with a deterministic summary.
const SummarizeMarker = "molt:summarize"

// NameMarker starts the system prompt of a naming request: the answer is a
// short title for the conversation in the messages.
const NameMarker = "molt:name-session"

// EstimateTokens estimates the number of tokens of s: one token per four bytes,
// rounded up. It is what compaction budgets and the offline provider use.
func EstimateTokens(s string) int {
	return (len(s) + 3) / 4
}
