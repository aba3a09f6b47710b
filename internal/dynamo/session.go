package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// MaxMessagesPage bounds one ListMessages call: a larger limit is clamped to it
// (the SQLite adapter uses the same bound).
const MaxMessagesPage = 500

// ReasonSessionExists is the ECONFLICT reason of a CreateSession whose id is taken.
const ReasonSessionExists = "exists"

// ReasonStaleTitle is the ECONFLICT reason of a SetTitle at an old title revision.
const ReasonStaleTitle = "stale_title"

// Session and message attributes (a session also keeps id, ws, created_at and
// updated_at, a message created_at).
const (
	attrAgent       = "agent"
	attrTitle       = "title"
	attrTitleSource = "title_source"
	attrTitleRev    = "title_rev"
	attrAccess      = "access"
	attrExternal    = "external"
	attrParent      = "parent"
	attrNextSeq     = "next_seq"
	attrSummarySeq  = "summary_seq"
	attrSummary     = "summary"
	attrSessionID   = "session_id"
	attrSeq         = "seq"
	attrRole        = "role"
	attrText        = "text"
	attrToolCalls   = "tool_calls"
	attrToolResults = "tool_results"
	attrTurnID      = "turn_id"
	attrNamingSeq   = "naming_seq"
)

const (
	msgPrefix = "MSG#"
	// maxSeq is the largest seq the 10-digit message sort key holds; every
	// adapter refuses a larger one (session.Message.ValidateStored).
	maxSeq = session.MaxSeq
)

func sessionPK(id string) string { return "SESSION#" + id }

func sessionsPK(ws string) string { return "SESSIONS#" + ws }

func sessionKey(id string) map[string]types.AttributeValue { return key(sessionPK(id), skMeta) }

// msgSK is a message's sort key: zero-padded, so key order is seq order.
func msgSK(seq int) string { return fmt.Sprintf("%s%010d", msgPrefix, seq) }

func encodeSession(ss session.Session) map[string]types.AttributeValue {
	m := sessionKey(ss.ID)
	m[attrG1PK] = str(sessionsPK(ss.Workspace))
	m[attrG1SK] = str(ss.ID)
	m[attrID] = str(ss.ID)
	m[attrWorkspace] = str(ss.Workspace)
	m[attrAgent] = str(ss.Agent)
	m[attrAccess] = str(ss.Access)
	m[attrExternal] = boolean(ss.External)
	m[attrTitleRev] = num(int64(ss.TitleRev))
	m[attrNextSeq] = num(int64(ss.NextSeq))
	m[attrSummarySeq] = num(int64(ss.SummarySeq))
	m[attrCreatedAt] = tnum(ss.CreatedAt)
	m[attrUpdatedAt] = tnum(ss.UpdatedAt)
	opt := func(k, v string) {
		if v != "" {
			m[k] = str(v)
		}
	}
	opt(attrTitle, ss.Title)
	opt(attrTitleSource, ss.TitleSource)
	opt(attrParent, ss.Parent)
	opt(attrSummary, ss.Summary)
	return m
}

func decodeSession(m map[string]types.AttributeValue) session.Session {
	return session.Session{
		ID:          getS(m, attrID),
		Workspace:   getS(m, attrWorkspace),
		Agent:       getS(m, attrAgent),
		Title:       getS(m, attrTitle),
		TitleSource: getS(m, attrTitleSource),
		TitleRev:    int(getN(m, attrTitleRev)),
		Access:      getS(m, attrAccess),
		External:    getBool(m, attrExternal),
		Parent:      getS(m, attrParent),
		NextSeq:     int(getN(m, attrNextSeq)),
		SummarySeq:  int(getN(m, attrSummarySeq)),
		NamingSeq:   int(getN(m, attrNamingSeq)),
		Summary:     getS(m, attrSummary),
		CreatedAt:   getTime(m, attrCreatedAt),
		UpdatedAt:   getTime(m, attrUpdatedAt),
	}
}

func encodeMessage(m session.Message) map[string]types.AttributeValue {
	item := key(sessionPK(m.SessionID), msgSK(m.Seq))
	item[attrSessionID] = str(m.SessionID)
	item[attrSeq] = num(int64(m.Seq))
	item[attrRole] = str(m.Role)
	item[attrCreatedAt] = tnum(m.CreatedAt)
	if m.Text != "" {
		item[attrText] = str(m.Text)
	}
	if m.TurnID != "" {
		item[attrTurnID] = str(m.TurnID)
	}
	if len(m.ToolCalls) > 0 {
		item[attrToolCalls] = &types.AttributeValueMemberB{Value: m.ToolCalls}
	}
	if len(m.ToolResults) > 0 {
		item[attrToolResults] = &types.AttributeValueMemberB{Value: m.ToolResults}
	}
	return item
}

