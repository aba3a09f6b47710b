package chat_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/workspace"
)

const adminSecret = "molt_test-admin-secret-0123456789"

// served is a harness whose App runs `molt serve` (App.Serve: the API, the tick
// and every worker on the in-process queues).
type served struct {
	*harness
	base string
	stop func() error

	ws, ro, other string // tokens: workspace acme, readonly acme, workspace other
}

func serve(t *testing.T, h *harness) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- h.app.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", Tick: time.Hour, AdminToken: adminSecret,
			Out: io.Discard, Ready: func(addr string) { ready <- addr }})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("serve: %v", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-errc
	}
	t.Cleanup(func() { _ = stop() })
	s := &served{harness: h, base: "http://" + addr, stop: stop}
	if _, _, err := h.store.PutWorkspace(h.ctx, workspace.Workspace{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	s.ws = s.token(auth.Workspace, "acme")
	s.ro = s.token(auth.Readonly, "acme")
	s.other = s.token(auth.Workspace, "other")
	return s
}

func (s *served) token(level auth.Level, ws string) string {
	s.t.Helper()
	secret, tok, err := auth.New(level, ws, "test", s.clock.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.store.PutToken(s.ctx, tok); err != nil {
		s.t.Fatal(err)
	}
	return secret
}

func (s *served) do(method, path, token, body string, header ...string) (int, http.Header, []byte) {
	s.t.Helper()
	return httpDo(s.t, method, s.base+path, token, body, header...)
}

type problemDoc struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Field  string `json:"field"`
}

// wantProblem checks a problem+json reply.
func (s *served) wantProblem(method, path, token, body string, status int, code, field string, header ...string) {
	s.t.Helper()
	got, h, b := s.do(method, path, token, body, header...)
	if got != status || h.Get("Content-Type") != "application/problem+json" {
		s.t.Fatalf("%s %s = %d %s %s, want %d problem", method, path, got, h.Get("Content-Type"), b, status)
	}
	p := decode[problemDoc](s.t, b)
	if p.Code != code || p.Field != field {
		s.t.Fatalf("%s %s problem = %+v, want code %q field %q", method, path, p, code, field)
	}
}

type sessionDoc struct {
	ID          string `json:"id"`
	Workspace   string `json:"workspace"`
	Agent       string `json:"agent"`
	Title       string `json:"title"`
	TitleSource string `json:"title_source"`
	TitleRev    int    `json:"title_rev"`
	Access      string `json:"access"`
}

type turnDoc struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Compacted bool   `json:"compacted"`
	ReplySeq  int    `json:"reply_seq"`
}

type messagesDoc struct {
	Items []struct {
		Seq    int    `json:"seq"`
		Role   string `json:"role"`
		Text   string `json:"text"`
		TurnID string `json:"turn_id"`
	} `json:"items"`
	NextAfter int `json:"next_after"`
}

func (s *served) createSession(token, body string) sessionDoc {
	s.t.Helper()
	code, _, b := s.do("POST", "/api/workspaces/acme/sessions", token, body)
	if code != http.StatusCreated {
		s.t.Fatalf("create session = %d %s", code, b)
	}
	return decode[sessionDoc](s.t, b)
}

func (s *served) postMessage(token, sessionID, text string) turnDoc {
	s.t.Helper()
	code, _, b := s.do("POST", "/api/sessions/"+sessionID+"/messages", token, fmt.Sprintf(`{"text":%q}`, text))
	if code != http.StatusAccepted {
		s.t.Fatalf("post message = %d %s", code, b)
	}
	return decode[struct {
		Turn turnDoc `json:"turn"`
	}](s.t, b).Turn
}

func (s *served) getTurn(id string) turnDoc {
	s.t.Helper()
	code, _, b := s.do("GET", "/api/turns/"+id, s.ws, "")
	if code != http.StatusOK {
		s.t.Fatalf("get turn = %d %s", code, b)
	}
	return decode[turnDoc](s.t, b)
}

func (s *served) waitTurn(id, status string) {
	s.t.Helper()
	s.waitFor("turn "+id+" "+status, func() bool { return s.getTurn(id).Status == status })
}

func (s *served) listMessages(token, sessionID string, after int) messagesDoc {
	s.t.Helper()
	code, _, b := s.do("GET", fmt.Sprintf("/api/sessions/%s/messages?after=%d", sessionID, after), token, "")
	if code != http.StatusOK {
		s.t.Fatalf("list messages = %d %s", code, b)
	}
	return decode[messagesDoc](s.t, b)
}

