package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/naming"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// sessionRoutes registers the chat routes. Every rule of access
// lives in chat.Service: a workspace token only in its workspace (404 elsewhere,
// revealing nothing), readonly tokens read but never post or open sessions (403),
// and a session opened with full access is written to only by full tokens (403
// session_access).
func (s *server) sessionRoutes() {
	s.handle("POST /api/workspaces/{ws}/sessions", s.createSession)
	s.handle("GET /api/workspaces/{ws}/sessions", s.listSessions)
	s.handle("GET /api/sessions/{id}", s.getSession)
	s.handle("PATCH /api/sessions/{id}", s.renameSession)
	s.handle("DELETE /api/sessions/{id}", s.deleteSession)
	s.handle("POST /api/sessions/{id}/messages", s.postMessage)
	s.handle("GET /api/sessions/{id}/messages", s.listMessages)
	s.handle("GET /api/turns/{id}", s.getTurn)
	if s.naming != nil {
		s.handle("POST /api/sessions/{id}/name", s.nameSession)
	}
}

// sessionJSON is a session as the API shows it (never its summary).
type sessionJSON struct {
	ID          string `json:"id"`
	Workspace   string `json:"workspace"`
	Agent       string `json:"agent"`
	Title       string `json:"title"`
	TitleSource string `json:"title_source"`
	TitleRev    int    `json:"title_rev"`
	// Naming is the state of the session's newest naming job (GET of one session).
	Naming       *naming.State `json:"naming,omitempty"`
	Access       string        `json:"access"`
	External     bool          `json:"external"`
	Parent       string        `json:"parent,omitempty"`
	MessageCount int           `json:"message_count"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
}

func toSessionJSON(ss session.Session) sessionJSON {
	src := ss.TitleSource
	if src == session.TitleNone {
		src = "none"
	}
	return sessionJSON{ID: ss.ID, Workspace: ss.Workspace, Agent: ss.Agent, Title: ss.Title, TitleSource: src,
		TitleRev: ss.TitleRev, Access: ss.Access, External: ss.External, Parent: ss.Parent,
		MessageCount: max(ss.NextSeq-1, 0), CreatedAt: ss.CreatedAt, UpdatedAt: ss.UpdatedAt}
}

// messageJSON is a message as the API shows it.
type messageJSON struct {
	Seq         int             `json:"seq"`
	Role        string          `json:"role"`
	Text        string          `json:"text"`
	TurnID      string          `json:"turn_id,omitempty"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"`
	ToolResults json.RawMessage `json:"tool_results,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
}

// messagesResponse is a page of messages; NextAfter is the after= of the next
// poll (the last seq returned, or the after= asked when none was).
type messagesResponse struct {
	Items     []messageJSON `json:"items"`
	NextAfter int           `json:"next_after"`
}

// turnJSON is a turn's status.
type turnJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	SessionID string `json:"session_id,omitempty"`
	UserSeq   int    `json:"user_seq,omitempty"`
	ReplySeq  int    `json:"reply_seq,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Attempts  int    `json:"attempts"`
	Compacted bool   `json:"compacted"`
	// Delegation: what the resolver decided on the message (agents with
	// delegation: true), and where it went.
	Delegation *delegationJSON `json:"delegation,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

type delegationJSON struct {
	Decision   string `json:"decision"`
	Target     string `json:"target,omitempty"`
	Kind       string `json:"target_kind,omitempty"`
	Method     string `json:"method,omitempty"`
	Reason     string `json:"decision_reason,omitempty"`
	SubSession string `json:"sub_session,omitempty"`
	SubTurn    string `json:"sub_turn,omitempty"`
	RemoteTask string `json:"remote_task,omitempty"`
	ReportTo   string `json:"report_to,omitempty"`
}

// decodeBody strictly decodes an optional JSON body into v (an empty body leaves
// v as it is when optional).
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v)
}

func (s *server) createSession(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	if !c.CanRead(ws) {
		return notFoundWS(ws) // before reading the body: reveal nothing
	}
	var in struct {
		Agent *string `json:"agent"`
		Title *string `json:"title"`
	}
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	ns := chat.NewSession{Workspace: ws}
	if in.Agent != nil {
		if *in.Agent == "" {
			return molt.Invalid("agent", "agent is empty")
		}
		ns.Agent = *in.Agent
	}
	if in.Title != nil {
		ns.Title = *in.Title
	}
	ss, err := s.chat.CreateSession(r.Context(), c, ns)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/sessions/"+ss.ID)
	writeJSON(w, http.StatusCreated, toSessionJSON(ss))
	return nil
}

func (s *server) listSessions(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	pq := page.Query{Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > chat.MaxSessionsPage {
			return molt.Invalid("limit", "limit must be an integer between 1 and %d", chat.MaxSessionsPage)
		}
		pq.Limit = n
	}
	if !c.CanRead(ws) {
		return notFoundWS(ws)
	}
	if err := s.requireWorkspace(r, ws); err != nil {
		return err // a missing workspace has no session list, like no file list
	}
	p, err := s.chat.ListSessions(r.Context(), c, ws, pq)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return notFoundWS(ws)
		}
		return err
	}
	out := listResponse[sessionJSON]{Items: []sessionJSON{}, NextCursor: p.Next}
	for _, ss := range p.Items {
		out.Items = append(out.Items, toSessionJSON(ss))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getSession(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ss, err := s.chat.GetSession(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := toSessionJSON(ss)
	if s.naming != nil {
		st, err := s.naming.StateOf(r.Context(), ss)
		if err != nil {
			return err
		}
		out.Naming = &st
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// nameSession asks for a new naming attempt (202 with the job's state).
func (s *server) nameSession(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	it, err := s.naming.NameByHand(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, naming.State{Status: string(it.Status), Reason: it.Reason, At: it.UpdatedAt})
	return nil
}

func (s *server) renameSession(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	id := r.PathValue("id")
	var in struct {
		Title *string `json:"title"`
	}
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Title == nil {
		return molt.Invalid("title", "title is required")
	}
	ss, err := s.chat.Rename(r.Context(), c, id, *in.Title)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSessionJSON(ss))
	return nil
}

func (s *server) deleteSession(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if err := s.chat.DeleteSession(r.Context(), c, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) postMessage(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	id := r.PathValue("id")
	var in struct {
		Text *string `json:"text"`
	}
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Text == nil {
		return molt.Invalid("text", "text is required")
	}
	it, err := s.chat.Post(r.Context(), c, id, *in.Text)
	if err != nil {
		return err
	}
	if it.Kind == work.KindRun {
		// /evo queued an evolution run, not a turn.
		w.Header().Set("Location", "/api/evolution/runs/"+it.ID)
		writeJSON(w, http.StatusAccepted, map[string]any{"run": map[string]string{"id": it.ID, "status": string(it.Status)}})
		return nil
	}
	w.Header().Set("Location", "/api/turns/"+it.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{"turn": map[string]string{"id": it.ID, "status": string(it.Status)}})
	return nil
}

func (s *server) listMessages(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	q := r.URL.Query()
	after, limit := 0, page.DefaultLimit
	if v := q.Get("after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return molt.Invalid("after", "after must be a non-negative integer")
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > page.MaxLimit {
			return molt.Invalid("limit", "limit must be an integer between 1 and %d", page.MaxLimit)
		}
		limit = n
	}
	msgs, err := s.chat.Messages(r.Context(), c, r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	out := messagesResponse{Items: []messageJSON{}, NextAfter: after}
	for _, m := range msgs {
		out.Items = append(out.Items, messageJSON{Seq: m.Seq, Role: m.Role, Text: m.Text, TurnID: m.TurnID,
			ToolCalls: m.ToolCalls, ToolResults: m.ToolResults, CreatedAt: m.CreatedAt})
		out.NextAfter = m.Seq
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getTurn(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	it, d, err := s.chat.Turn(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := turnJSON{ID: it.ID, Status: string(it.Status), SessionID: d.SessionID, UserSeq: d.UserSeq,
		ReplySeq: d.ReplySeq, Reason: it.Reason, Attempts: it.Attempts, Compacted: d.Compacted,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
	if d.Decision != "" || d.ReportTo != "" {
		out.Delegation = &delegationJSON{Decision: d.Decision, Target: d.Target, Kind: d.TargetKind, Method: d.Method,
			Reason: d.DecisionReason, SubSession: d.SubSession, SubTurn: d.SubTurn, RemoteTask: d.RemoteTask, ReportTo: d.ReportTo}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