func decodeMessage(m map[string]types.AttributeValue) session.Message {
	msg := session.Message{
		SessionID: getS(m, attrSessionID),
		Seq:       int(getN(m, attrSeq)),
		Role:      getS(m, attrRole),
		Text:      getS(m, attrText),
		TurnID:    getS(m, attrTurnID),
		CreatedAt: getTime(m, attrCreatedAt),
	}
	if b := getB(m, attrToolCalls); len(b) > 0 {
		msg.ToolCalls = b
	}
	if b := getB(m, attrToolResults); len(b) > 0 {
		msg.ToolResults = b
	}
	return msg
}

// CreateSession stores a new session of an existing workspace, with NextSeq 1 and
// both times now; its id is generated when empty. One transaction checks that the
// workspace exists (and the parent is a session of it) and puts the session if
// its id is free. EINVALID for a bad workspace name, workspace.Global (reason
// "reserved"), agent, title, title source, access, id, or a parent that is not a
// session of the same workspace (field "parent"); ENOTFOUND when the workspace
// does not exist; ECONFLICT/ReasonSessionExists when the id is taken. Nothing is
// written on any of these errors.
func (s *Store) CreateSession(ctx context.Context, in session.Session) (session.Session, error) {
	explicit := in.ID != ""
	out, err := session.Prepare(in, s.ids.NewID)
	if err != nil {
		return session.Session{}, err
	}
	now := s.now()
	out.CreatedAt, out.UpdatedAt = now, now
	what := fmt.Sprintf("create session %s in %s", out.ID, out.Workspace)
	if explicit {
		// A chosen id may be one whose deletion stopped part way: clear the old
		// messages first, or they would block the new session's appends.
		if err := s.deleteMessages(ctx, out.ID, true); err != nil {
			return session.Session{}, failure(what, err)
		}
	}
	tbl := aws.String(s.table)
	var we, pe, ce exprs
	items := []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: tbl, Key: metaKey(out.Workspace),
			ConditionExpression:      aws.String(liveCond(&we)),
			ExpressionAttributeNames: we.names}},
		{Put: &types.Put{TableName: tbl, Item: encodeSession(out),
			ConditionExpression:      aws.String("attribute_not_exists(" + pe.name(attrPK) + ")"),
			ExpressionAttributeNames: pe.names}},
	}
	if out.Parent != "" {
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: tbl,
			Key: sessionKey(out.Parent),
			ConditionExpression: aws.String("attribute_exists(" + ce.name(attrPK) + ") AND " +
				ce.name(attrWorkspace) + " = " + ce.value(str(out.Workspace))),
			ExpressionAttributeNames: ce.names, ExpressionAttributeValues: ce.values}})
	}
	retried, err := s.write(ctx, items)
	if err == nil {
		return out, nil
	}
	idx, cond := conditionIndex(err)
	if !cond {
		return session.Session{}, failure(what, err)
	}
	if retried {
		// An earlier attempt of this call may have landed: it did if the stored session
		// is ours (same creation time and workspace).
		cur, gerr := s.GetSession(ctx, out.ID)
		if gerr == nil && cur.CreatedAt.Equal(out.CreatedAt) && cur.Workspace == out.Workspace && cur.Agent == out.Agent {
			return out, nil
		}
	}
	switch idx {
	case 0:
		return session.Session{}, molt.NotFound("workspace %s not found", out.Workspace)
	case 2:
		return session.Session{}, molt.Invalid("parent", "parent session %s is not a session of workspace %s", out.Parent, out.Workspace)
	}
	return session.Session{}, molt.Conflict(ReasonSessionExists, "session %s exists", out.ID)
}

// GetSession returns one session with its summary (strongly consistent);
// EINVALID for a malformed id, ENOTFOUND when absent.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	if err := session.ValidateID("id", id); err != nil {
		return session.Session{}, err
	}
	m, ok, err := s.get(ctx, sessionKey(id))
	if err != nil {
		return session.Session{}, failure("get session "+id, err)
	}
	if !ok {
		return session.Session{}, molt.NotFound("session %s not found", id)
	}
	return decodeSession(m), nil
}

