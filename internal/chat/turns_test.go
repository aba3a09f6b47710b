package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

func TestTurnReplies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	if _, err := h.store.PutFile(h.ctx, workspace.NewFile("acme", "INSTRUCTIONS.md", []byte("Be kind."), h.clock.Now())); err != nil {
		t.Fatal(err)
	}
	s := h.session()
	turn := h.post(s.ID, "hello there")
	if turn.Status != work.StatusPending || turn.LockKey != chat.LockKey(s.ID) {
		t.Fatalf("posted turn = %+v", turn)
	}
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user assistant" {
		t.Fatalf("log = %q, want user assistant", got)
	}
	reply := msgs[1]
	if !strings.HasPrefix(reply.Text, offline.Label) || !strings.Contains(reply.Text, `Last user message: "hello there"`) ||
		!strings.Contains(reply.Text, `System prompt: "=== INSTRUCTIONS.md ==="`) {
		t.Fatalf("reply = %q", reply.Text)
	}
	if reply.TurnID != turn.ID || msgs[0].TurnID != turn.ID {
		t.Fatalf("turn ids: user %q reply %q, want %q", msgs[0].TurnID, reply.TurnID, turn.ID)
	}
	it, d := h.turn(turn.ID)
	if it.Status != chat.StatusDone || it.Active || d.ReplySeq != 2 || d.Steps != 1 || d.Compacted || d.InputTokens == 0 {
		t.Fatalf("turn = %+v data %+v", it, d)
	}
	// A second message sees the first exchange.
	h.post(s.ID, "again")
	h.mustDrain()
	msgs = h.messages(s.ID)
	if got := roles(msgs); got != "user assistant user assistant" || !strings.Contains(msgs[3].Text, "Messages: 3.") {
		t.Fatalf("log = %q, last reply %q", got, msgs[3].Text)
	}
}

func TestMessagePostedDuringTurnIsAnsweredAfterIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.session()
	entered, release := make(chan struct{}), make(chan struct{})
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	t1 := h.post(s.ID, "first")
	ds := h.receive()
	done := make(chan error, 1)
	go func() { done <- h.app.Chat.Handle(h.ctx, ds[0].Message) }()
	<-entered
	t2 := h.post(s.ID, "second")
	t3 := h.post(s.ID, "third")
	h.mustDrain() // their own wake-ups: they wait for t1
	for _, id := range []string{t2.ID, t3.ID} {
		if it, _ := h.turn(id); it.Status != work.StatusPending || it.Attempts != 0 {
			t.Fatalf("turn %s while t1 runs: %s attempts %d, want pending 0", id, it.Status, it.Attempts)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("t1: %v", err)
	}
	// t3's wake-up arrives before t2's (a tick re-sends both, say): t3 waits.
	if err := h.app.Chat.Handle(h.ctx, queue.Message{Kind: "turn", ID: t3.ID}); err != nil {
		t.Fatal(err)
	}
	if it, _ := h.turn(t3.ID); it.Status != work.StatusPending || it.Attempts != 0 {
		t.Fatalf("t3 ran before t2: %s attempts %d", it.Status, it.Attempts)
	}
	h.mustDrain() // t1 woke t2, t2 woke t3
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user user user assistant assistant assistant" {
		t.Fatalf("log = %q", got)
	}
	want := []struct{ turn, last string }{{t1.ID, "first"}, {t2.ID, "second"}, {t3.ID, "third"}}
	for i, w := range want {
		r := msgs[3+i]
		if r.TurnID != w.turn || !strings.Contains(r.Text, fmt.Sprintf("Last user message: %q", w.last)) {
			t.Errorf("reply %d = turn %s %q, want the answer to %q", i, r.TurnID, r.Text, w.last)
		}
	}
	// t2 saw u1, a1, u2 (its view puts t1's reply after u1), t3 saw five messages.
	if !strings.Contains(msgs[4].Text, "Messages: 3.") || !strings.Contains(msgs[5].Text, "Messages: 5.") {
		t.Errorf("transcripts: %q / %q", msgs[4].Text, msgs[5].Text)
	}
	if n := h.model.count(); n != 3 {
		t.Errorf("model calls = %d, want 3", n)
	}
}

