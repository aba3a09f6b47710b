package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// --- session helpers -----------------------------------------------------------

func (e *env) newSession(ws string) session.Session {
	e.t.Helper()
	s, err := e.s.CreateSession(e.ctx, session.Session{Workspace: ws, Agent: "main", Access: session.AccessFull})
	if err != nil {
		e.t.Fatalf("create session in %s: %v", ws, err)
	}
	return s
}

func (e *env) session(id string) session.Session {
	e.t.Helper()
	s, err := e.s.GetSession(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get session %s: %v", id, err)
	}
	return s
}

func (e *env) messages(id string) []session.Message {
	e.t.Helper()
	ms, err := e.s.ListMessages(e.ctx, id, 0, 500)
	if err != nil {
		e.t.Fatalf("list messages of %s: %v", id, err)
	}
	return ms
}

func msg(id string, seq int, role, text string) session.AppendMessage {
	return session.AppendMessage{Message: session.Message{SessionID: id, Seq: seq, Role: role, Text: text}}
}

// texts renders a log as "seq:text,…" for comparisons.
func texts(ms []session.Message) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%s", m.Seq, m.Text)
	}
	return b.String()
}

func wantCondFailed(t *testing.T, err error, index int) {
	t.Helper()
	var cf *work.ConditionFailed
	if !asCondFailed(err, &cf) || cf.Index != index {
		t.Fatalf("commit err = %v, want condition failed at index %d", err, index)
	}
}

// --- tests ---------------------------------------------------------------------

