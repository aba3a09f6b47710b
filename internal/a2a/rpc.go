package a2a

import (
	"encoding/json"
	"fmt"
	"strings"
)

// JSON-RPC and A2A error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethod         = -32601
	codeParams         = -32602
	codeInternal       = -32603
	codeTaskNotFound   = -32001
	codeNotCancelable  = -32002
	codePushNotSupp    = -32003
	codeUnsupported    = -32004
	codeContentType    = -32005
	codeExtendedCard   = -32007
	codeExtension      = -32008
	codeVersion        = -32009
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

func invalidParams(format string, args ...any) error {
	return &rpcError{Code: codeParams, Message: fmt.Sprintf(format, args...)}
}

// request is a JSON-RPC request as received.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// validID: a string, a number or null (absent).
func validID(id json.RawMessage) bool {
	s := strings.TrimSpace(string(id))
	if s == "" || s == "null" {
		return true
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// inMessage is a message a client sends (both versions' fields).
type inMessage struct {
	MessageID string            `json:"messageId"`
	ContextID string            `json:"contextId"`
	TaskID    string            `json:"taskId"`
	Role      string            `json:"role"`
	Parts     []json.RawMessage `json:"parts"`
	Kind      string            `json:"kind"`
	Metadata  map[string]any    `json:"metadata"`
}

// text joins the message's text parts; a part of another kind is -32005.
func (m *inMessage) text() (string, error) {
	if m == nil {
		return "", invalidParams("params.message is required")
	}
	switch m.Role {
	case "ROLE_USER", "user":
	case "":
		return "", invalidParams("message.role is required")
	default:
		return "", invalidParams("message.role must be ROLE_USER")
	}
	if len(m.Parts) == 0 {
		return "", invalidParams("message.parts is empty")
	}
	var b strings.Builder
	for i, raw := range m.Parts {
		var p struct {
			Kind string  `json:"kind"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", invalidParams("message.parts[%d] is not a part", i)
		}
		if p.Text == nil || (p.Kind != "" && p.Kind != "text") {
			return "", &rpcError{Code: codeContentType, Message: fmt.Sprintf("message.parts[%d]: this agent accepts text parts only", i)}
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(*p.Text)
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", invalidParams("message has no text")
	}
	return b.String(), nil
}

// sendParams are SendMessage's (and message/send's) params.
type sendParams struct {
	Message       *inMessage `json:"message"`
	Configuration *struct {
		AcceptedOutputModes []string        `json:"acceptedOutputModes"`
		HistoryLength       *int            `json:"historyLength"`
		ReturnImmediately   bool            `json:"returnImmediately"`
		Blocking            *bool           `json:"blocking"`                   // v0.3
		PushConfig          json.RawMessage `json:"taskPushNotificationConfig"` // v1.0
		PushConfig03        json.RawMessage `json:"pushNotificationConfig"`     // v0.3
	} `json:"configuration"`
	Metadata map[string]json.RawMessage `json:"metadata"`
	Tenant   string                     `json:"tenant"`
}

// getParams are GetTask's, CancelTask's and SubscribeToTask's params.
type getParams struct {
	ID            string                     `json:"id"`
	HistoryLength *int                       `json:"historyLength"`
	Metadata      map[string]json.RawMessage `json:"metadata"`
	Tenant        string                     `json:"tenant"`
}

// listParams are ListTasks' params.
type listParams struct {
	ContextID            string `json:"contextId"`
	Status               string `json:"status"`
	PageSize             *int   `json:"pageSize"`
	PageToken            string `json:"pageToken"`
	HistoryLength        *int   `json:"historyLength"`
	StatusTimestampAfter string `json:"statusTimestampAfter"`
	IncludeArtifacts     *bool  `json:"includeArtifacts"`
	Tenant               string `json:"tenant"`
}

// decodeParams decodes params strictly enough: an object, known fields
// ignored if unknown (clients add fields across versions).
// taskParams decodes the params of a method that names one task
// (get, cancel, resubscribe): params.id is required.
func taskParams(raw json.RawMessage) (getParams, error) {
	var p getParams
	if err := decodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.ID == "" {
		return p, invalidParams("params.id is required")
	}
	return p, nil
}

func decodeParams(raw json.RawMessage, v any) error {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		s = "{}"
	}
	if !strings.HasPrefix(s, "{") {
		return invalidParams("params must be an object")
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return invalidParams("params: %v", err)
	}
	return nil
}

// methods maps each version's method names to molt's operations.
var methods = map[string]map[string]string{
	V10: {
		"SendMessage": "send", "SendStreamingMessage": "stream", "GetTask": "get", "ListTasks": "list",
		"CancelTask": "cancel", "SubscribeToTask": "subscribe",
		"CreateTaskPushNotificationConfig": "push", "GetTaskPushNotificationConfig": "push",
		"ListTaskPushNotificationConfigs": "push", "DeleteTaskPushNotificationConfig": "push",
		"GetExtendedAgentCard": "extended",
	},
	V03: {
		"message/send": "send", "message/stream": "stream", "tasks/get": "get", "tasks/cancel": "cancel",
		"tasks/resubscribe":                "subscribe",
		"tasks/pushNotificationConfig/set": "push", "tasks/pushNotificationConfig/get": "push",
		"tasks/pushNotificationConfig/list": "push", "tasks/pushNotificationConfig/delete": "push",
		"agent/getAuthenticatedExtendedCard": "extended",
	},
}

func init() {
	for _, m := range methods {
		for _, name := range campaignMethods {
			m[name] = name
		}
	}
}

// campaignMethods are the extension's methods (the same name in every version).
var campaignMethods = []string{"campaign/claim", "campaign/renew", "campaign/release", "campaign/get", "campaign/getRequest"}

// version reads the A2A-Version header (or query parameter): absent is 0.3;
// 1.0 and 0.3 with any patch are served; anything else is -32009.
func version(header string) (string, error) {
	v := strings.TrimSpace(header)
	switch {
	case v == "":
		return V03, nil
	case v == "1" || v == "1.0" || strings.HasPrefix(v, "1.0."):
		return V10, nil
	case v == "0.3" || strings.HasPrefix(v, "0.3."):
		return V03, nil
	}
	return "", &rpcError{Code: codeVersion, Message: fmt.Sprintf("A2A-Version %q is not supported; this agent speaks 1.0 and 0.3", v)}
}