// ListSessions lists the sessions of workspace ws, newest (highest id) first,
// through gsi1 (eventually consistent on DynamoDB); an empty page when it has none
// or does not exist. EINVALID for a bad name, cursor or limit.
func (s *Store) ListSessions(ctx context.Context, ws string, q page.Query) (page.Page[session.Session], error) {
	if err := workspace.ValidateName(ws); err != nil {
		return page.Page[session.Session]{}, err
	}
	limit, after, err := q.Normalize()
	if err != nil {
		return page.Page[session.Session]{}, err
	}
	items, more, err := s.queryPage(ctx, afterQuery(index1, attrG1PK, sessionsPK(ws), attrG1SK, after, false), limit)
	if err != nil {
		return page.Page[session.Session]{}, failure("list sessions of "+ws, err)
	}
	out := page.Page[session.Session]{Items: make([]session.Session, 0, len(items))}
	for _, m := range items {
		out.Items = append(out.Items, decodeSession(m))
	}
	if more && len(items) > 0 {
		out.Next = page.Cursor(getS(items[len(items)-1], attrG1SK))
	}
	return out, nil
}

// SetTitle sets the title and its source (manual or auto) when the title revision
// is still ifRev, in one conditional UpdateItem that also requires the session to
// exist (a save racing a delete cannot bring it back); it bumps the revision and
// UpdatedAt and returns the session. EINVALID for a bad id, title or source;
// ENOTFOUND when absent; ECONFLICT/ReasonStaleTitle when the revision moved on.
func (s *Store) SetTitle(ctx context.Context, id, title, source string, ifRev int) (session.Session, error) {
	if err := session.ValidateID("id", id); err != nil {
		return session.Session{}, err
	}
	if err := session.ValidateTitle(title, source); err != nil {
		return session.Session{}, err
	}
	if source == session.TitleNone {
		return session.Session{}, molt.Invalid("title_source", "title source must be manual or auto")
	}
	e := &exprs{}
	u := &update{e: e}
	u.setStr(attrTitle, title)
	u.setVal(attrTitleSource, str(source))
	u.setVal(attrTitleRev, num(int64(ifRev+1)))
	u.setVal(attrUpdatedAt, tnum(s.now()))
	cond := "attribute_exists(" + e.name(attrPK) + ") AND " + e.name(attrTitleRev) + " = " + e.value(num(int64(ifRev)))
	var out *dynamodb.UpdateItemOutput
	retried, err := s.retrying(ctx, func(opt func(*dynamodb.Options)) (err error) {
		out, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: sessionKey(id),
			UpdateExpression: aws.String(u.expr()), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
			ReturnValues: types.ReturnValueAllNew,
		}, opt)
		return err
	})
	if err == nil {
		return decodeSession(out.Attributes), nil
	}
	if _, cond := conditionIndex(err); !cond {
		return session.Session{}, failure("set title of session "+id, err)
	}
	cur, gerr := s.GetSession(ctx, id)
	if gerr != nil {
		return session.Session{}, gerr
	}
	if retried && cur.TitleRev == ifRev+1 && cur.Title == title && cur.TitleSource == source {
		return cur, nil // our own earlier attempt
	}
	return session.Session{}, molt.Conflict(ReasonStaleTitle, "session %s title is at revision %d, not %d", id, cur.TitleRev, ifRev)
}

// DeleteSession deletes the session's META item (ENOTFOUND when absent), which
// makes every later AppendMessage to it fail its condition, then its messages in
// batches. An append that committed before the META delete left its message in
// the partition, where the (strongly consistent) query finds it. If the message
// deletion fails part way the error is returned with the session already gone;
// calling DeleteSession again deletes the leftovers and returns ENOTFOUND.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := session.ValidateID("id", id); err != nil {
		return err
	}
	var e exprs
	retried, err := s.retrying(ctx, func(opt func(*dynamodb.Options)) error {
		_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table), Key: sessionKey(id),
			ConditionExpression:      aws.String("attribute_exists(" + e.name(attrPK) + ")"),
			ExpressionAttributeNames: e.names,
		}, opt)
		return err
	})
	if _, cond := conditionIndex(err); cond && !retried {
		if err := s.deleteMessages(ctx, id, true); err != nil {
			return fmt.Errorf("delete leftover messages of session %s: %w", id, err)
		}
		return molt.NotFound("session %s not found", id)
	} else if err != nil && !cond {
		return failure("delete session "+id, err)
	}
	if err := s.deleteMessages(ctx, id, false); err != nil {
		return fmt.Errorf("delete messages of session %s: %w", id, err)
	}
	return nil
}

