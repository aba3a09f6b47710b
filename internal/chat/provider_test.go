package chat_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/openai"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// secretBody is in every error body the fake provider sends: it must never reach
// a conversation or a turn's reason.
const secretBody = "SECRET-PROVIDER-BODY-7f3a"

func TestProviderFailures(t *testing.T) {
	t.Parallel()
	ok := `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"real answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus work.Status
		wantReason string
		wantCalls  int // HTTP requests: turn attempts (3) x client attempts (2) when retried by both
		wantRole   string
	}{
		{name: "429", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, secretBody, http.StatusTooManyRequests)
		}, wantStatus: chat.StatusFailed, wantReason: "model:" + model.ReasonRateLimited, wantCalls: 6, wantRole: session.RoleSystem},
		{name: "500", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, secretBody, http.StatusInternalServerError)
		}, wantStatus: chat.StatusFailed, wantReason: "model:" + model.ReasonServerError, wantCalls: 6, wantRole: session.RoleSystem},
		{name: "garbage", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{not json " + secretBody))
		}, wantStatus: chat.StatusFailed, wantReason: "model:" + model.ReasonMalformedResponse, wantCalls: 3, wantRole: session.RoleSystem},
		{name: "hanging", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client going away
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, wantStatus: chat.StatusFailed, wantReason: "model:" + model.ReasonTimeout, wantCalls: 3, wantRole: session.RoleSystem},
		{name: "400 is not retried", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, secretBody, http.StatusBadRequest)
		}, wantStatus: chat.StatusFailed, wantReason: "model:" + model.ReasonBadRequest, wantCalls: 1, wantRole: session.RoleSystem},
		{name: "one 500 then an answer", handler: func() http.HandlerFunc {
			var n atomic.Int32
			return func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= 2 { // both client attempts of the turn's first attempt
					http.Error(w, secretBody, http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(ok))
			}
		}(), wantStatus: chat.StatusDone, wantCalls: 3, wantRole: session.RoleAssistant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				tc.handler(w, r)
			}))
			t.Cleanup(srv.Close)
			m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "test-model"},
				openai.WithRetry(2, time.Millisecond, 2*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, options{model: m, cfg: chat.Config{ModelTimeout: 300 * time.Millisecond}})
			s := h.session()
			turn := h.post(s.ID, "hello")
			h.mustDrain() // runs every retry: each returns the turn to pending and wakes it
			it, d := h.turn(turn.ID)
			if it.Status != tc.wantStatus || it.Reason != tc.wantReason || it.Active {
				t.Fatalf("turn %s %q active %v, want %s %q", it.Status, it.Reason, it.Active, tc.wantStatus, tc.wantReason)
			}
			if got := int(calls.Load()); got != tc.wantCalls {
				t.Errorf("provider requests = %d, want %d", got, tc.wantCalls)
			}
			msgs := h.messages(s.ID)
			if got := roles(msgs); got != "user "+tc.wantRole {
				t.Fatalf("log = %q, want one %s message", got, tc.wantRole)
			}
			last := msgs[1]
			if last.TurnID != turn.ID || d.ReplySeq != 2 {
				t.Fatalf("last message %+v, reply seq %d", last, d.ReplySeq)
			}
			if tc.wantStatus == chat.StatusDone && last.Text != "real answer" {
				t.Fatalf("reply = %q", last.Text)
			}
			if strings.Contains(last.Text, secretBody) || strings.Contains(it.Reason, secretBody) {
				t.Fatalf("the provider's body leaked: %q / %q", last.Text, it.Reason)
			}
		})
	}
}
