//go:build linux

package functest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// streamPrelude is what separates a lambdaurl response's JSON prelude (status,
// headers) from its body (application/vnd.awslambda.http-integration-response).
var streamPrelude = []byte{0, 0, 0, 0, 0, 0, 0, 0}

// urlResponse splits a function URL streaming response as the emulator returns it.
func urlResponse(tb testing.TB, payload []byte) (status int, headers map[string]string, body []byte) {
	tb.Helper()
	head, body, ok := bytes.Cut(payload, streamPrelude)
	if !ok {
		tb.Fatalf("not a function URL streaming response (no prelude): %q", payload)
	}
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(head, &p); err != nil {
		tb.Fatalf("prelude %q: %v", head, err)
	}
	return p.StatusCode, p.Headers, body
}

// TestA2AStreamFunction runs functions/a2a-stream (lambdaurl, RESPONSE_STREAM)
// under the emulator with events/a2a-stream-*.json: the card (its own https
// URL, streaming) and a non-blocking SendMessage, whose session, message,
// turn and wake-up go through the recorder and so are checked against the
// function's policy. No SSE here: the emulator hands a streamed body back
// only when the invocation ends, and no turn worker runs to end the task, so
// a stream would last its whole bound. SSE through lambdaurl's unflushable
// writer is tested in internal/a2a (TestFunctionURLStream).
func TestA2AStreamFunction(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	ws := workspace.Workspace{Name: "functest", Description: "seen through the function URL", CreatedAt: time.Now().UTC()}
	ws.UpdatedAt = ws.CreatedAt
	if _, _, err := d.store.PutWorkspace(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	e, _ := d.function(t, "a2a-stream")

	t.Run("card", func(t *testing.T) {
		status, _, body := urlResponse(t, e.invoke(t, readEvent(t, "a2a-stream-card.json", nil)))
		var card struct {
			SupportedInterfaces []struct {
				URL string `json:"url"`
			} `json:"supportedInterfaces"`
			Capabilities struct {
				Streaming bool `json:"streaming"`
			} `json:"capabilities"`
		}
		if err := json.Unmarshal(body, &card); err != nil || status != 200 {
			t.Fatalf("card: %d %s (%v)", status, body, err)
		}
		if !card.Capabilities.Streaming || len(card.SupportedInterfaces) == 0 ||
			!strings.HasPrefix(card.SupportedInterfaces[0].URL, "https://") || !strings.Contains(card.SupportedInterfaces[0].URL, ".lambda-url.") {
			t.Errorf("card on the function URL: %s, want streaming and its own https URL", body)
		}
	})
	t.Run("send", func(t *testing.T) {
		status, headers, body := urlResponse(t, e.invoke(t, readEvent(t, "a2a-stream-send.json", nil)))
		var r struct {
			Result struct {
				Task struct {
					ID     string `json:"id"`
					Status struct {
						State string `json:"state"`
					} `json:"status"`
				} `json:"task"`
			} `json:"result"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal(body, &r); err != nil || status != 200 || !strings.HasPrefix(headers["Content-Type"], "application/json") {
			t.Fatalf("send: %d %v %s (%v)", status, headers, body, err)
		}
		if r.Error != nil || r.Result.Task.ID == "" || r.Result.Task.Status.State != "TASK_STATE_SUBMITTED" {
			t.Fatalf("send: %s, want the submitted task", body)
		}
		it, err := d.store.GetItem(context.Background(), work.KindTurn, r.Result.Task.ID)
		if err != nil || it.Status != work.StatusPending {
			t.Errorf("the task's turn in the table: %+v %v, want pending", it, err)
		}
	})
}