// deleteMessages deletes every message of session id; with leftovers, nothing
// when the session (its META item) exists.
func (s *Store) deleteMessages(ctx context.Context, id string, leftovers bool) error {
	var e exprs
	kc := e.name(attrPK) + " = " + e.value(str(sessionPK(id)))
	if !leftovers {
		kc += " AND begins_with(" + e.name(attrSK) + ", " + e.value(str(msgPrefix)) + ")"
	}
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String(kc),
		ProjectionExpression:      aws.String(e.name(attrPK) + ", " + e.name(attrSK)),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return err
	}
	var reqs []types.WriteRequest
	for _, m := range items {
		if getS(m, attrSK) == skMeta {
			return nil // a live session of that id: the messages are its own
		}
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
			Key: map[string]types.AttributeValue{attrPK: m[attrPK], attrSK: m[attrSK]}}})
	}
	for len(reqs) > 0 {
		n := min(len(reqs), batchMax)
		if err := s.batchWrite(ctx, reqs[:n]); err != nil {
			return err
		}
		reqs = reqs[n:]
	}
	return nil
}

// deleteWorkspaceSessions deletes the sessions gsi1 lists for workspace ws, with
// their messages. The index is eventually consistent: a session created a moment
// before the workspace's META was deleted may be missed (best effort).
func (s *Store) deleteWorkspaceSessions(ctx context.Context, ws string) error {
	var e exprs
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(index1),
		KeyConditionExpression:    aws.String(e.name(attrG1PK) + " = " + e.value(str(sessionsPK(ws)))),
		ProjectionExpression:      aws.String(e.name(attrID)),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range items {
		id := getS(m, attrID)
		if err := s.DeleteSession(ctx, id); err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ListMessages returns up to limit messages of session id with seq > after, in
// seq order, with one strongly consistent Query of the session's partition;
// limit is clamped to 1..MaxMessagesPage. EINVALID for a malformed id, ENOTFOUND
// when the session does not exist.
func (s *Store) ListMessages(ctx context.Context, id string, after, limit int) ([]session.Message, error) {
	if err := session.ValidateID("id", id); err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), MaxMessagesPage)
	after = max(after, 0)
	what := "list messages of session " + id
	ok, err := s.exists(ctx, sessionKey(id))
	if err != nil {
		return nil, failure(what, err)
	}
	if !ok {
		return nil, molt.NotFound("session %s not found", id)
	}
	out := []session.Message{}
	if after >= maxSeq {
		return out, nil
	}
	var e exprs
	in := &dynamodb.QueryInput{
		KeyConditionExpression: aws.String(e.name(attrPK) + " = " + e.value(str(sessionPK(id))) + " AND " +
			e.name(attrSK) + " BETWEEN " + e.value(str(msgSK(after+1))) + " AND " + e.value(str(msgSK(maxSeq)))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(true),
	}
	items, _, err := s.queryPage(ctx, in, limit)
	if err != nil {
		return nil, failure(what, err)
	}
	for _, m := range items {
		out = append(out, decodeMessage(m))
	}
	return out, nil
}

// sessionOps is what one Commit does to one session: its AppendMessage and
// SetSummary ops, in order, which become a single conditional update of the
// session's META item (a transaction may write an item only once) plus a Put per
// message.
type sessionOps struct {
	id    string
	item  int // index of the META update among the transaction's items
	steps []sessionStep
}

// sessionStep is one session op of a Commit.
type sessionStep struct {
	op      int // index among Commit's ops
	summary *session.SetSummary
	msg     session.Message
	// external: a MarkExternal op, no condition beyond the session's existence.
	external bool
}

// sessionUpdate builds the META update of g: the session exists, its next_seq is
// the first message's seq and its summary_seq the first summary's IfSummarySeq;
// next_seq moves past the last message, the summary is the last one's. Messages
// must follow each other (seq n, n+1, …) and each summary must start where the
// previous one ended, as if applied one by one; otherwise the op that breaks the
// chain can never succeed and a *work.ConditionFailed naming it is returned.
func (s *Store) sessionUpdate(g *sessionOps) (*types.Update, error) {
	e := &exprs{}
	cond := []string{"attribute_exists(" + e.name(attrPK) + ")"}
	u := &update{e: e}
	next, sum := -1, -1
	var last *session.SetSummary
	updated := s.now()
	external := false
	for _, st := range g.steps {
		if st.external {
			external = true
			continue
		}
		if st.summary != nil {
			if sum >= 0 && st.summary.IfSummarySeq != sum {
				return nil, &work.ConditionFailed{Index: st.op}
			}
			if sum < 0 {
				cond = append(cond, e.name(attrSummarySeq)+" = "+e.value(num(int64(st.summary.IfSummarySeq))))
			}
			sum, last = st.summary.UpToSeq, st.summary
			continue
		}
		if next >= 0 && st.msg.Seq != next {
			return nil, &work.ConditionFailed{Index: st.op}
		}
		if next < 0 {
			cond = append(cond, e.name(attrNextSeq)+" = "+e.value(num(int64(st.msg.Seq))))
		}
		next, updated = st.msg.Seq+1, st.msg.CreatedAt
	}
	if next >= 0 {
		u.setVal(attrNextSeq, num(int64(next)))
	}
	if last != nil {
		u.setStr(attrSummary, last.Summary)
		u.setVal(attrSummarySeq, num(int64(last.UpToSeq)))
	}
	if external {
		u.setVal(attrExternal, boolean(true))
	}
	u.setVal(attrUpdatedAt, tnum(updated))
	return &types.Update{TableName: aws.String(s.table), Key: sessionKey(g.id),
		UpdateExpression:          aws.String(u.expr()),
		ConditionExpression:       aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values}, nil
}

// messagePut is the Put of one appended message: it must not exist.
func (s *Store) messagePut(m session.Message) types.TransactWriteItem {
	var e exprs
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: encodeMessage(m),
		ConditionExpression:      aws.String("attribute_not_exists(" + e.name(attrPK) + ")"),
		ExpressionAttributeNames: e.names}}
}

