package chat

import (
	"context"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/model"
)

// Loop is one reply of an agent: a system prompt, the conversation, the tools it
// may call and the bounds of its tool loop.
type Loop struct {
	Model     model.Model
	System    string
	Messages  []model.Message
	Tools     []Tool
	MaxSteps  int           // model calls at most (default 8)
	MaxTokens int           // per call; 0: the provider's default
	Timeout   time.Duration // per call; 0: the provider's default
}

// LoopResult is what a reply added to the conversation: assistant messages (those
// before the last carry tool calls) each followed by the tool message with their
// results, ending with the final assistant message.
type LoopResult struct {
	Added     []model.Message
	Steps     int
	Usage     model.Usage
	StepLimit bool // the loop stopped at MaxSteps; the final message says so
}

// Reply returns the final assistant text.
func (r LoopResult) Reply() string {
	if len(r.Added) == 0 {
		return ""
	}
	return r.Added[len(r.Added)-1].Text
}

// maxToolResult bounds the text one tool call returns to the model.
const maxToolResult = 16 << 10

// Run runs the tool loop: it calls the model, runs the tools it asks for (only
// those in l.Tools; any other name is answered with a failed result), passes the
// results back, and repeats until the model answers without tool calls or
// MaxSteps calls were made. A model error ends the loop and is returned as is
// (with model.Reason* categories); nothing of a failed loop is kept. Run writes
// nothing anywhere: the caller commits the result.
func (l Loop) Run(ctx context.Context) (LoopResult, error) {
	maxSteps := l.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 8
	}
	specs := make([]model.Tool, len(l.Tools))
	byName := map[string]Tool{}
	for i, t := range l.Tools {
		specs[i] = t.Spec
		byName[t.Spec.Name] = t
	}
	msgs := append([]model.Message(nil), l.Messages...)
	var res LoopResult
	for res.Steps < maxSteps {
		resp, err := l.Model.Generate(ctx, model.Request{System: l.System, Messages: msgs, Tools: specs,
			MaxTokens: l.MaxTokens, Timeout: l.Timeout})
		if err != nil {
			return LoopResult{}, err
		}
		res.Steps++
		res.Usage.InputTokens += resp.Usage.InputTokens
		res.Usage.OutputTokens += resp.Usage.OutputTokens
		asst := model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
		res.Added = append(res.Added, asst)
		msgs = append(msgs, asst)
		if len(resp.ToolCalls) == 0 {
			return res, nil
		}
		results := make([]model.ToolResult, len(resp.ToolCalls))
		for i, call := range resp.ToolCalls {
			results[i] = runTool(ctx, byName, call)
		}
		if err := ctx.Err(); err != nil {
			return LoopResult{}, model.ContextFailure(ctx, ctx, "tool loop")
		}
		tm := model.Message{Role: model.RoleTool, ToolResults: results}
		res.Added = append(res.Added, tm)
		msgs = append(msgs, tm)
	}
	res.StepLimit = true
	res.Added = append(res.Added, model.Message{Role: model.RoleAssistant,
		Text: fmt.Sprintf("[molt] Stopped after %d model calls without a final answer (the tool step limit).", maxSteps)})
	return res, nil
}

func runTool(ctx context.Context, tools map[string]Tool, call model.ToolCall) model.ToolResult {
	t, ok := tools[call.Name]
	if !ok {
		return model.ToolResult{CallID: call.ID, IsError: true,
			Content: fmt.Sprintf("tool %q is not available to this agent", clip(call.Name, 100))}
	}
	out, err := t.Run(ctx, call.Input)
	if err != nil {
		return model.ToolResult{CallID: call.ID, IsError: true, Content: clip(err.Error(), maxToolResult)}
	}
	return model.ToolResult{CallID: call.ID, Content: clip(out, maxToolResult)}
}
