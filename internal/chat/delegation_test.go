package chat_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/workspace"
)

// agents puts agent.yaml files on acme's surface: id → content.
func (h *harness) agents(files map[string]string) {
	h.t.Helper()
	for id, body := range files {
		if _, err := h.store.PutFile(h.ctx, workspace.NewFile("acme", "agents/"+id+"/agent.yaml", []byte(body), h.clock.Now())); err != nil {
			h.t.Fatal(err)
		}
	}
}

// delegating is a harness whose main agent delegates, with a reviewer and a
// tester.
func delegating(t *testing.T, o options) *harness {
	t.Helper()
	h := newHarness(t, o)
	h.agents(map[string]string{"main": "delegation: true\n", "reviewer": "name: reviewer\ndescription: reviews\n",
		"tester": "name: tester\n"})
	return h
}

func texts(msgs []session.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role+": "+m.Text)
	}
	return out
}

func countPrefix(msgs []session.Message, prefix string) int {
	n := 0
	for _, m := range msgs {
		if strings.HasPrefix(m.Text, prefix) {
			n++
		}
	}
	return n
}

// TestDelegationToWorkspaceAgent: the reviewer answers in a sub-session and
// its answer appears in the parent session exactly once, although each turn's
// worker is killed before its final write once and every wake-up is delivered
// twice.
func TestDelegationToWorkspaceAgent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	killed := map[string]bool{}
	h := delegating(t, options{cfg: chat.Config{BeforeFinish: func(tc chat.TurnContext) error {
		mu.Lock()
		defer mu.Unlock()
		if !killed[tc.Turn.ID] {
			killed[tc.Turn.ID] = true
			return errors.New("killed")
		}
		return nil
	}}})
	s := h.session()
	const text = "Have the reviewer look at this"
	turn := h.post(s.ID, text)
	redeliver := func(id string) {
		t.Helper()
		if err := h.app.Chat.Handle(h.ctx, queue.Message{Kind: "turn", ID: id}); err != nil {
			t.Fatalf("duplicate wake-up of %s: %v", id, err)
		}
	}
	recover := func(what string) {
		t.Helper()
		h.clock.Advance(h.app.Chat.Config().Timeout + time.Second)
		if res := h.tick(); res.Requeued != 1 {
			t.Fatalf("tick = %+v, want the killed %s requeued", res, what)
		}
	}
	if errs := h.drain(); len(errs) != 1 {
		t.Fatalf("handler errors = %v, want the parent's kill", errs)
	}
	redeliver(turn.ID)
	recover("parent turn")
	if errs := h.drain(); len(errs) != 1 {
		t.Fatalf("handler errors = %v, want the sub-turn's kill", errs)
	}
	redeliver(turn.ID)
	it, d := h.turn(turn.ID)
	if it.Status != chat.StatusDone || d.Decision != delegate.Dispatch || d.Target != "reviewer" ||
		d.TargetKind != delegate.KindAgent || d.Method != delegate.MethodNatural || d.SubSession == "" || d.SubTurn == "" {
		t.Fatalf("parent turn %s %+v", it.Status, d)
	}
	redeliver(d.SubTurn)
	recover("sub-turn")
	h.mustDrain()
	redeliver(d.SubTurn)
	redeliver(turn.ID)
	h.mustDrain()

	parent := h.messages(s.ID)
	if got := roles(parent); got != "user system system" {
		t.Fatalf("parent log = %q", texts(parent))
	}
	if n := countPrefix(parent, "reviewer answered: "); n != 1 {
		t.Fatalf("answers in the parent = %d, want 1: %q", n, texts(parent))
	}
	if !strings.HasPrefix(parent[1].Text, "Delegated to reviewer") || parent[1].TurnID != turn.ID {
		t.Fatalf("delegation line = %+v", parent[1])
	}
	if parent[2].TurnID != d.SubTurn {
		t.Fatalf("answer line written by %q, want the sub-turn %q", parent[2].TurnID, d.SubTurn)
	}
	sub, err := h.store.GetSession(h.ctx, d.SubSession)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Parent != s.ID || sub.Agent != "reviewer" || sub.Access != s.Access {
		t.Fatalf("sub-session = %+v", sub)
	}
	child := h.messages(sub.ID)
	if got := roles(child); got != "user assistant" || child[0].Text != text {
		t.Fatalf("sub-session log = %q", texts(child))
	}
	if want := "reviewer answered: " + child[1].Text; parent[2].Text != want {
		t.Fatalf("answer line = %q, want %q", parent[2].Text, want)
	}
	st, sd := h.turn(d.SubTurn)
	if st.Status != chat.StatusDone || sd.ReportTo != s.ID || sd.ReportAs != "reviewer" || sd.Decision != "" {
		t.Fatalf("sub-turn %s %+v", st.Status, sd)
	}
	pg, err := h.store.ListSessions(h.ctx, "acme", page.Query{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Items) != 2 {
		t.Fatalf("sessions = %d, want the parent and one sub-session", len(pg.Items))
	}
}