// sessionFailed reports which op of g failed when its META update's condition
// failed: it reads the session and replays g's conditions on it. When the session
// is absent, or the conditions hold by now, it names g's first op.
func (s *Store) sessionFailed(ctx context.Context, g *sessionOps) int {
	first := g.steps[0].op
	m, ok, err := s.get(ctx, sessionKey(g.id))
	if err != nil || !ok {
		return first
	}
	next, sum := int(getN(m, attrNextSeq)), int(getN(m, attrSummarySeq))
	for _, st := range g.steps {
		if st.external {
			continue
		}
		if st.summary != nil {
			if st.summary.IfSummarySeq != sum {
				return st.op
			}
			sum = st.summary.UpToSeq
			continue
		}
		if st.msg.Seq != next {
			return st.op
		}
		next++
	}
	return first
}

// namingUpdate is the META update of a RequestNaming or SaveTitle op (see their
// docs): one conditional UpdateItem of the session, conditional on its identity
// (created_at) and its naming fields, so a delete or a re-creation of the
// session, a manual rename and a newer request all make it fail.
func (s *Store) namingUpdate(op work.Op) (types.TransactWriteItem, error) {
	e := &exprs{}
	u := &update{e: e}
	cond := []string{"attribute_exists(" + e.name(attrPK) + ")"}
	var id string
	switch op := op.(type) {
	case session.RequestNaming:
		id = op.SessionID
		cond = append(cond, e.name(attrCreatedAt)+" = "+e.value(tnum(op.Created)),
			"(attribute_not_exists("+e.name(attrNamingSeq)+") OR "+e.name(attrNamingSeq)+" < "+e.value(num(int64(op.Seq)))+")")
		u.setVal(attrNamingSeq, num(int64(op.Seq)))
	case session.SaveTitle:
		id = op.SessionID
		src := e.name(attrTitleSource)
		cond = append(cond, e.name(attrCreatedAt)+" = "+e.value(tnum(op.Created)),
			e.name(attrTitleRev)+" = "+e.value(num(int64(op.IfTitleRev))))
		if op.OnlyUnset {
			cond = append(cond, "attribute_not_exists("+src+")")
		} else {
			cond = append(cond, "(attribute_not_exists("+src+") OR "+src+" <> "+e.value(str(session.TitleManual))+")")
		}
		if op.IfNamingSeq > 0 {
			cond = append(cond, e.name(attrNamingSeq)+" = "+e.value(num(int64(op.IfNamingSeq))))
		}
		u.setStr(attrTitle, op.Title)
		u.setVal(attrTitleSource, str(session.TitleAuto))
		u.setVal(attrTitleRev, num(int64(op.IfTitleRev+1)))
		u.setVal(attrUpdatedAt, tnum(s.now()))
	default:
		return types.TransactWriteItem{}, molt.Invalid("ops", "unknown op %T", op)
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: sessionKey(id),
		UpdateExpression:          aws.String(u.expr()),
		ConditionExpression:       aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values}}, nil
}