// testSessions: create, get, list (newest first, per workspace, cursor) and input
// validation that writes nothing.
func testSessions(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	e.putWorkspace("other")
	s1, err := e.s.CreateSession(e.ctx, session.Session{Workspace: "acme", Agent: "main", Title: "first",
		TitleSource: session.TitleManual, Access: session.AccessWorkspace, External: true})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if s1.ID == "" || s1.NextSeq != 1 || s1.SummarySeq != 0 || s1.TitleRev != 0 || !s1.CreatedAt.Equal(epoch) || !s1.UpdatedAt.Equal(epoch) {
		t.Fatalf("created session = %+v, want an id, next_seq 1, times at %v", s1, epoch)
	}
	got := e.session(s1.ID)
	if got.Workspace != "acme" || got.Agent != "main" || got.Title != "first" || got.TitleSource != session.TitleManual ||
		got.Access != session.AccessWorkspace || !got.External || got.NextSeq != 1 || !got.CreatedAt.Equal(epoch) {
		t.Fatalf("stored session = %+v", got)
	}
	_, err = e.s.GetSession(e.ctx, "nope")
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.GetSession(e.ctx, "../x")
	wantCode(t, err, molt.EINVALID)

	// A sub-session names its parent in the same workspace; an explicit id is kept,
	// and taken only once.
	child, err := e.s.CreateSession(e.ctx, session.Session{ID: "child-1", Workspace: "acme", Agent: "helper.v2",
		Access: session.AccessReadonly, Parent: s1.ID})
	if err != nil || child.ID != "child-1" || e.session("child-1").Parent != s1.ID {
		t.Fatalf("create child = %+v %v", child, err)
	}
	_, err = e.s.CreateSession(e.ctx, session.Session{ID: "child-1", Workspace: "acme", Agent: "main", Access: session.AccessFull})
	wantCode(t, err, molt.ECONFLICT)
	if got := e.session("child-1"); got.Agent != "helper.v2" {
		t.Fatalf("duplicate create overwrote the session: %+v", got)
	}

	good := session.Session{Workspace: "acme", Agent: "main", Access: session.AccessFull}
	bad := []struct {
		name string
		code string
		edit func(*session.Session)
	}{
		{"bad agent", molt.EINVALID, func(s *session.Session) { s.Agent = "bad agent" }},
		{"empty agent", molt.EINVALID, func(s *session.Session) { s.Agent = "" }},
		{"bad workspace", molt.EINVALID, func(s *session.Session) { s.Workspace = "Acme" }},
		{"global workspace", molt.EINVALID, func(s *session.Session) { s.Workspace = "global" }},
		{"unknown workspace", molt.ENOTFOUND, func(s *session.Session) { s.Workspace = "ghost" }},
		{"oversize title", molt.EINVALID, func(s *session.Session) { s.Title = strings.Repeat("é", session.MaxTitle+1) }},
		{"bad title source", molt.EINVALID, func(s *session.Session) { s.Title, s.TitleSource = "x", "robot" }},
		{"bad access", molt.EINVALID, func(s *session.Session) { s.Access = "admin" }},
		{"no access", molt.EINVALID, func(s *session.Session) { s.Access = "" }},
		{"unknown parent", molt.EINVALID, func(s *session.Session) { s.Parent = "ghost-session" }},
		{"bad parent", molt.EINVALID, func(s *session.Session) { s.Parent = "../x" }},
		{"parent in another workspace", molt.EINVALID, func(s *session.Session) { s.Workspace = "other"; s.Parent = s1.ID }},
		{"bad id", molt.EINVALID, func(s *session.Session) { s.ID = "has space" }},
	}
	for i, b := range bad {
		in := good
		in.ID = fmt.Sprintf("bad-%d", i)
		b.edit(&in)
		_, err := e.s.CreateSession(e.ctx, in)
		if molt.ErrorCode(err) != b.code {
			t.Errorf("%s: create err = %v, want %s", b.name, err, b.code)
		}
		if _, err := e.s.GetSession(e.ctx, fmt.Sprintf("bad-%d", i)); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Errorf("%s: the refused session was stored (get: %v)", b.name, err)
		}
	}
	// A title of MaxTitle characters (not bytes) is fine.
	if _, err := e.s.CreateSession(e.ctx, session.Session{Workspace: "other", Agent: "main", Access: session.AccessFull,
		Title: strings.Repeat("é", session.MaxTitle), TitleSource: session.TitleAuto}); err != nil {
		t.Fatalf("create with a %d-character title: %v", session.MaxTitle, err)
	}

	// Listing: one workspace, newest first, across pages.
	want := []string{}
	for i := 0; i < 5; i++ {
		e.clock.Advance(time.Second)
		want = append([]string{e.newSession("acme").ID}, want...)
	}
	want = append(want, s1.ID) // child-1 is an explicit id, which sorts elsewhere
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("session listing does not end")
		}
		pg, err := e.s.ListSessions(e.ctx, "acme", page.Query{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		if len(pg.Items) > 2 {
			t.Fatalf("page of %d sessions, limit 2", len(pg.Items))
		}
		for _, s := range pg.Items {
			if s.Workspace != "acme" {
				t.Fatalf("listing of acme has a session of %s", s.Workspace)
			}
			if s.ID != "child-1" {
				ids = append(ids, s.ID)
			}
		}
		if pg.Next == "" {
			break
		}
		cursor = pg.Next
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("sessions newest first = %v, want %v", ids, want)
	}
	pg, err := e.s.ListSessions(e.ctx, "other", page.Query{})
	if err != nil || len(pg.Items) != 1 || pg.Next != "" {
		t.Fatalf("sessions of other = %+v %v, want the one", pg.Items, err)
	}
	pg, err = e.s.ListSessions(e.ctx, "ghost", page.Query{})
	if err != nil || len(pg.Items) != 0 {
		t.Fatalf("sessions of an unknown workspace = %+v %v, want none", pg.Items, err)
	}
	_, err = e.s.ListSessions(e.ctx, "acme", page.Query{Cursor: "!!not a cursor"})
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.ListSessions(e.ctx, "Bad", page.Query{})
	wantCode(t, err, molt.EINVALID)
}

