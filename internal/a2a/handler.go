package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Config wires the A2A endpoint. Store and Chat are required.
type Config struct {
	Store store.Store
	Chat  *chat.Service
	// Protocol writes the campaign-control extension's records; nil serves
	// no extension (the card lists none, its methods are -32601).
	Protocol *work.Protocol
	Clock    molt.Clock
	Logger   *slog.Logger
	// BlockWait bounds a blocking SendMessage: past it the task is returned as
	// it is (working). Default 25 s, under API Gateway's 30 s cut.
	BlockWait time.Duration
	// Poll is how often a waiting request or a stream reads the task again
	// (default 250 ms).
	Poll time.Duration
	// StreamFor bounds one SSE stream (default 10 minutes).
	StreamFor time.Duration
	// Streaming: this endpoint serves SSE (molt serve, a function URL in
	// RESPONSE_STREAM mode); false behind API Gateway, which buffers.
	Streaming bool
	// StreamURL, when set, is the base URL of the endpoint that streams (the
	// function URL): the card lists it as an interface with streaming.
	StreamURL string
	// MaxBody limits a request body (default 1 MiB).
	MaxBody int64
}

// Handler serves the agent cards and the JSON-RPC endpoint.
type Handler struct {
	store  store.Store
	chat   *chat.Service
	clock  molt.Clock
	log    *slog.Logger
	cfg    Config
	surfac *workspace.Surfaces
	proto  *work.Protocol
}

// New returns the A2A handler; it panics without Store or Chat.
func New(c Config) *Handler {
	if c.Store == nil || c.Chat == nil {
		panic("a2a: Config.Store and Config.Chat are required")
	}
	if c.Clock == nil {
		c.Clock = molt.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.BlockWait <= 0 {
		c.BlockWait = 25 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = 250 * time.Millisecond
	}
	if c.StreamFor <= 0 {
		c.StreamFor = 10 * time.Minute
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 1 << 20
	}
	return &Handler{store: c.Store, chat: c.Chat, clock: c.Clock, log: c.Logger, cfg: c,
		surfac: &workspace.Surfaces{Store: c.Store, Builtin: chat.Builtin()}, proto: c.Protocol}
}

// Routes registers the handler's routes with route (the UI API's router).
func (h *Handler) Routes(route func(pattern string, fn http.HandlerFunc)) {
	route("GET /a2a/{ws}/{agent}/.well-known/agent-card.json", h.Card)
	route("GET /a2a/{ws}/.well-known/agent-card.json", h.WorkspaceCard)
	route("POST /a2a/{ws}/{agent}", h.RPC)
	route("GET /.well-known/agent-card.json", h.RootCard)
}

func (h *Handler) ref(r *http.Request) agentRef {
	return agentRef{ws: r.PathValue("ws"), agent: r.PathValue("agent")}
}

// authenticate resolves the bearer token; nil caller and false after it has
// answered 401.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (auth.Caller, bool) {
	deny := func(msg string) (auth.Caller, bool) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="molt"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"jsonrpc": "2.0", "id": nil,
			"error": rpcError{Code: codeInvalidRequest, Message: msg}})
		return auth.Caller{}, false
	}
	secret := auth.ParseBearer(r.Header.Get("Authorization"))
	if secret == "" {
		return deny("missing or malformed bearer token")
	}
	t, err := h.store.TokenByHash(r.Context(), auth.Hash(secret))
	if molt.ErrorCode(err) == molt.ENOTFOUND || (err == nil && t.Level.Rank() == 0) {
		return deny("unknown bearer token")
	}
	if err != nil {
		h.log.ErrorContext(r.Context(), "token lookup failed", slog.String("code", molt.ErrorCode(err)))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"jsonrpc": "2.0", "id": nil,
			"error": rpcError{Code: codeInternal, Message: "token lookup failed"}})
		return auth.Caller{}, false
	}
	return auth.Caller{Token: t}, true
}