// TestDelegatedTimeoutReported: a sub-turn whose workers keep dying is timed
// out by the tick, and the session that asked is told, once, in the same
// write: it does not wait for an answer that will never come.
func TestDelegatedTimeoutReported(t *testing.T) {
	t.Parallel()
	var parentTurn string
	var mu sync.Mutex
	h := delegating(t, options{cfg: chat.Config{MaxAttempts: 1, BeforeFinish: func(tc chat.TurnContext) error {
		mu.Lock()
		defer mu.Unlock()
		if tc.Turn.ID != parentTurn {
			return errors.New("killed")
		}
		return nil
	}}})
	s := h.session()
	mu.Lock()
	parentTurn = h.post(s.ID, "Have the reviewer look at this").ID
	mu.Unlock()
	if errs := h.drain(); len(errs) != 1 {
		t.Fatalf("handler errors = %v, want the sub-turn's kill", errs)
	}
	h.clock.Advance(h.app.Chat.Config().Timeout + time.Second)
	if res := h.tick(); res.Expired != 1 {
		t.Fatalf("tick = %+v, want the sub-turn expired", res)
	}
	h.tick()
	parent := h.messages(s.ID)
	if got := roles(parent); got != "user system system" {
		t.Fatalf("parent log = %q", texts(parent))
	}
	if want := "reviewer could not answer: its turn timed out"; parent[2].Text != want {
		t.Errorf("report line = %q, want %q", parent[2].Text, want)
	}
}

// TestDelegationStaysLocal: the resolver's local and abstain decisions give
// the normal turn, with the decision on the turn's record; an agent without
// delegation: true never dispatches.
func TestDelegationStaysLocal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text, decision, reason string
		delegation                   bool
	}{
		{"quote", "> Have the reviewer look at this\nthat is what they said", delegate.Local, "", true},
		{"code block", "```\nHave the reviewer look at this\n```", delegate.Local, "", true},
		{"inline code", "`Have the reviewer look at this`", delegate.Local, "", true},
		{"two agents", "@reviewer and @tester both look", delegate.Abstain, delegate.ReasonAmbiguous, true},
		{"two agents, natural", "Have the reviewer and the tester look at this", delegate.Abstain, delegate.ReasonAmbiguous, true},
		{"unknown target", "@nobody look at this", delegate.Abstain, delegate.ReasonUnknownTarget, true},
		{"no delegation", "@reviewer look at this", "", "", false},
		{"no delegation, natural", "Have the reviewer look at this", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := delegating(t, options{})
			if !c.delegation {
				h.agents(map[string]string{"main": "description: no delegation\n"})
			}
			s := h.session()
			turn := h.post(s.ID, c.text)
			h.mustDrain()
			msgs := h.messages(s.ID)
			if got := roles(msgs); got != "user assistant" {
				t.Fatalf("log = %q, want the normal reply", texts(msgs))
			}
			it, d := h.turn(turn.ID)
			if it.Status != chat.StatusDone || d.Decision != c.decision || d.SubSession != "" || d.RemoteTask != "" {
				t.Fatalf("turn %s %+v, want decision %q", it.Status, d, c.decision)
			}
			if c.reason != "" && d.DecisionReason != c.reason {
				t.Fatalf("reason = %q, want %q", d.DecisionReason, c.reason)
			}
			pg, err := h.store.ListSessions(h.ctx, "acme", page.Query{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(pg.Items) != 1 {
				t.Fatalf("sessions = %d, want no sub-session", len(pg.Items))
			}
		})
	}
}