func TestDuplicateWakeUps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.session()
	turn := h.post(s.ID, "hi")
	wake := queue.Message{Kind: string(work.KindTurn), ID: turn.ID}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- h.app.Chat.Handle(h.ctx, wake) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("duplicate handling: %v", err)
		}
	}
	h.mustDrain()
	// Late duplicates after the turn is done.
	for range 3 {
		if err := h.app.Chat.Handle(h.ctx, wake); err != nil {
			t.Fatalf("late duplicate: %v", err)
		}
	}
	if got := roles(h.messages(s.ID)); got != "user assistant" {
		t.Fatalf("log = %q, want one reply", got)
	}
	if n := h.model.count(); n != 1 {
		t.Fatalf("model calls = %d, want 1", n)
	}
	if it, _ := h.turn(turn.ID); it.Status != chat.StatusDone || it.Attempts != 1 {
		t.Fatalf("turn %s attempts %d", it.Status, it.Attempts)
	}
	// Wake-ups that are not turns, or name nothing, are dropped harmlessly.
	for _, m := range []queue.Message{{Kind: "run", ID: turn.ID}, {Kind: "turn", ID: "nope"}, {Kind: "turn", ID: "../x"}} {
		if err := h.app.Chat.Handle(h.ctx, m); err != nil {
			t.Errorf("Handle(%+v) = %v", m, err)
		}
	}
}

func TestLostWakeUpRecoveredByTick(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.session()
	turn := h.post(s.ID, "anyone?")
	if n := len(h.receive()); n != 1 { // the wake-up is lost
		t.Fatalf("wake-ups = %d", n)
	}
	if res := h.tick(); res.Resent != 0 {
		t.Fatalf("a fresh turn's wake-up was re-sent: %+v", res)
	}
	h.clock.Advance(2 * time.Minute)
	if res := h.tick(); res.Resent != 1 {
		t.Fatalf("tick = %+v, want one re-sent wake-up", res)
	}
	h.mustDrain()
	if got := roles(h.messages(s.ID)); got != "user assistant" {
		t.Fatalf("log = %q", got)
	}
	if it, _ := h.turn(turn.ID); it.Status != chat.StatusDone {
		t.Fatalf("turn %s", it.Status)
	}
}

func TestWorkerKilledAfterModelAnswered(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	kills := 1
	h := newHarness(t, options{cfg: chat.Config{BeforeFinish: func(tc chat.TurnContext) error {
		mu.Lock()
		defer mu.Unlock()
		if kills > 0 {
			kills--
			return errors.New("killed")
		}
		return nil
	}}})
	s := h.session()
	turn := h.post(s.ID, "hello")
	if errs := h.drain(); len(errs) != 1 {
		t.Fatalf("handler errors = %v, want the kill", errs)
	}
	if got := roles(h.messages(s.ID)); got != "user" {
		t.Fatalf("log after the kill = %q", got)
	}
	if it, _ := h.turn(turn.ID); it.Status != work.StatusRunning || !it.Active {
		t.Fatalf("killed turn is %s", it.Status)
	}
	// The redelivered wake-up finds it running: nothing happens.
	if err := h.app.Chat.Handle(h.ctx, queue.Message{Kind: "turn", ID: turn.ID}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(h.app.Chat.Config().Timeout + time.Second)
	if res := h.tick(); res.Requeued != 1 {
		t.Fatalf("tick = %+v, want the stale turn requeued", res)
	}
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user assistant" {
		t.Fatalf("log = %q, want exactly one reply", got)
	}
	it, _ := h.turn(turn.ID)
	if it.Status != chat.StatusDone || it.Attempts != 2 {
		t.Fatalf("turn %s attempts %d", it.Status, it.Attempts)
	}
	if n := h.model.count(); n != 2 {
		t.Fatalf("model calls = %d, want 2 (the answer before the kill was lost)", n)
	}
}