// RPC serves POST /a2a/{ws}/{agent}: one JSON-RPC request.
func (h *Handler) RPC(w http.ResponseWriter, r *http.Request) {
	c, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	ref := h.ref(r)
	if !c.CanRead(ref.ws) {
		writeJSON(w, http.StatusForbidden, map[string]any{"jsonrpc": "2.0", "id": nil,
			"error": rpcError{Code: codeInvalidRequest, Message: "this token is not for workspace " + ref.ws}})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		h.reply(w, nil, nil, &rpcError{Code: codeInvalidRequest, Message: "request body too large"})
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(body) {
			h.reply(w, nil, nil, &rpcError{Code: codeParse, Message: "Invalid JSON payload"})
			return
		}
		h.reply(w, nil, nil, &rpcError{Code: codeInvalidRequest, Message: "Request payload validation error: not a JSON-RPC request object"})
		return
	}
	if !validID(req.ID) {
		h.reply(w, nil, nil, &rpcError{Code: codeInvalidRequest, Message: "id must be a string, a number or null"})
		return
	}
	id := req.ID
	if req.JSONRPC != "2.0" || req.Method == nil || *req.Method == "" {
		h.reply(w, id, nil, &rpcError{Code: codeInvalidRequest, Message: `Request payload validation error: jsonrpc must be "2.0" and method a string`})
		return
	}
	hv := r.Header.Get("A2A-Version")
	if hv == "" {
		hv = r.URL.Query().Get("A2A-Version")
	}
	v, err := version(hv)
	if err != nil {
		h.reply(w, id, nil, err)
		return
	}
	op, ok := methods[v][*req.Method]
	if strings.HasPrefix(op, "campaign/") && h.proto == nil {
		ok = false
	}
	if !ok {
		h.reply(w, id, nil, &rpcError{Code: codeMethod, Message: fmt.Sprintf("Method not found: %s (A2A %s)", *req.Method, v)})
		return
	}
	if !h.agentExists(r.Context(), ref) {
		h.reply(w, id, nil, &rpcError{Code: codeMethod, Message: "no agent " + ref.agent + " in workspace " + ref.ws})
		return
	}
	ctx := r.Context()
	ext := h.proto != nil && extensionActive(r.Header.Values("A2A-Extensions"))
	if ext {
		w.Header().Set("A2A-Extensions", ExtCampaign)
	}
	switch op {
	case "campaign/claim", "campaign/renew", "campaign/release":
		if !ext {
			h.reply(w, id, nil, errExtension(op))
			return
		}
		if !c.CanChat(ref.ws) {
			h.forbidden(w, id)
			return
		}
		res, err := h.lease(ctx, c, ref, op, req.Params)
		h.reply(w, id, res, err)
	case "campaign/get", "campaign/getRequest":
		if !ext {
			h.reply(w, id, nil, errExtension(op))
			return
		}
		var res any
		var err error
		if op == "campaign/get" {
			res, err = h.campaignGet(ctx, c, ref, req.Params)
		} else {
			res, err = h.campaignGetRequest(ctx, ref, req.Params)
		}
		h.reply(w, id, res, err)
	case "push":
		h.reply(w, id, nil, &rpcError{Code: codePushNotSupp, Message: "push notifications are not supported"})
	case "extended":
		h.reply(w, id, nil, &rpcError{Code: codeExtendedCard, Message: "this agent has no extended card"})
	case "get":
		p, err := taskParams(req.Params)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if p.HistoryLength != nil && *p.HistoryLength < 0 {
			h.reply(w, id, nil, invalidParams("historyLength must not be negative"))
			return
		}
		t, _, err := h.loadTask(ctx, c, ref, p.ID)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		h.reply(w, id, trimHistory(t, p.HistoryLength).wire(v, true, true), nil)
	case "list":
		var p listParams
		if err := decodeParams(req.Params, &p); err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if p.HistoryLength != nil && *p.HistoryLength < 0 {
			h.reply(w, id, nil, invalidParams("historyLength must not be negative"))
			return
		}
		ts, next, err := h.listTasks(ctx, c, ref, p)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		withArt := p.IncludeArtifacts != nil && *p.IncludeArtifacts
		hl := p.HistoryLength
		if hl == nil {
			zero := 0
			hl = &zero // a listing carries no history unless asked
		}
		out := make([]any, len(ts))
		for i, t := range ts {
			out[i] = trimHistory(t, hl).wire(v, true, withArt)
		}
		size := defaultPageSize
		if p.PageSize != nil {
			size = *p.PageSize
		}
		h.reply(w, id, map[string]any{"tasks": out, "nextPageToken": next, "pageSize": size, "totalSize": len(out)}, nil)
	case "cancel":
		p, err := taskParams(req.Params)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if !c.CanChat(ref.ws) {
			h.forbidden(w, id)
			return
		}
		m, err := controlOf(p.Metadata, ext)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		var t task
		if m != nil {
			t, err = h.campaignCancel(ctx, c, ref, p.ID, m)
		} else {
			t, err = h.plainCancel(ctx, c, ref, p.ID)
		}
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		h.reply(w, id, t.wire(v, true, true), nil)
	case "send", "stream":
		var p sendParams
		if err := decodeParams(req.Params, &p); err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if !c.CanChat(ref.ws) {
			h.forbidden(w, id)
			return
		}
		if p.Configuration != nil && (isSet(p.Configuration.PushConfig) || isSet(p.Configuration.PushConfig03)) {
			h.reply(w, id, nil, &rpcError{Code: codePushNotSupp, Message: "push notifications are not supported"})
			return
		}
		if op == "stream" && !h.cfg.Streaming {
			h.reply(w, id, nil, &rpcError{Code: codeUnsupported, Message: "this endpoint cannot stream (API Gateway buffers responses); use the streaming interface of the agent card"})
			return
		}
		m, err := controlOf(p.Metadata, ext)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		var t task
		if m != nil {
			if p.Message == nil {
				h.reply(w, id, nil, invalidParams("params.message is required"))
				return
			}
			t, err = h.campaignSend(ctx, c, ref, p, m)
		} else {
			t, err = h.send(ctx, c, ref, p)
		}
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if op == "stream" {
			h.stream(w, r, c, ref, v, id, t, true)
			return
		}
		var hl *int
		blocking := true
		if p.Configuration != nil {
			hl = p.Configuration.HistoryLength
			if v == V10 && p.Configuration.ReturnImmediately {
				blocking = false
			}
			if v == V03 && p.Configuration.Blocking != nil {
				blocking = *p.Configuration.Blocking
			}
		}
		if blocking {
			t = h.wait(ctx, c, ref, t)
		}
		res := trimHistory(t, hl).wire(v, true, true)
		if v == V10 {
			res = map[string]any{"task": res}
		}
		h.reply(w, id, res, nil)
	case "subscribe":
		p, err := taskParams(req.Params)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if !h.cfg.Streaming {
			h.reply(w, id, nil, &rpcError{Code: codeUnsupported, Message: "this endpoint cannot stream; use the streaming interface of the agent card"})
			return
		}
		t, _, err := h.loadTask(ctx, c, ref, p.ID)
		if err != nil {
			h.reply(w, id, nil, err)
			return
		}
		if terminal(t.State) {
			h.reply(w, id, nil, &rpcError{Code: codeUnsupported, Message: fmt.Sprintf("task %s is %s: nothing to subscribe to", t.ID, t.State)})
			return
		}
		h.stream(w, r, c, ref, v, id, t, false)
	}
}

func isSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

func (h *Handler) forbidden(w http.ResponseWriter, id json.RawMessage) {
	writeJSON(w, http.StatusForbidden, map[string]any{"jsonrpc": "2.0", "id": rawID(id),
		"error": rpcError{Code: codeInvalidRequest, Message: "a readonly token may only read tasks"}})
}

// trimHistory applies historyLength: nil keeps the whole history, 0 none,
// n the last n messages.
func trimHistory(t task, n *int) task {
	if n == nil {
		return t
	}
	if *n < len(t.History) {
		t.History = t.History[len(t.History)-*n:]
	}
	return t
}

// wait reads the task again until it is terminal, BlockWait passes or the
// request ends; it returns the task as last read.
func (h *Handler) wait(ctx context.Context, c auth.Caller, ref agentRef, t task) task {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.BlockWait)
	defer cancel()
	tick := time.NewTicker(h.cfg.Poll)
	defer tick.Stop()
	for !terminal(t.State) {
		select {
		case <-ctx.Done():
			return t
		case <-tick.C:
		}
		nt, _, err := h.loadTask(ctx, c, ref, t.ID)
		if err != nil {
			return t
		}
		t = nt
	}
	return t
}

// cancel cancels task id: -32002 when it has already ended.
func (h *Handler) cancel(ctx context.Context, c auth.Caller, ref agentRef, id string) (task, error) {
	if _, _, err := h.loadTask(ctx, c, ref, id); err != nil {
		return task{}, err
	}
	return h.cancelTurn(ctx, c, ref, id)
}

