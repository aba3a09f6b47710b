package a2aclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/molt-dev/molt/internal/a2aclient"
)

// v03 is a remote that speaks only A2A v0.3 (a card with "url", lowercase
// states with kind discriminators), as a2a-go v0.3.3's server does.
func v03(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("GET /card", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "old", "url": srv.URL + "/rpc", "protocolVersion": "0.3.0"})
	})
	mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var req struct {
			Method string `json:"method"`
			Params struct {
				ID string `json:"id"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var res any
		switch req.Method {
		case "SendMessage":
			res = map[string]any{"task": map[string]any{"kind": "task", "id": "t1", "contextId": "c1",
				"status": map[string]any{"state": "submitted"}}}
		case "GetTask":
			if req.Params.ID != "t1" {
				_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": 1,
					"error": map[string]any{"code": -32001, "message": "secret detail"}})
				return
			}
			res = map[string]any{"kind": "task", "id": "t1", "contextId": "c1",
				"status": map[string]any{"state": "completed", "message": map[string]any{"kind": "message",
					"parts": []any{map[string]any{"kind": "text", "text": "from the status"}}}},
				"artifacts": []any{map[string]any{"parts": []any{map[string]any{"kind": "text", "text": "four"}}}}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": 1, "result": res})
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestClient(t *testing.T) {
	t.Parallel()
	srv := v03(t)
	ctx := context.Background()
	var c a2aclient.Client
	endpoint, err := c.Endpoint(ctx, srv.URL+"/card")
	if err != nil || endpoint != srv.URL+"/rpc" {
		t.Fatalf("endpoint = %q, %v", endpoint, err)
	}
	task, err := c.Send(ctx, endpoint, "secret", "m1", "what is two and two?")
	if err != nil || task.ID != "t1" || task.State != a2aclient.StateSubmitted || a2aclient.Terminal(task.State) {
		t.Fatalf("send = %+v, %v", task, err)
	}
	task, err = c.Get(ctx, endpoint, "secret", "t1")
	if err != nil || task.State != a2aclient.StateCompleted || task.Text != "four" {
		t.Fatalf("get = %+v, %v", task, err)
	}
	_, err = c.Get(ctx, endpoint, "secret", "t2")
	if got := a2aclient.Reason(err); got != "rpc_-32001" {
		t.Fatalf("reason = %q (%v), want rpc_-32001 and nothing the remote wrote", got, err)
	}
	_, err = c.Send(ctx, endpoint, "wrong", "m1", "x")
	if got := a2aclient.Reason(err); got != "http_401" {
		t.Fatalf("reason = %q, want http_401", got)
	}
	_, err = c.Endpoint(ctx, "http://127.0.0.1:1/card")
	if got := a2aclient.Reason(err); got != "unreachable" {
		t.Fatalf("reason = %q, want unreachable", got)
	}
}
