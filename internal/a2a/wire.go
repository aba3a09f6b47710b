package a2a

import (
	"github.com/molt-dev/molt/internal/a2astate"
	"strings"
	"time"
)

// Protocol versions the endpoint speaks, chosen by the A2A-Version header.
const (
	V03 = "0.3"
	V10 = "1.0"
)

// Task states (v1.0 ProtoJSON names; v0.3 spells them lowercase with dashes): a2astate's.
const (
	StateSubmitted = a2astate.Submitted
	StateWorking   = a2astate.Working
	StateCompleted = a2astate.Completed
	StateFailed    = a2astate.Failed
	StateCanceled  = a2astate.Canceled
	StateRejected  = a2astate.Rejected
)

func terminal(state string) bool { return a2astate.Terminal(state) }

// v03State is a state's v0.3 spelling: TASK_STATE_INPUT_REQUIRED → input-required.
func v03State(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-")
}

// stateFrom reads a state in either spelling; "" when unknown.
func stateFrom(s string) string {
	if strings.HasPrefix(s, "TASK_STATE_") {
		return s
	}
	if s == "" {
		return ""
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// message is a task's message: text only (molt's messages are text).
type message struct {
	ID, ContextID, TaskID string
	Agent                 bool
	Text                  string
}

// task is a turn seen as an A2A task.
type task struct {
	ID, ContextID string
	State         string
	Message       *message // the status message: the reply or the failure notice
	Timestamp     time.Time
	History       []message
	Reply         string // the artifact's text (completed tasks)
}

func textPart(v, text string) map[string]any {
	if v == V03 {
		return map[string]any{"kind": "text", "text": text}
	}
	return map[string]any{"text": text}
}

func (m message) wire(v string) map[string]any {
	out := map[string]any{"messageId": m.ID, "parts": []any{textPart(v, m.Text)}}
	if m.ContextID != "" {
		out["contextId"] = m.ContextID
	}
	if m.TaskID != "" {
		out["taskId"] = m.TaskID
	}
	switch {
	case v == V03 && m.Agent:
		out["role"], out["kind"] = "agent", "message"
	case v == V03:
		out["role"], out["kind"] = "user", "message"
	case m.Agent:
		out["role"] = "ROLE_AGENT"
	default:
		out["role"] = "ROLE_USER"
	}
	return out
}

func (t task) status(v string) map[string]any {
	st := map[string]any{"state": t.State, "timestamp": t.Timestamp.UTC().Format(time.RFC3339Nano)}
	if v == V03 {
		st["state"] = v03State(t.State)
	}
	if t.Message != nil {
		st["message"] = t.Message.wire(v)
	}
	return st
}

func (t task) artifact(v string) map[string]any {
	return map[string]any{"artifactId": t.ID + "-reply", "name": "reply", "parts": []any{textPart(v, t.Reply)}}
}

// wire renders the task; history and artifacts only when asked.
func (t task) wire(v string, history, artifacts bool) map[string]any {
	out := map[string]any{"id": t.ID, "contextId": t.ContextID, "status": t.status(v)}
	if v == V03 {
		out["kind"] = "task"
	}
	if history && len(t.History) > 0 {
		h := make([]any, len(t.History))
		for i, m := range t.History {
			h[i] = m.wire(v)
		}
		out["history"] = h
	}
	if artifacts && t.State == StateCompleted {
		out["artifacts"] = []any{t.artifact(v)}
	}
	return out
}

// statusEvent is a stream's status update.
func (t task) statusEvent(v string) map[string]any {
	ev := map[string]any{"taskId": t.ID, "contextId": t.ContextID, "status": t.status(v)}
	if v == V03 {
		ev["kind"], ev["final"] = "status-update", terminal(t.State)
		return ev
	}
	return map[string]any{"statusUpdate": ev}
}

// artifactEvent is a stream's artifact update (the whole reply, one chunk).
func (t task) artifactEvent(v string) map[string]any {
	ev := map[string]any{"taskId": t.ID, "contextId": t.ContextID, "artifact": t.artifact(v), "lastChunk": true}
	if v == V03 {
		ev["kind"] = "artifact-update"
		return ev
	}
	return map[string]any{"artifactUpdate": ev}
}
