package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// agentRef names the A2A agent a request is for.
type agentRef struct{ ws, agent string }

// stateOf maps a turn's status to a task state.
func stateOf(st work.Status) string {
	switch st {
	case work.StatusPending:
		return StateSubmitted
	case work.StatusRunning:
		return StateWorking
	case chat.StatusDone:
		return StateCompleted
	case chat.StatusCanceled:
		return StateCanceled
	}
	return StateFailed // failed, timeout
}

// statusesOf is the inverse of stateOf, for ListTasks' status filter.
func statusesOf(state string) []work.Status {
	switch state {
	case StateSubmitted:
		return []work.Status{work.StatusPending}
	case StateWorking:
		return []work.Status{work.StatusRunning}
	case StateCompleted:
		return []work.Status{chat.StatusDone}
	case StateCanceled:
		return []work.Status{chat.StatusCanceled}
	case StateFailed:
		return []work.Status{chat.StatusFailed, work.StatusTimeout}
	}
	return nil
}

func errTaskNotFound(id string) error {
	return &rpcError{Code: codeTaskNotFound, Message: "task " + id + " not found"}
}

// session reads an A2A context: an external session of the agent.
func (h *Handler) context(ctx context.Context, c auth.Caller, ref agentRef, id string) (session.Session, error) {
	if session.ValidateID("contextId", id) != nil {
		return session.Session{}, invalidParams("contextId %q does not name a context of this agent", id)
	}
	sess, err := h.chat.GetSession(ctx, c, id)
	if molt.ErrorCode(err) == molt.ENOTFOUND || (err == nil && (sess.Workspace != ref.ws || sess.Agent != ref.agent || !sess.External)) {
		return session.Session{}, invalidParams("contextId %q does not name a context of this agent", id)
	}
	return sess, err
}

// loadTask reads turn id as a task of ref, with its whole history.
func (h *Handler) loadTask(ctx context.Context, c auth.Caller, ref agentRef, id string) (task, work.Item, error) {
	it, d, err := h.chat.Turn(ctx, c, id)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return task{}, work.Item{}, errTaskNotFound(id)
	}
	if err != nil {
		return task{}, work.Item{}, err
	}
	sess, err := h.chat.GetSession(ctx, c, d.SessionID)
	if molt.ErrorCode(err) == molt.ENOTFOUND || (err == nil && (sess.Workspace != ref.ws || sess.Agent != ref.agent || !sess.External)) {
		return task{}, work.Item{}, errTaskNotFound(id)
	}
	if err != nil {
		return task{}, work.Item{}, err
	}
	t, err := h.taskOf(ctx, c, it, d)
	return t, it, err
}

// maxTaskMessages bounds the messages read to find one task's history.
const maxTaskMessages = 500

// taskOf builds the task of turn it: its user message, then what the turn
// wrote (assistant text and system notices; tool traffic is not shown).
func (h *Handler) taskOf(ctx context.Context, c auth.Caller, it work.Item, d chat.TurnData) (task, error) {
	t := task{ID: it.ID, ContextID: d.SessionID, State: stateOf(it.Status), Timestamp: it.UpdatedAt}
	msgs, err := h.chat.Messages(ctx, c, d.SessionID, d.UserSeq-1, maxTaskMessages)
	if err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
		return task{}, err
	}
	for _, m := range msgs {
		if m.TurnID != it.ID || m.Role == session.RoleTool || (m.Role == session.RoleAssistant && m.Text == "") {
			continue
		}
		t.History = append(t.History, message{ID: m.SessionID + "-" + strconv.Itoa(m.Seq), ContextID: m.SessionID,
			TaskID: it.ID, Agent: m.Role != session.RoleUser, Text: m.Text})
	}
	if terminal(t.State) && len(t.History) > 0 {
		if last := t.History[len(t.History)-1]; last.Agent {
			t.Message = &last
			if t.State == StateCompleted {
				t.Reply = last.Text
			}
		}
	}
	return t, nil
}

// send posts the message's text as a new task (a turn) of ref.
func (h *Handler) send(ctx context.Context, c auth.Caller, ref agentRef, p sendParams) (task, error) {
	text, err := p.Message.text()
	if err != nil {
		return task{}, err
	}
	contextID := p.Message.ContextID
	if p.Message.TaskID != "" {
		prev, _, err := h.loadTask(ctx, c, ref, p.Message.TaskID)
		if err != nil {
			return task{}, err
		}
		if contextID != "" && contextID != prev.ContextID {
			return task{}, errTaskNotFound(p.Message.TaskID)
		}
		// A turn never waits for more input: its task takes no further message.
		return task{}, &rpcError{Code: codeUnsupported,
			Message: fmt.Sprintf("task %s is %s and takes no further message; send without taskId to start a new task", prev.ID, prev.State)}
	}
	// A message id seen before is a retry: answer the task it made.
	key := ""
	if p.Message.MessageID != "" {
		key = messageKey(ref, p.Message.MessageID, contextID, text)
		if it, err := h.chat.TurnByKey(ctx, key); err == nil && it.Workspace == ref.ws {
			d, _ := chat.ParseTurnData(it.Data)
			return h.taskOf(ctx, c, it, d)
		} else if err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
			return task{}, err
		}
	}
	var sess session.Session
	if contextID != "" {
		if sess, err = h.context(ctx, c, ref, contextID); err != nil {
			return task{}, err
		}
		if err := h.guardContext(ctx, sess.ID); err != nil {
			return task{}, err
		}
	} else {
		sess, err = h.chat.CreateSession(ctx, c, chat.NewSession{Workspace: ref.ws, Agent: ref.agent, External: true})
		if err != nil {
			return task{}, err
		}
	}
	it, err := h.chat.PostExternal(ctx, c, sess.ID, text, key)
	if err != nil {
		return task{}, err
	}
	d, _ := chat.ParseTurnData(it.Data)
	return h.taskOf(ctx, c, it, d)
}

