package a2a_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/molt-dev/molt/internal/chat"
)

// goClient resolves the card at {base}/a2a/acme/main with a2a-go v0.3.3's
// resolver and builds its client with molt's token in the SDK's auth
// interceptor (which sends it only when the card's security names the
// scheme); ctx carries the credentials' session.
func goClient(t *testing.T, e *env, polling bool) (context.Context, *a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	card, err := agentcard.DefaultResolver.Resolve(ctx, e.base+"/a2a/acme/main")
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	creds := a2aclient.NewInMemoryCredentialsStore()
	sid := a2aclient.SessionID("interop")
	creds.Set(sid, a2a.SecuritySchemeName("bearer"), a2aclient.AuthCredential(e.admin))
	c, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithConfig(a2aclient.Config{Polling: polling}),
		a2aclient.WithInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return a2aclient.WithSessionID(ctx, sid), c, card
}

func textOf(parts a2a.ContentParts) string {
	s := ""
	for _, p := range parts {
		if tp, ok := p.(a2a.TextPart); ok {
			s += tp.Text
		}
	}
	return s
}

func TestGoSDKInterop(t *testing.T) {
	e := setup(t)
	ctx, c, card := goClient(t, e, false)
	if card.URL != e.base+"/a2a/acme/main" || card.PreferredTransport != a2a.TransportProtocolJSONRPC || !card.Capabilities.Streaming {
		t.Fatalf("card as a2a-go reads it: url %q transport %q streaming %v", card.URL, card.PreferredTransport, card.Capabilities.Streaming)
	}
	if _, ok := card.SecuritySchemes["bearer"].(a2a.HTTPAuthSecurityScheme); !ok || len(card.Security) == 0 {
		t.Fatalf("card security as a2a-go reads it: %#v %#v", card.SecuritySchemes, card.Security)
	}

	// Blocking send: the completed task, the reply as status message and artifact.
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hello"})})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	tk, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage result %T, want *a2a.Task", res)
	}
	if tk.Status.State != a2a.TaskStateCompleted || tk.Status.Message == nil || tk.Status.Message.Role != a2a.MessageRoleAgent ||
		len(tk.Artifacts) != 1 || textOf(tk.Artifacts[0].Parts) == "" {
		t.Fatalf("blocking send: %+v", tk)
	}

	// GetTask with history: the caller's message and the reply.
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: tk.ID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	if got.ID != tk.ID || got.ContextID != tk.ContextID || len(got.History) != 2 || textOf(got.History[0].Parts) != "hello" {
		t.Errorf("GetTask: %+v", got)
	}
	one := 1
	if got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: tk.ID, HistoryLength: &one}); err != nil || len(got.History) != 1 {
		t.Errorf("GetTask historyLength 1: %v %+v", err, got)
	}
	if _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask of an unknown task: %v, want ErrTaskNotFound", err)
	}

	// Canceling a completed task is refused.
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: tk.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("CancelTask of a completed task: %v, want ErrTaskNotCancelable", err)
	}

	// Non-blocking send in the same context, then poll until it is done.
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "again"})
	msg.ContextID = tk.ContextID
	no := false
	res, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg, Config: &a2a.MessageSendConfig{Blocking: &no}})
	if err != nil {
		t.Fatalf("non-blocking SendMessage: %v", err)
	}
	second, ok := res.(*a2a.Task)
	if !ok || second.ContextID != tk.ContextID || (second.Status.State != a2a.TaskStateSubmitted && second.Status.State != a2a.TaskStateWorking) {
		t.Fatalf("non-blocking send: %#v", res)
	}
	for second.Status.State != a2a.TaskStateCompleted {
		if second.Status.State.Terminal() {
			t.Fatalf("polled task ended %s", second.Status.State)
		}
		time.Sleep(50 * time.Millisecond)
		if second, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: second.ID}); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}

	// Streaming: the task, then events up to a final status update.
	var events []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "stream me"})}) {
		if err != nil {
			t.Fatalf("SendStreamingMessage: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) < 2 {
		t.Fatalf("stream: %d events, want the task and a final status", len(events))
	}
	if _, ok := events[0].(*a2a.Task); !ok {
		t.Errorf("first event %T, want *a2a.Task", events[0])
	}
	last, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a.TaskStateCompleted {
		t.Errorf("last event %#v, want a final completed status update", events[len(events)-1])
	}
	var artifact bool
	for _, ev := range events {
		if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && textOf(a.Artifact.Parts) != "" {
			artifact = true
		}
	}
	if !artifact {
		t.Error("stream carried no artifact update")
	}
}

// TestGoSDKCancelAndResubscribe: a2a-go resubscribes to a running task,
// cancels it from another call and sees the stream end canceled.
func TestGoSDKCancelAndResubscribe(t *testing.T) {
	hold := make(chan struct{})
	started := make(chan string, 1)
	e := setupWith(t, func(tc chat.TurnContext) error {
		select {
		case started <- tc.Turn.ID:
			<-hold
			return errors.New("held")
		default:
			return nil
		}
	})
	defer close(hold)
	ctx, c, _ := goClient(t, e, true)
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "slow"})})
	if err != nil {
		t.Fatalf("SendMessage (polling): %v", err)
	}
	tk, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage result %T", res)
	}
	if id := <-started; id != string(tk.ID) {
		t.Fatalf("held turn %s, sent %s", id, tk.ID)
	}
	events := make(chan a2a.Event, 8)
	errs := make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: tk.ID}) {
			if err != nil {
				errs <- err
				return
			}
			events <- ev
		}
	}()
	if ev := <-events; ev == nil {
		t.Fatalf("resubscribe: no first event (%v)", <-errs)
	} else if got, ok := ev.(*a2a.Task); !ok || got.ID != tk.ID || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("resubscribe: first event %#v, want the working task", ev)
	}
	ct, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: tk.ID})
	if err != nil || ct.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask of a running task: %v %+v", err, ct)
	}
	var last a2a.Event
	for ev := range events {
		last = ev
	}
	select {
	case err := <-errs:
		t.Fatalf("resubscribe stream: %v", err)
	default:
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || !st.Final || st.Status.State != a2a.TaskStateCanceled {
		t.Errorf("resubscribe: last event %#v, want a final canceled status", last)
	}
}