// TestTickTimeoutNotice: a turn whose workers keep dying is timed out by the tick
// with exactly one system line in the same write.
func TestTickTimeoutNotice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{cfg: chat.Config{MaxAttempts: 2, BeforeFinish: func(chat.TurnContext) error {
		return errors.New("killed")
	}}})
	s := h.session()
	turn := h.post(s.ID, "hello")
	for attempt := 1; attempt <= 2; attempt++ {
		if errs := h.drain(); len(errs) != 1 {
			t.Fatalf("attempt %d: handler errors = %v, want the kill", attempt, errs)
		}
		h.clock.Advance(h.app.Chat.Config().Timeout + time.Second)
		res := h.tick()
		if attempt == 1 && res.Requeued != 1 || attempt == 2 && res.Expired != 1 {
			t.Fatalf("attempt %d: tick = %+v", attempt, res)
		}
	}
	it, _ := h.turn(turn.ID)
	if it.Status != work.StatusTimeout || it.Active {
		t.Fatalf("turn is %s, want timeout", it.Status)
	}
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user system" || msgs[1].Text != chat.TimeoutNotice || msgs[1].TurnID != turn.ID {
		t.Fatalf("log = %q (%+v), want one timeout notice", got, msgs)
	}
	if res := h.tick(); res.Expired != 0 {
		t.Fatalf("second tick expired again: %+v", res)
	}
	if got := roles(h.messages(s.ID)); got != "user system" {
		t.Fatalf("log after another tick = %q", got)
	}
}

func TestStaleWorkerWritesNothing(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := newHarness(t, options{cfg: chat.Config{BeforeFinish: func(tc chat.TurnContext) error {
		if tc.Claim.Attempts == 1 {
			once.Do(func() { close(entered) })
			<-release // the first worker stalls here, its answer ready
		}
		return nil
	}}})
	s := h.session()
	turn := h.post(s.ID, "hello")
	ds := h.receive()
	done := make(chan error, 1)
	go func() { done <- h.app.Chat.Handle(h.ctx, ds[0].Message) }()
	<-entered
	h.clock.Advance(h.app.Chat.Config().Timeout + time.Second)
	if res := h.tick(); res.Requeued != 1 {
		t.Fatalf("tick = %+v", res)
	}
	h.mustDrain() // the second worker takes over and replies
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("stale worker: %v", err)
	}
	if got := roles(h.messages(s.ID)); got != "user assistant" {
		t.Fatalf("log = %q, want one reply", got)
	}
	if it, _ := h.turn(turn.ID); it.Status != chat.StatusDone || it.Attempts != 2 {
		t.Fatalf("turn %s attempts %d", it.Status, it.Attempts)
	}
}

func TestLostClaimCancelsModelCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{cfg: chat.Config{HeartbeatEvery: 5 * time.Millisecond}})
	entered := make(chan struct{})
	cancelled := make(chan struct{})
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		if n != 1 {
			return nil
		}
		close(entered)
		<-ctx.Done() // a model call that only ends when cancelled
		close(cancelled)
		return model.ContextFailure(ctx, ctx, "test model")
	})
	s := h.session()
	turn := h.post(s.ID, "hello")
	ds := h.receive()
	done := make(chan error, 1)
	go func() { done <- h.app.Chat.Handle(h.ctx, ds[0].Message) }()
	<-entered
	// Another party takes the claim (as a tick would from a stale heartbeat).
	it, _ := h.turn(turn.ID)
	if _, err := h.app.Protocol.Requeue(h.ctx, it, h.clock.Now().Add(time.Hour), 3, work.StatusTimeout); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the model call was not cancelled after the claim was lost")
	}
	if err := <-done; err != nil {
		t.Fatalf("worker that lost its claim: %v", err)
	}
	if got := roles(h.messages(s.ID)); got != "user" {
		t.Fatalf("log = %q: a worker without its claim wrote", got)
	}
	if it, _ := h.turn(turn.ID); it.Status != work.StatusPending {
		t.Fatalf("turn is %s, want pending (as the takeover left it)", it.Status)
	}
	if err := h.app.Queue.Send(h.ctx, queue.Message{Kind: "turn", ID: turn.ID}); err != nil {
		t.Fatal(err)
	}
	h.mustDrain()
	if got := roles(h.messages(s.ID)); got != "user assistant" {
		t.Fatalf("log = %q", got)
	}
}