// listTasks lists ref's tasks newest first: a context's (from its message
// log) or the agent's (from the turn listing, filtered to its external
// sessions).
func (h *Handler) listTasks(ctx context.Context, c auth.Caller, ref agentRef, p listParams) ([]task, string, error) {
	size := defaultPageSize
	if p.PageSize != nil {
		if *p.PageSize < 1 || *p.PageSize > maxPageSize {
			return nil, "", invalidParams("pageSize must be between 1 and %d", maxPageSize)
		}
		size = *p.PageSize
	}
	var want []work.Status
	// "UNRECOGNIZED" is how @a2a-js/sdk's generated code encodes a status the
	// caller left out of listTasks({...}): no filter, like UNSPECIFIED.
	if p.Status != "" && p.Status != "TASK_STATE_UNSPECIFIED" && p.Status != "UNRECOGNIZED" {
		if want = statusesOf(stateFrom(p.Status)); want == nil {
			return nil, "", invalidParams("status %q is not a task state molt uses", p.Status)
		}
	}
	keep := func(it work.Item) bool {
		if len(want) == 0 {
			return true
		}
		for _, st := range want {
			if it.Status == st {
				return true
			}
		}
		return false
	}
	if p.ContextID != "" {
		return h.listContext(ctx, c, ref, p.ContextID, p.PageToken, size, keep)
	}
	var out []task
	cursor := p.PageToken
	sessions := map[string]bool{}
	for scanned := 0; scanned < maxScan; {
		pg, err := h.store.ListItems(ctx, work.ListQuery{Kind: work.KindTurn, Page: page.Query{Limit: 100, Cursor: cursor}})
		if molt.ErrorCode(err) == molt.EINVALID {
			return nil, "", invalidParams("pageToken is not valid")
		}
		if err != nil {
			return nil, "", err
		}
		for i, it := range pg.Items {
			scanned++
			if it.Workspace != ref.ws || !keep(it) {
				continue
			}
			d, err := chat.ParseTurnData(it.Data)
			if err != nil {
				continue
			}
			ok, seen := sessions[d.SessionID]
			if !seen {
				sess, err := h.chat.GetSession(ctx, c, d.SessionID)
				ok = err == nil && sess.Agent == ref.agent && sess.External
				sessions[d.SessionID] = ok
			}
			if !ok {
				continue
			}
			t, err := h.taskOf(ctx, c, it, d)
			if err != nil {
				return nil, "", err
			}
			out = append(out, t)
			if len(out) == size {
				if i == len(pg.Items)-1 {
					return out, pg.Next, nil
				}
				return out, page.Cursor(it.ID), nil
			}
		}
		if pg.Next == "" {
			return out, "", nil
		}
		cursor = pg.Next
	}
	return out, cursor, nil
}

// Listing bounds.
const (
	defaultPageSize = 50
	maxPageSize     = 100
	maxScan         = 1000 // turns looked at for one page of an agent's tasks
)

func (h *Handler) listContext(ctx context.Context, c auth.Caller, ref agentRef, id, token string, size int, keep func(work.Item) bool) ([]task, string, error) {
	if _, err := h.context(ctx, c, ref, id); err != nil {
		return nil, "", err
	}
	before := int(^uint(0) >> 1)
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "seq-"))
		if err != nil || !strings.HasPrefix(token, "seq-") || n < 1 {
			return nil, "", invalidParams("pageToken is not valid")
		}
		before = n
	}
	var users []session.Message
	after := 0
	for {
		msgs, err := h.chat.Messages(ctx, c, id, after, 500)
		if err != nil {
			return nil, "", err
		}
		for _, m := range msgs {
			if m.Role == session.RoleUser && m.TurnID != "" && m.Seq < before {
				users = append(users, m)
			}
		}
		if len(msgs) < 500 {
			break
		}
		after = msgs[len(msgs)-1].Seq
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Seq > users[j].Seq })
	var out []task
	for i, m := range users {
		it, d, err := h.chat.Turn(ctx, c, m.TurnID)
		if molt.ErrorCode(err) == molt.ENOTFOUND || (err == nil && !keep(it)) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		t, err := h.taskOf(ctx, c, it, d)
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
		if len(out) == size && i < len(users)-1 {
			return out, "seq-" + strconv.Itoa(m.Seq), nil
		}
	}
	return out, "", nil
}

// messageKey names a sender's message (chat.TurnByKey): the same messageId,
// context and text sent again to the same agent (a retry whose answer was
// lost) is the same task. A messageId reused for another text or context is
// taken as a new message.
func messageKey(ref agentRef, messageID, contextID, text string) string {
	sum := sha256.Sum256([]byte(ref.ws + "/" + ref.agent + "\x00" + messageID + "\x00" + contextID + "\x00" + text))
	return "a2a-" + hex.EncodeToString(sum[:20])
}