// TestDelegationToRemote: a registered remote (a second molt serve) gets the
// message over A2A, and its answer comes back to the session as one line; the
// session is marked external.
func TestDelegationToRemote(t *testing.T) {
	t.Parallel()
	remote := serve(t, newHarness(t, options{}))
	env := "MOLT_TEST_REMOTE_TOKEN_" + strings.ToUpper(strings.ReplaceAll(t.Name(), "/", "_"))
	os.Setenv(env, remote.ws)
	t.Cleanup(func() { os.Unsetenv(env) })

	h := delegating(t, options{cfg: chat.Config{RemotePoll: 10 * time.Millisecond, RemoteWait: 15 * time.Second}})
	if _, _, err := h.app.Delegate.PutRemote(h.ctx, fullCaller, "acme", "helper", delegate.RemoteInput{
		CardURL: remote.base + "/a2a/acme/main/.well-known/agent-card.json", TokenRef: "env:" + env}); err != nil {
		t.Fatal(err)
	}
	s := h.session()
	turn := h.post(s.ID, "@helper what is two and two?\n```\nkeep = this\n```")
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user system" || !strings.HasPrefix(msgs[1].Text, "helper answered: ") {
		t.Fatalf("log = %q", texts(msgs))
	}
	it, d := h.turn(turn.ID)
	if it.Status != chat.StatusDone || d.Decision != delegate.Dispatch || d.TargetKind != delegate.KindRemote ||
		d.Target != "helper" || d.Method != delegate.MethodExplicit || d.RemoteTask == "" {
		t.Fatalf("turn %s %+v", it.Status, d)
	}
	if got, err := h.store.GetSession(h.ctx, s.ID); err != nil || !got.External {
		t.Fatalf("session external = %v (%v), want true", got.External, err)
	}
	// The remote received the message without the explicit token, code kept.
	rs, err := remote.store.ListSessions(remote.ctx, "acme", page.Query{Limit: 10})
	if err != nil || len(rs.Items) != 1 || !rs.Items[0].External {
		t.Fatalf("remote sessions = %+v (%v)", rs.Items, err)
	}
	rm := remote.messages(rs.Items[0].ID)
	if len(rm) < 2 || rm[0].Text != "what is two and two?\n```\nkeep = this\n```" {
		t.Fatalf("remote log = %q", texts(rm))
	}
	if want := "helper answered: " + rm[len(rm)-1].Text; msgs[1].Text != want {
		t.Fatalf("answer = %q, want %q", msgs[1].Text, want)
	}
}

// TestDelegationToRemoteFails: a remote whose token is refused is reported
// with a safe reason; one whose token is unset never sees the message.
func TestDelegationToRemoteFails(t *testing.T) {
	t.Parallel()
	remote := serve(t, newHarness(t, options{}))
	bad := "MOLT_TEST_BAD_TOKEN_" + strings.ToUpper(t.Name())
	os.Setenv(bad, "molt_not-a-token")
	t.Cleanup(func() { os.Unsetenv(bad) })
	h := delegating(t, options{cfg: chat.Config{RemotePoll: 10 * time.Millisecond}})
	card := remote.base + "/a2a/acme/main/.well-known/agent-card.json"
	for name, ref := range map[string]string{"refused": "env:" + bad, "unset": "env:MOLT_TEST_UNSET_TOKEN_XYZ",
		"aws": "secretsmanager:molt/remote"} {
		if _, _, err := h.app.Delegate.PutRemote(h.ctx, fullCaller, "acme", name, delegate.RemoteInput{CardURL: card, TokenRef: ref}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, reason string }{
		{"refused", "remote:http_401"}, {"unset", "remote:" + delegate.ReasonTokenUnset}, {"aws", "remote:" + delegate.ReasonTokenUnsupported},
	} {
		s := h.session()
		turn := h.post(s.ID, "@"+c.name+" hello")
		h.mustDrain()
		msgs := h.messages(s.ID)
		if got := roles(msgs); got != "user system" || !strings.HasPrefix(msgs[1].Text, c.name+" could not answer (") {
			t.Fatalf("%s: log = %q", c.name, texts(msgs))
		}
		if it, _ := h.turn(turn.ID); it.Status != chat.StatusFailed || it.Reason != c.reason {
			t.Fatalf("%s: turn %s %q, want %q", c.name, it.Status, it.Reason, c.reason)
		}
	}
	if rs, err := remote.store.ListSessions(remote.ctx, "acme", page.Query{Limit: 10}); err != nil || len(rs.Items) != 0 {
		t.Fatalf("remote sessions = %d (%v), want none", len(rs.Items), err)
	}
}