// TestBudgetFullWaitsForTick: a turn refused by a full budget is left pending,
// its wake-up dropped without an error (no SQS redelivery at the visibility
// timeout, no dead-letter count); the tick re-sends it and it is answered.
func TestBudgetFullWaitsForTick(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{cfg: chat.Config{Budget: 1}})
	a, b := h.session(), h.session()
	entered, release := make(chan struct{}), make(chan struct{})
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	h.post(a.ID, "a")
	ds := h.receive()
	done := make(chan error, 1)
	go func() { done <- h.app.Chat.Handle(h.ctx, ds[0].Message) }()
	<-entered
	tb := h.post(b.ID, "b")
	if errs := h.drain(); len(errs) != 0 {
		t.Fatalf("errors = %v, want none (a full budget drops the wake-up)", errs)
	}
	if it, _ := h.turn(tb.ID); it.Status != work.StatusPending || it.Attempts != 0 {
		t.Fatalf("refused turn is %s at attempt %d, want pending and unclaimed", it.Status, it.Attempts)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(61 * time.Second)
	if res := h.tick(); res.Resent < 1 {
		t.Fatalf("tick = %+v, want the pending turn's wake-up re-sent", res)
	}
	h.mustDrain()
	if got := roles(h.messages(b.ID)); got != "user assistant" {
		t.Fatalf("log of b = %q", got)
	}
}

func TestSessionDeleted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	// Deleted before its turn ran: the turn ends, nothing is written.
	s := h.session()
	t1 := h.post(s.ID, "hi")
	if err := h.app.Chat.DeleteSession(h.ctx, fullCaller, s.ID); err != nil {
		t.Fatal(err)
	}
	h.mustDrain()
	if it, _ := h.turn(t1.ID); it.Status != chat.StatusFailed || it.Reason != chat.ReasonSessionDeleted {
		t.Fatalf("turn %s %q", it.Status, it.Reason)
	}
	// Deleted while its turn runs: the reply's append fails, the turn fails.
	s = h.session()
	entered, release := make(chan struct{}), make(chan struct{})
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		close(entered)
		<-release
		return nil
	})
	t2 := h.post(s.ID, "hi")
	ds := h.receive()
	done := make(chan error, 1)
	go func() { done <- h.app.Chat.Handle(h.ctx, ds[0].Message) }()
	<-entered
	if err := h.app.Chat.DeleteSession(h.ctx, fullCaller, s.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if it, _ := h.turn(t2.ID); it.Status != chat.StatusFailed || it.Reason != chat.ReasonSessionDeleted || it.Active {
		t.Fatalf("turn %s %q active %v", it.Status, it.Reason, it.Active)
	}
	if _, err := h.store.ListMessages(h.ctx, s.ID, 0, 10); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("messages of the deleted session: %v", err)
	}
}

func TestAgentConfigErrorFailsTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.session()
	if _, err := h.store.PutFile(h.ctx, workspace.NewFile("acme", "agents/main/agent.yaml", []byte("tools: [unclosed\n"), h.clock.Now())); err != nil {
		t.Fatal(err)
	}
	turn := h.post(s.ID, "hi")
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user system" {
		t.Fatalf("log = %q", got)
	}
	if !strings.Contains(msgs[1].Text, "agents/main/agent.yaml") || msgs[1].TurnID != turn.ID {
		t.Fatalf("notice = %q", msgs[1].Text)
	}
	if it, _ := h.turn(turn.ID); it.Status != chat.StatusFailed || it.Reason != chat.ReasonAgentConfig {
		t.Fatalf("turn %s %q", it.Status, it.Reason)
	}
	if n := h.model.count(); n != 0 {
		t.Fatalf("model called %d times", n)
	}
}

func echoTool(name string) chat.Tool {
	return chat.Tool{Spec: model.Tool{Name: name, Description: "echoes its input"},
		Run: func(ctx context.Context, in json.RawMessage) (string, error) { return "echo:" + string(in), nil }}
}

func TestToolLoop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{tools: []chat.Tool{echoTool("echo"), echoTool("secret")}})
	if _, err := h.store.PutFile(h.ctx, workspace.NewFile("acme", "agents/main/agent.yaml", []byte("name: main\ntools: [echo, missing]\n"), h.clock.Now())); err != nil {
		t.Fatal(err)
	}
	s := h.session()
	h.post(s.ID, `/tool echo {"x": 1}`)
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user assistant tool assistant" {
		t.Fatalf("log = %q", got)
	}
	var calls []struct{ ID, Name string }
	if err := json.Unmarshal(msgs[1].ToolCalls, &calls); err != nil || len(calls) != 1 || calls[0].Name != "echo" {
		t.Fatalf("tool calls = %s (%v)", msgs[1].ToolCalls, err)
	}
	if !strings.Contains(string(msgs[2].ToolResults), `echo:{\"x\":1}`) || !strings.Contains(msgs[3].Text, "Tool results:") {
		t.Fatalf("results %s, final %q", msgs[2].ToolResults, msgs[3].Text)
	}
	// A registered tool the agent does not list is not offered.
	h.post(s.ID, "/tool secret {}")
	h.mustDrain()
	msgs = h.messages(s.ID)
	if last := msgs[len(msgs)-1]; !strings.Contains(last.Text, `Cannot call tool "secret": it is not offered.`) {
		t.Fatalf("last = %q", last.Text)
	}
	// Later turns see the tool exchange in order (the transcript is valid).
	h.post(s.ID, "thanks")
	h.mustDrain()
	msgs = h.messages(s.ID)
	if last := msgs[len(msgs)-1]; !strings.Contains(last.Text, "Messages: 7.") {
		t.Fatalf("last = %q", last.Text)
	}
}

func TestToolStepLimit(t *testing.T) {
	t.Parallel()
	always := offline.New(func(req model.Request) (model.Response, bool) {
		return model.Response{Text: "again", ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("c%d", len(req.Messages)), Name: "echo", Input: json.RawMessage(`{}`)}}}, true
	})
	h := newHarness(t, options{model: always, cfg: chat.Config{MaxSteps: 3}, tools: []chat.Tool{echoTool("echo")}})
	if _, err := h.store.PutFile(h.ctx, workspace.NewFile("acme", "agents/main/agent.yaml", []byte("tools: [echo]\n"), h.clock.Now())); err != nil {
		t.Fatal(err)
	}
	s := h.session()
	turn := h.post(s.ID, "loop forever")
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user assistant tool assistant tool assistant tool assistant" {
		t.Fatalf("log = %q", got)
	}
	if last := msgs[len(msgs)-1].Text; !strings.Contains(last, "Stopped after 3 model calls") {
		t.Fatalf("last = %q", last)
	}
	if _, d := h.turn(turn.ID); d.Steps != 3 || h.model.count() != 3 {
		t.Fatalf("steps %d, model calls %d", d.Steps, h.model.count())
	}
}