// testMessages: appends in order, their conditions, validation and ListMessages'
// after/limit.
func testMessages(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	for seq, text := range []string{"hello", "hi there", "how are you"} {
		e.clock.Advance(time.Second)
		role := session.RoleUser
		if seq%2 == 1 {
			role = session.RoleAssistant
		}
		if err := e.s.Commit(e.ctx, msg(s.ID, seq+1, role, text)); err != nil {
			t.Fatalf("append %d: %v", seq+1, err)
		}
	}
	got := e.session(s.ID)
	if got.NextSeq != 4 || !got.UpdatedAt.Equal(epoch.Add(3*time.Second)) || !got.CreatedAt.Equal(epoch) {
		t.Fatalf("after 3 appends session = %+v, want next_seq 4, updated at +3s", got)
	}
	ms := e.messages(s.ID)
	if texts(ms) != "1:hello,2:hi there,3:how are you" || ms[1].Role != session.RoleAssistant || ms[0].SessionID != s.ID {
		t.Fatalf("messages = %+v", ms)
	}
	if !ms[0].CreatedAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("message created_at %v, want the clock's %v", ms[0].CreatedAt, epoch.Add(time.Second))
	}

	// A wrong seq (gap or reuse), an unknown session: the condition fails and
	// nothing is written.
	for _, seq := range []int{3, 5, 1} {
		wantCondFailed(t, e.s.Commit(e.ctx, msg(s.ID, seq, session.RoleUser, "wrong")), 0)
	}
	wantCondFailed(t, e.s.Commit(e.ctx, msg("ghost", 1, session.RoleUser, "x")), 0)
	if got := e.session(s.ID); got.NextSeq != 4 || texts(e.messages(s.ID)) != "1:hello,2:hi there,3:how are you" {
		t.Fatalf("failed appends changed the log: next_seq %d, %s", got.NextSeq, texts(e.messages(s.ID)))
	}
	// Malformed messages are refused before anything is written.
	invalid := []struct {
		m    session.Message
		code string
	}{
		{session.Message{SessionID: s.ID, Seq: 4, Role: "wizard", Text: "x"}, molt.EINVALID},
		{session.Message{SessionID: s.ID, Seq: 0, Role: session.RoleUser}, molt.EINVALID},
		{session.Message{SessionID: "", Seq: 4, Role: session.RoleUser}, molt.EINVALID},
		{session.Message{SessionID: "../x", Seq: 4, Role: session.RoleUser}, molt.EINVALID},
		{session.Message{SessionID: s.ID, Seq: 4, Role: session.RoleUser, Text: strings.Repeat("x", session.MaxMessageText+1)}, molt.ETOOLARGE},
		{session.Message{SessionID: s.ID, Seq: 4, Role: session.RoleAssistant, ToolCalls: json.RawMessage(`[{"broken"`)}, molt.EINVALID},
		{session.Message{SessionID: s.ID, Seq: 4, Role: session.RoleUser, Text: "bad \xff utf-8"}, molt.EINVALID},
	}
	for i, c := range invalid {
		err := e.s.Commit(e.ctx, session.AppendMessage{Message: c.m})
		if molt.ErrorCode(err) != c.code {
			t.Errorf("invalid message %d: err = %v, want %s", i, err, c.code)
		}
	}
	if got := e.session(s.ID); got.NextSeq != 4 {
		t.Fatalf("invalid appends advanced next_seq to %d", got.NextSeq)
	}

	// Several messages of one session in one commit (a tool call and its result),
	// the largest allowed text, tool data and turn id round-trip.
	calls := json.RawMessage(`[{"id":"c1","name":"read_file","args":{"path":"USER.md"}}]`)
	results := json.RawMessage(`[{"id":"c1","ok":true}]`)
	big := strings.Repeat("y", session.MaxMessageText)
	err := e.s.Commit(e.ctx,
		session.AppendMessage{Message: session.Message{SessionID: s.ID, Seq: 4, Role: session.RoleAssistant, ToolCalls: calls, TurnID: "turn-1"}},
		session.AppendMessage{Message: session.Message{SessionID: s.ID, Seq: 5, Role: session.RoleTool, ToolResults: results, TurnID: "turn-1"}},
		session.AppendMessage{Message: session.Message{SessionID: s.ID, Seq: 6, Role: session.RoleAssistant, Text: big, TurnID: "turn-1"}},
	)
	if err != nil {
		t.Fatalf("append three in one commit: %v", err)
	}
	// Within one commit a second append must follow the first: a gap fails it.
	err = e.s.Commit(e.ctx, msg(s.ID, 7, session.RoleUser, "a"), msg(s.ID, 9, session.RoleUser, "b"))
	wantCondFailed(t, err, 1)
	ms = e.messages(s.ID)
	if len(ms) != 6 || e.session(s.ID).NextSeq != 7 {
		t.Fatalf("log has %d messages, next_seq %d; want 6 and 7", len(ms), e.session(s.ID).NextSeq)
	}
	if m := ms[3]; string(m.ToolCalls) != string(calls) || m.TurnID != "turn-1" || m.Text != "" || m.ToolResults != nil {
		t.Fatalf("tool call message = %+v", m)
	}
	if m := ms[4]; string(m.ToolResults) != string(results) || m.Role != session.RoleTool || m.ToolCalls != nil {
		t.Fatalf("tool result message = %+v", m)
	}
	if ms[5].Text != big {
		t.Fatalf("largest message came back with %d bytes, want %d", len(ms[5].Text), len(big))
	}

	// after and limit.
	seqs := func(after, limit int) string {
		t.Helper()
		ms, err := e.s.ListMessages(e.ctx, s.ID, after, limit)
		if err != nil {
			t.Fatalf("list after %d limit %d: %v", after, limit, err)
		}
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = fmt.Sprint(m.Seq)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		after, limit int
		want         string
	}{
		{0, 2, "1,2"}, {2, 2, "3,4"}, {4, 10, "5,6"}, {6, 10, ""}, {100, 10, ""},
		{0, 0, "1"}, {-5, 1, "1"}, {3, 100000, "4,5,6"},
	} {
		if got := seqs(c.after, c.limit); got != c.want {
			t.Errorf("messages after %d limit %d = %q, want %q", c.after, c.limit, got, c.want)
		}
	}
	if ms, err := e.s.ListMessages(e.ctx, e.newSession("acme").ID, 0, 10); err != nil || ms == nil || len(ms) != 0 {
		t.Fatalf("messages of a new session = %#v %v, want an empty list", ms, err)
	}
	_, err = e.s.ListMessages(e.ctx, "ghost", 0, 10)
	wantCode(t, err, molt.ENOTFOUND)
}