func TestServeChat(t *testing.T) {
	t.Parallel()
	s := serve(t, newHarness(t, options{}))
	if code, _, b := s.do("PUT", "/api/workspaces/acme/files/INSTRUCTIONS.md", adminSecret, "Answer in haiku."); code/100 != 2 {
		t.Fatalf("put INSTRUCTIONS.md = %d %s", code, b)
	}
	ss := s.createSession(s.ws, `{"agent":"main"}`)
	if ss.Agent != "main" || ss.Access != "workspace" || ss.Workspace != "acme" {
		t.Fatalf("session = %+v", ss)
	}
	turn := s.postMessage(s.ws, ss.ID, "hello molt")
	if turn.ID == "" || turn.Status != "pending" {
		t.Fatalf("turn = %+v", turn)
	}
	s.waitTurn(turn.ID, "done")
	msgs := s.listMessages(s.ro, ss.ID, 0) // readonly may read
	if len(msgs.Items) != 2 || msgs.NextAfter != 2 {
		t.Fatalf("messages = %+v", msgs)
	}
	reply := msgs.Items[1]
	if reply.Role != "assistant" || reply.TurnID != turn.ID || !strings.HasPrefix(reply.Text, "[offline model]") ||
		!strings.Contains(reply.Text, "INSTRUCTIONS.md") {
		t.Fatalf("reply = %+v", reply)
	}
	if more := s.listMessages(s.ws, ss.ID, 2); len(more.Items) != 0 || more.NextAfter != 2 {
		t.Fatalf("after=2: %+v", more)
	}

	t.Run("access", func(t *testing.T) {
		s.wantProblem("POST", "/api/sessions/"+ss.ID+"/messages", s.ro, `{"text":"hi"}`, 403, "forbidden", "")
		s.wantProblem("POST", "/api/workspaces/acme/sessions", s.ro, `{}`, 403, "forbidden", "")
		s.wantProblem("PATCH", "/api/sessions/"+ss.ID, s.ro, `{"title":"x"}`, 403, "forbidden", "")
		s.wantProblem("DELETE", "/api/sessions/"+ss.ID, s.ro, ``, 403, "forbidden", "")
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/api/sessions/" + ss.ID, ""},
			{"GET", "/api/sessions/" + ss.ID + "/messages", ""},
			{"POST", "/api/sessions/" + ss.ID + "/messages", `{"text":"hi"}`},
			{"PATCH", "/api/sessions/" + ss.ID, `{"title":"x"}`},
			{"DELETE", "/api/sessions/" + ss.ID, ""},
			{"GET", "/api/turns/" + turn.ID, ""},
			{"GET", "/api/workspaces/acme/sessions", ""},
			{"POST", "/api/workspaces/acme/sessions", `{}`},
			{"GET", "/api/sessions/nosuchsession", ""},
		} {
			s.wantProblem(r.method, r.path, s.other, r.body, 404, "not_found", "")
		}
		s.wantProblem("GET", "/api/sessions/"+ss.ID, "", "", 401, "unauthorized", "")
		if got := len(s.listMessages(s.ws, ss.ID, 0).Items); got != 2 {
			t.Fatalf("refused posts were stored: %d messages", got)
		}
	})

	t.Run("bodies", func(t *testing.T) {
		path := "/api/sessions/" + ss.ID + "/messages"
		s.wantProblem("POST", path, s.ws, `{`, 400, "invalid", "body")
		s.wantProblem("POST", path, s.ws, ``, 400, "invalid", "body")
		s.wantProblem("POST", path, s.ws, `{"text":"x","extra":1}`, 400, "invalid", "extra")
		s.wantProblem("POST", path, s.ws, `{"text":5}`, 400, "invalid", "text")
		s.wantProblem("POST", path, s.ws, `{}`, 400, "invalid", "text")
		s.wantProblem("POST", path, s.ws, `{"text":"   "}`, 400, "invalid", "text")
		s.wantProblem("POST", path, s.ws, `{"text":"x"} {}`, 400, "invalid", "body")
		s.wantProblem("POST", path, s.ws, fmt.Sprintf(`{"text":%q}`, strings.Repeat("a", session.MaxUserText+1)), 413, "too_large", "text")
		s.wantProblem("POST", path, s.ws, fmt.Sprintf(`{"text":%q}`, strings.Repeat("a", 2<<20)), 413, "too_large", "body")
		s.wantProblem("POST", path, s.ws, `{"text":"x"}`, 415, "unsupported_media_type", "Content-Type", "Content-Type", "text/plain")
		s.wantProblem("POST", "/api/workspaces/acme/sessions", s.ws, `{"agent":"nobody"}`, 400, "invalid", "agent")
		s.wantProblem("POST", "/api/workspaces/acme/sessions", s.ws, `{"agent":"../x"}`, 400, "invalid", "agent")
		s.wantProblem("POST", "/api/workspaces/acme/sessions", s.ws, `{"title":5}`, 400, "invalid", "title")
		s.wantProblem("POST", "/api/workspaces/global/sessions", adminSecret, `{}`, 400, "reserved", "workspace")
		s.wantProblem("PATCH", "/api/sessions/"+ss.ID, s.ws, `{}`, 400, "invalid", "title")
		s.wantProblem("PATCH", "/api/sessions/"+ss.ID, s.ws, fmt.Sprintf(`{"title":%q}`, strings.Repeat("t", 201)), 400, "invalid", "title")
		s.wantProblem("GET", "/api/sessions/"+ss.ID+"/messages?after=-1", s.ws, "", 400, "invalid", "after")
		s.wantProblem("GET", "/api/workspaces/acme/sessions?limit=101", s.ws, "", 400, "invalid", "limit")
		if got := len(s.listMessages(s.ws, ss.ID, 0).Items); got != 2 {
			t.Fatalf("refused posts were stored: %d messages", got)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		code, _, b := s.do("PATCH", "/api/sessions/"+ss.ID, s.ws, `{"title":"Greetings"}`)
		got := decode[sessionDoc](t, b)
		if code != 200 || got.Title != "Greetings" || got.TitleSource != "manual" || got.TitleRev != 1 {
			t.Fatalf("rename = %d %+v", code, got)
		}
		_, _, b = s.do("PATCH", "/api/sessions/"+ss.ID, s.ws, `{"title":"Again"}`)
		if got := decode[sessionDoc](t, b); got.TitleRev != 2 {
			t.Fatalf("second rename rev %d", got.TitleRev)
		}
		titled := s.createSession(adminSecret, `{"title":"  Planned  "}`)
		if titled.Title != "Planned" || titled.TitleSource != "manual" || titled.Access != "full" || titled.Agent != "main" {
			t.Fatalf("titled session = %+v", titled)
		}
		third := s.createSession(s.ws, ``)
		// Newest first, with a cursor.
		code, _, b = s.do("GET", "/api/workspaces/acme/sessions?limit=2", s.ro, "")
		page1 := decode[struct {
			Items      []sessionDoc `json:"items"`
			NextCursor string       `json:"next_cursor"`
		}](t, b)
		if code != 200 || len(page1.Items) != 2 || page1.Items[0].ID != third.ID || page1.Items[1].ID != titled.ID || page1.NextCursor == "" {
			t.Fatalf("page 1 = %d %+v", code, page1)
		}
		_, _, b = s.do("GET", "/api/workspaces/acme/sessions?limit=2&cursor="+page1.NextCursor, s.ro, "")
		page2 := decode[struct {
			Items      []sessionDoc `json:"items"`
			NextCursor string       `json:"next_cursor"`
		}](t, b)
		if len(page2.Items) != 1 || page2.Items[0].ID != ss.ID || page2.NextCursor != "" {
			t.Fatalf("page 2 = %+v", page2)
		}
		if code, _, _ := s.do("DELETE", "/api/sessions/"+third.ID, s.ws, ""); code != 204 {
			t.Fatalf("delete = %d", code)
		}
		s.wantProblem("GET", "/api/sessions/"+third.ID, s.ws, "", 404, "not_found", "")
	})
}

func TestServeQueuesMessagesBehindARunningTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	entered, release := make(chan struct{}), make(chan struct{})
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	s := serve(t, h)
	ss := s.createSession(s.ws, `{}`)
	t1 := s.postMessage(s.ws, ss.ID, "first")
	<-entered
	t2 := s.postMessage(s.ws, ss.ID, "second")
	if got := s.getTurn(t2.ID); got.Status != "pending" {
		t.Fatalf("second turn = %+v while the first runs", got)
	}
	close(release)
	s.waitTurn(t2.ID, "done")
	if got := s.getTurn(t1.ID); got.Status != "done" {
		t.Fatalf("first turn = %+v", got)
	}
	msgs := s.listMessages(s.ws, ss.ID, 0)
	var order []string
	for _, m := range msgs.Items {
		order = append(order, m.Role+":"+m.TurnID)
	}
	want := []string{"user:" + t1.ID, "user:" + t2.ID, "assistant:" + t1.ID, "assistant:" + t2.ID}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("log = %v, want %v", order, want)
	}
	if !strings.Contains(msgs.Items[3].Text, `Last user message: "second"`) {
		t.Fatalf("second reply = %q", msgs.Items[3].Text)
	}
}

// TestServeRestartMidTurn stops `molt serve` while a turn waits for the model and
// starts it again on the same data: the turn is answered exactly once.
func TestServeRestartMidTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h1 := newHarness(t, options{dir: dir})
	entered := make(chan struct{})
	h1.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		close(entered)
		<-ctx.Done() // the model is still thinking when the process stops
		return model.ContextFailure(ctx, ctx, "test model")
	})
	s1 := serve(t, h1)
	ss := s1.createSession(s1.ws, `{}`)
	turn := s1.postMessage(s1.ws, ss.ID, "are you there?")
	<-entered
	if err := s1.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("stop: %v", err)
	}
	if err := h1.app.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	h2 := newHarness(t, options{dir: dir, clock: h1.clock})
	h2.clock.Advance(2 * time.Minute) // the tick re-sends wake-ups of pending turns
	s2 := serve(t, h2)
	s2.waitTurn(turn.ID, "done")
	msgs := s2.listMessages(s2.ws, ss.ID, 0)
	if len(msgs.Items) != 2 || msgs.Items[1].Role != "assistant" || msgs.Items[1].TurnID != turn.ID {
		t.Fatalf("messages after restart = %+v", msgs)
	}
}