// plainCancel is a CancelTask outside the extension: refused for a
// campaign's task.
func (h *Handler) plainCancel(ctx context.Context, c auth.Caller, ref agentRef, id string) (task, error) {
	t, _, err := h.loadTask(ctx, c, ref, id)
	if err != nil {
		return task{}, err
	}
	if err := h.guardContext(ctx, t.ContextID); err != nil {
		return task{}, err
	}
	return h.cancelTurn(ctx, c, ref, id)
}

func (h *Handler) cancelTurn(ctx context.Context, c auth.Caller, ref agentRef, id string) (task, error) {
	_, err := h.chat.CancelTurn(ctx, c, id)
	if molt.ErrorReason(err) == chat.ReasonTurnEnded {
		t, _, _ := h.loadTask(ctx, c, ref, id)
		return task{}, &rpcError{Code: codeNotCancelable, Message: fmt.Sprintf("task %s is %s and can no longer be canceled", id, t.State)}
	}
	if err != nil {
		return task{}, err
	}
	// The turn is canceled in the store; its attempt (if any) stops at once in
	// this process, or at its next heartbeat elsewhere, and writes nothing.
	t, _, err := h.loadTask(ctx, c, ref, id)
	return t, err
}

// rawID is the id to answer with (null when absent).
func rawID(id json.RawMessage) any {
	if len(id) == 0 {
		return nil
	}
	return id
}

// reply writes one JSON-RPC response: result, or the error (HTTP 200 either
// way; a molt error is mapped to its JSON-RPC code).
func (h *Handler) reply(w http.ResponseWriter, id json.RawMessage, result any, err error) {
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": rawID(id), "error": h.rpcErr(err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": rawID(id), "result": result})
}

func (h *Handler) rpcErr(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	switch molt.ErrorCode(err) {
	case molt.EINVALID, molt.ETOOLARGE:
		var me *molt.Error
		if errors.As(err, &me) && me.Message != "" {
			return &rpcError{Code: codeParams, Message: me.Message}
		}
		return &rpcError{Code: codeParams, Message: "Invalid parameters"}
	case molt.ENOTFOUND:
		return &rpcError{Code: codeTaskNotFound, Message: "not found"}
	case molt.EFORBIDDEN:
		msg := "forbidden"
		var me *molt.Error
		if errors.As(err, &me) && me.Message != "" {
			msg = me.Message
		}
		return &rpcError{Code: codeUnsupported, Message: msg}
	}
	h.log.Error("a2a request failed", slog.String("error", err.Error()))
	return &rpcError{Code: codeInternal, Message: "Internal error"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