// testAppendRace: appenders racing for the same seq; exactly one wins each round,
// the others fail their condition and write nothing.
func testAppendRace(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	const rounds, racers = 6, 2
	var want []string
	for seq := 1; seq <= rounds; seq++ {
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			errs    = make([]error, racers)
			winners []string
		)
		for r := 0; r < racers; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				<-start
				errs[r] = e.s.Commit(e.ctx, msg(s.ID, seq, session.RoleUser, fmt.Sprintf("racer-%d", r)))
			}(r)
		}
		close(start)
		wg.Wait()
		for r, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, fmt.Sprintf("racer-%d", r))
			case !isCondFailed(err):
				t.Fatalf("round %d racer %d: %v, want success or a condition failure", seq, r, err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d appenders won, want exactly 1", seq, len(winners))
		}
		want = append(want, fmt.Sprintf("%d:%s", seq, winners[0]))
	}
	if got := texts(e.messages(s.ID)); got != strings.Join(want, ",") {
		t.Fatalf("log = %s, want %s", got, strings.Join(want, ","))
	}
	if n := e.session(s.ID).NextSeq; n != rounds+1 {
		t.Fatalf("next_seq = %d, want %d", n, rounds+1)
	}
}

// testTurns: a turn's writes go with the message log in one transaction: a new
// turn and the user's message; the assistant's reply with the turn's transition;
// a seq race fails the whole transition and keeps the claim; a lost claim writes
// no message.
func testTurns(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	const turnKind work.Kind = "turn"
	now := e.clock.Now()
	turn := func(id string) work.Item {
		return work.Item{Kind: turnKind, ID: id, Workspace: "acme", LockKey: "session/" + s.ID,
			Status: work.StatusPending, CreatedAt: now, UpdatedAt: now, OpID: "op-" + id}
	}

	// New turn + user message, atomically (straight to the backend).
	if err := e.s.Commit(e.ctx, work.CreateItem{Item: turn("t1")}, msg(s.ID, 1, session.RoleUser, "question")); err != nil {
		t.Fatalf("create turn + append: %v", err)
	}
	if e.get(turnKind, "t1").Status != work.StatusPending || texts(e.messages(s.ID)) != "1:question" {
		t.Fatal("create turn + append did not write both")
	}
	// The same seq again: the append fails, and the turn is not created either.
	err := e.s.Commit(e.ctx, work.CreateItem{Item: turn("t-dup")}, msg(s.ID, 1, session.RoleUser, "again"))
	wantCondFailed(t, err, 1)
	if _, err := e.s.GetItem(e.ctx, turnKind, "t-dup"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("turn of a failed transaction exists: %v", err)
	}
	// Through the protocol: Create with the append as an extra op.
	t2, err := e.p.Create(e.ctx, work.Item{Kind: turnKind, Workspace: "acme", LockKey: "session/" + s.ID},
		msg(s.ID, 2, session.RoleUser, "follow-up"))
	if err != nil {
		t.Fatalf("protocol create + append: %v", err)
	}
	_, err = e.p.Create(e.ctx, work.Item{Kind: turnKind, Workspace: "acme"}, msg(s.ID, 2, session.RoleUser, "late"))
	wantReason(t, err, work.ReasonAlsoFailed)

	// The claimed turn's reply commits with its transition.
	c := e.claim(e.get(turnKind, "t1"), roomy)
	if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}, msg(s.ID, 3, session.RoleAssistant, "answer")); err != nil {
		t.Fatalf("transition + append: %v", err)
	}
	if got := e.get(turnKind, "t1"); got.Status != "done" || got.Active || texts(e.messages(s.ID)) != "1:question,2:follow-up,3:answer" {
		t.Fatalf("after transition + append: %+v, log %s", got, texts(e.messages(s.ID)))
	}

	// A seq race: someone else took seq 4 first. The transition fails as a whole
	// with also_failed, writes nothing and the claim is kept.
	c2 := e.claim(t2, roomy)
	if err := e.s.Commit(e.ctx, msg(s.ID, 4, session.RoleUser, "interjection")); err != nil {
		t.Fatal(err)
	}
	before := e.get(turnKind, t2.ID)
	_, err = e.p.Transition(e.ctx, c2, work.Transition{To: "done", Data: []byte(`{"x":1}`)}, msg(s.ID, 4, session.RoleAssistant, "reply"))
	wantReason(t, err, work.ReasonAlsoFailed)
	if got := e.get(turnKind, t2.ID); got.Status != work.StatusRunning || got.Token != c2.Token || !got.Active || got.OpID != before.OpID {
		t.Fatalf("failed transition changed the turn: %+v", got)
	}
	if e.active(turnKind) != 1 || e.holder("session/"+s.ID) != work.Holder(turnKind, t2.ID) {
		t.Fatalf("failed transition released slot (%d) or lock (%q)", e.active(turnKind), e.holder("session/"+s.ID))
	}
	if got := texts(e.messages(s.ID)); got != "1:question,2:follow-up,3:answer,4:interjection" {
		t.Fatalf("log after the race = %s", got)
	}
	if err := e.p.Heartbeat(e.ctx, c2); err != nil {
		t.Fatalf("heartbeat of the kept claim: %v", err)
	}
	// With the right seq it goes through.
	if _, err := e.p.Transition(e.ctx, c2, work.Transition{To: "done"}, msg(s.ID, 5, session.RoleAssistant, "reply")); err != nil {
		t.Fatalf("transition at the next seq: %v", err)
	}

	// A stale claim (requeued and claimed again) cannot append.
	t3, err := e.p.Create(e.ctx, work.Item{Kind: turnKind, Workspace: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	stale := e.claim(t3, roomy)
	e.clock.Advance(time.Hour)
	if _, err := e.p.Requeue(e.ctx, e.get(turnKind, t3.ID), e.clock.Now().Add(-time.Minute), 3, work.StatusTimeout); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	fresh := e.claim(e.get(turnKind, t3.ID), roomy)
	_, err = e.p.Transition(e.ctx, stale, work.Transition{To: "done"}, msg(s.ID, 6, session.RoleAssistant, "stale reply"))
	if !molt.IsLostClaim(err) {
		t.Fatalf("stale transition + append: %v, want lost claim", err)
	}
	if got := e.session(s.ID); got.NextSeq != 6 || len(e.messages(s.ID)) != 5 {
		t.Fatalf("stale writer appended: next_seq %d, log %s", got.NextSeq, texts(e.messages(s.ID)))
	}
	if _, err := e.p.Transition(e.ctx, fresh, work.Transition{To: "done"}, msg(s.ID, 6, session.RoleAssistant, "fresh reply")); err != nil {
		t.Fatalf("fresh transition + append: %v", err)
	}
	if got := texts(e.messages(s.ID)); !strings.HasSuffix(got, ",6:fresh reply") {
		t.Fatalf("log = %s, want the fresh reply last", got)
	}
}

// testSessionFaults: a transition (and a create) carrying an AppendMessage, with a
// write that fails before it is applied or whose response is lost: the protocol
// reads back, the message is stored exactly once and next_seq advances once.
func testSessionFaults(t *testing.T, open Opener) {
	for _, m := range []struct {
		name string
		mode faults.Mode
	}{{"before", faults.Before}, {"after", faults.After}} {
		t.Run(m.name, func(t *testing.T) {
			e := setup(t, open)
			e.putWorkspace("acme")
			s := e.newSession("acme")
			e.faults.Next(m.mode)
			it, err := e.p.Create(e.ctx, work.Item{Kind: "turn", Workspace: "acme"}, msg(s.ID, 1, session.RoleUser, "question"))
			if err != nil {
				t.Fatalf("create + append with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			c := e.claim(it, 0)
			e.faults.Next(m.mode)
			if _, err := e.p.Transition(e.ctx, c, work.Transition{To: "done"}, msg(s.ID, 2, session.RoleAssistant, "answer")); err != nil {
				t.Fatalf("transition + append with one %s fault: %v", m.name, err)
			}
			e.checkFaultsUsed()
			if got := texts(e.messages(s.ID)); got != "1:question,2:answer" {
				t.Fatalf("log = %s, want each message once", got)
			}
			if got := e.session(s.ID); got.NextSeq != 3 {
				t.Fatalf("next_seq = %d, want 3 (advanced once per message)", got.NextSeq)
			}
			if got := e.get("turn", it.ID); got.Status != "done" || got.Active || e.active("turn") != 0 {
				t.Fatalf("turn after transition = %+v, active %d", got, e.active("turn"))
			}
		})
	}
}

// testSummary: SetSummary's condition, alone and together with an append.
func testSummary(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	for i := 1; i <= 3; i++ {
		if err := e.s.Commit(e.ctx, msg(s.ID, i, session.RoleUser, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.Commit(e.ctx, session.SetSummary{SessionID: s.ID, Summary: "one and two", UpToSeq: 2, IfSummarySeq: 0}); err != nil {
		t.Fatalf("set summary: %v", err)
	}
	if got := e.session(s.ID); got.Summary != "one and two" || got.SummarySeq != 2 || got.NextSeq != 4 {
		t.Fatalf("after summary: %+v", got)
	}
	// Stale: another compaction got there first.
	err := e.s.Commit(e.ctx, session.SetSummary{SessionID: s.ID, Summary: "stale", UpToSeq: 3, IfSummarySeq: 0})
	wantCondFailed(t, err, 0)
	wantCondFailed(t, e.s.Commit(e.ctx, session.SetSummary{SessionID: "ghost", Summary: "x", UpToSeq: 1}), 0)
	err = e.s.Commit(e.ctx, session.SetSummary{SessionID: s.ID, Summary: strings.Repeat("s", session.MaxSummary+1), UpToSeq: 3, IfSummarySeq: 2})
	wantCode(t, err, molt.ETOOLARGE)
	if got := e.session(s.ID); got.Summary != "one and two" || got.SummarySeq != 2 {
		t.Fatalf("refused summaries changed the session: %+v", got)
	}
	// With an append of the same session in one commit: both, or (the summary's
	// condition failing) neither.
	err = e.s.Commit(e.ctx, msg(s.ID, 4, session.RoleSystem, "compacted"), session.SetSummary{SessionID: s.ID, Summary: "bad", UpToSeq: 3, IfSummarySeq: 1})
	wantCondFailed(t, err, 1)
	if got := e.session(s.ID); got.NextSeq != 4 || got.Summary != "one and two" || len(e.messages(s.ID)) != 3 {
		t.Fatalf("half of a failed commit was written: %+v", got)
	}
	err = e.s.Commit(e.ctx, msg(s.ID, 4, session.RoleSystem, "compacted"), session.SetSummary{SessionID: s.ID, Summary: "one to three", UpToSeq: 3, IfSummarySeq: 2})
	if err != nil {
		t.Fatalf("append + summary: %v", err)
	}
	if got := e.session(s.ID); got.NextSeq != 5 || got.Summary != "one to three" || got.SummarySeq != 3 || len(e.messages(s.ID)) != 4 {
		t.Fatalf("after append + summary: %+v", got)
	}
}

// testTitles: SetTitle is a compare-and-save on the title revision.
func testTitles(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	e.clock.Advance(time.Minute)
	got, err := e.s.SetTitle(e.ctx, s.ID, "Trip planning", session.TitleAuto, 0)
	if err != nil {
		t.Fatalf("set title: %v", err)
	}
	if got.Title != "Trip planning" || got.TitleSource != session.TitleAuto || got.TitleRev != 1 || got.ID != s.ID || got.Workspace != "acme" {
		t.Fatalf("set title returned %+v", got)
	}
	if stored := e.session(s.ID); stored.Title != "Trip planning" || stored.TitleRev != 1 || !stored.UpdatedAt.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("stored after set title: %+v", stored)
	}
	// The user renames it; a naming job that read revision 0 must not overwrite.
	if _, err := e.s.SetTitle(e.ctx, s.ID, "My trip", session.TitleManual, 1); err != nil {
		t.Fatalf("manual title: %v", err)
	}
	_, err = e.s.SetTitle(e.ctx, s.ID, "Late auto title", session.TitleAuto, 1)
	wantReason(t, err, "stale_title")
	wantCode(t, err, molt.ECONFLICT)
	if stored := e.session(s.ID); stored.Title != "My trip" || stored.TitleSource != session.TitleManual || stored.TitleRev != 2 {
		t.Fatalf("stale title save changed the session: %+v", stored)
	}
	_, err = e.s.SetTitle(e.ctx, "ghost", "x", session.TitleManual, 0)
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.SetTitle(e.ctx, s.ID, strings.Repeat("x", session.MaxTitle+1), session.TitleManual, 2)
	wantCode(t, err, molt.EINVALID)
	_, err = e.s.SetTitle(e.ctx, s.ID, "x", "robot", 2)
	wantCode(t, err, molt.EINVALID)
	if stored := e.session(s.ID); stored.TitleRev != 2 {
		t.Fatalf("refused titles bumped the revision to %d", stored.TitleRev)
	}
}

// testDeleteSession: deleting a session removes its messages; a later append
// fails its condition; a deleted workspace takes its sessions along.
func testDeleteSession(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s, err := e.s.CreateSession(e.ctx, session.Session{ID: "doomed", Workspace: "acme", Agent: "main", Access: session.AccessFull})
	if err != nil {
		t.Fatal(err)
	}
	keep := e.newSession("acme")
	// More messages than one batch of deletes.
	var ops []work.Op
	for i := 1; i <= 30; i++ {
		ops = append(ops, msg(s.ID, i, session.RoleUser, fmt.Sprint(i)))
	}
	if err := e.s.Commit(e.ctx, ops...); err != nil {
		t.Fatalf("append 30: %v", err)
	}
	if err := e.s.Commit(e.ctx, msg(keep.ID, 1, session.RoleUser, "kept")); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteSession(e.ctx, s.ID); err != nil {
		t.Fatalf("delete session: %v", err)
	}
	_, err = e.s.GetSession(e.ctx, s.ID)
	wantCode(t, err, molt.ENOTFOUND)
	_, err = e.s.ListMessages(e.ctx, s.ID, 0, 10)
	wantCode(t, err, molt.ENOTFOUND)
	wantCondFailed(t, e.s.Commit(e.ctx, msg(s.ID, 31, session.RoleAssistant, "too late")), 0)
	wantCode(t, e.s.DeleteSession(e.ctx, s.ID), molt.ENOTFOUND)
	_, err = e.s.SetTitle(e.ctx, s.ID, "x", session.TitleAuto, 0)
	wantCode(t, err, molt.ENOTFOUND)
	if _, err := e.s.GetSession(e.ctx, s.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("a title save brought the deleted session back: %v", err)
	}
	// The messages are really gone: a new session with the same id starts empty.
	if _, err := e.s.CreateSession(e.ctx, session.Session{ID: "doomed", Workspace: "acme", Agent: "main", Access: session.AccessFull}); err != nil {
		t.Fatalf("re-create: %v", err)
	}
	if ms := e.messages("doomed"); len(ms) != 0 {
		t.Fatalf("re-created session has %d old messages", len(ms))
	}
	if err := e.s.Commit(e.ctx, msg("doomed", 1, session.RoleUser, "fresh")); err != nil {
		t.Fatalf("append to the re-created session: %v", err)
	}
	if got := texts(e.messages(keep.ID)); got != "1:kept" {
		t.Fatalf("other session's log = %s", got)
	}

	// DeleteWorkspace removes its sessions and their messages, not others'.
	e.putWorkspace("other")
	o := e.newSession("other")
	if err := e.s.DeleteWorkspace(e.ctx, "acme"); err != nil {
		t.Fatalf("delete workspace: %v", err)
	}
	for _, id := range []string{"doomed", keep.ID} {
		if _, err := e.s.GetSession(e.ctx, id); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("session %s of a deleted workspace: %v", id, err)
		}
		if _, err := e.s.ListMessages(e.ctx, id, 0, 10); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("messages of %s after workspace delete: %v", id, err)
		}
	}
	e.putWorkspace("acme")
	if pg, err := e.s.ListSessions(e.ctx, "acme", page.Query{}); err != nil || len(pg.Items) != 0 {
		t.Fatalf("re-created workspace lists %d sessions (%v), want none", len(pg.Items), err)
	}
	if _, err := e.s.CreateSession(e.ctx, session.Session{ID: "doomed", Workspace: "acme", Agent: "main", Access: session.AccessFull}); err != nil {
		t.Fatalf("create after workspace delete: %v", err)
	}
	if ms := e.messages("doomed"); len(ms) != 0 {
		t.Fatalf("workspace delete left %d messages", len(ms))
	}
	if got := e.session(o.ID); got.Workspace != "other" {
		t.Fatalf("other workspace's session: %+v", got)
	}
}

// testMarkExternal: MarkExternal sets a session's External flag, alone or
// with an append of the same session (both, or neither); a missing session
// fails its condition.
func testMarkExternal(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	s := e.newSession("acme")
	if e.session(s.ID).External {
		t.Fatal("a new session is external")
	}
	// With an append whose seq is stale: neither is written.
	err := e.s.Commit(e.ctx, msg(s.ID, 2, session.RoleSystem, "late"), session.MarkExternal{SessionID: s.ID})
	wantCondFailed(t, err, 0)
	if got := e.session(s.ID); got.External || got.NextSeq != 1 {
		t.Fatalf("half of a failed commit was written: %+v", got)
	}
	if err := e.s.Commit(e.ctx, msg(s.ID, 1, session.RoleSystem, "answer"), session.MarkExternal{SessionID: s.ID}); err != nil {
		t.Fatalf("append + mark external: %v", err)
	}
	if got := e.session(s.ID); !got.External || got.NextSeq != 2 {
		t.Fatalf("after append + mark external: %+v", got)
	}
	// Again, alone: still external, nothing else moves.
	if err := e.s.Commit(e.ctx, session.MarkExternal{SessionID: s.ID}); err != nil {
		t.Fatalf("mark external again: %v", err)
	}
	if got := e.session(s.ID); !got.External || got.NextSeq != 2 {
		t.Fatalf("after marking again: %+v", got)
	}
	wantCondFailed(t, e.s.Commit(e.ctx, session.MarkExternal{SessionID: "ghost"}), 0)
}
