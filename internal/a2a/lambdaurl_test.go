package a2a_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/molt-dev/molt/internal/a2a"
	"github.com/molt-dev/molt/internal/httpapi"
)

// TestFunctionURLStream serves the streaming function's handler
// (App.A2AStreamHandler) the way lambdaurl.Start does on a function URL in
// RESPONSE_STREAM mode, whose response writer cannot flush: the stream must
// still carry every event, and the card must name the function URL (https).
func TestFunctionURLStream(t *testing.T) {
	e := setup(t)
	h := lambdaurl.Wrap(e.app.A2AStreamHandler())
	const domain = "abcdefgh.lambda-url.eu-west-1.on.aws"
	call := func(method, path, body string, hdr map[string]string) (*events.LambdaFunctionURLStreamingResponse, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := &events.LambdaFunctionURLRequest{Version: "2.0", RawPath: path, Body: body,
			Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.LambdaFunctionURLRequestContext{DomainName: domain,
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: path}}}
		for k, v := range hdr {
			req.Headers[k] = v
		}
		resp, err := h(ctx, req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s body: %v", method, path, err)
		}
		return resp, b
	}

	resp, b := call("GET", "/a2a/acme/main/.well-known/agent-card.json", "", nil)
	var card struct {
		URL          string `json:"url"`
		Capabilities struct {
			Streaming bool `json:"streaming"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(b, &card)
	if resp.StatusCode != 200 || card.URL != "https://"+domain+"/a2a/acme/main" || !card.Capabilities.Streaming {
		t.Errorf("card on the function URL: %d %s", resp.StatusCode, b)
	}
	if resp, _ := call("GET", "/api/workspaces", "", map[string]string{"authorization": "Bearer " + e.admin}); resp.StatusCode != 404 {
		t.Errorf("UI API on the function URL: %d, want 404 (A2A only)", resp.StatusCode)
	}

	p, _ := json.Marshal(map[string]any{"message": userMsg("stream me", nil)})
	resp, b = call("POST", "/a2a/acme/main", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":`+string(p)+`}`,
		map[string]string{"authorization": "Bearer " + e.admin, "a2a-version": "1.0"})
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("stream: %d %v %s", resp.StatusCode, resp.Headers, b)
	}
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Result map[string]json.RawMessage }
		_ = json.Unmarshal([]byte(line), &ev)
		for k := range ev.Result {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) < 3 || kinds[0] != "task" || kinds[len(kinds)-1] != "statusUpdate" || !strings.Contains(strings.Join(kinds, ","), "artifactUpdate") {
		t.Errorf("stream events %v through lambdaurl, want task … artifactUpdate … statusUpdate", kinds)
	}
}

// TestCardBehindAPIGateway: where the endpoint cannot stream (API Gateway) and
// a streaming function URL is configured, the card's primary interface — the
// one a v0.3 client reads as its url — is the function URL, which serves every
// method, and the API's own URL is listed after it.
func TestCardBehindAPIGateway(t *testing.T) {
	e := setup(t)
	const stream = "https://abcdefgh.lambda-url.eu-west-1.on.aws"
	h := httpapi.New(httpapi.Config{Store: e.app.Store,
		A2A: a2a.New(a2a.Config{Store: e.app.Store, Chat: e.app.Chat, StreamURL: stream, Streaming: false})})
	for _, v := range []string{"", "1.0"} {
		req := httptest.NewRequest("GET", "/a2a/acme/main/.well-known/agent-card.json", nil)
		if v != "" {
			req.Header.Set("A2A-Version", v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var card struct {
			URL        string `json:"url"`
			Interfaces []struct {
				URL string `json:"url"`
			} `json:"supportedInterfaces"`
			Additional []struct {
				URL string `json:"url"`
			} `json:"additionalInterfaces"`
			Capabilities struct {
				Streaming bool `json:"streaming"`
			} `json:"capabilities"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &card); err != nil || rec.Code != 200 {
			t.Fatalf("card (version %q): %d %s", v, rec.Code, rec.Body)
		}
		want := stream + "/a2a/acme/main"
		if len(card.Interfaces) != 4 || card.Interfaces[0].URL != want || card.Interfaces[2].URL == want || !card.Capabilities.Streaming {
			t.Fatalf("card (version %q) interfaces %+v, want the function URL first", v, card.Interfaces)
		}
		if v == "" && (card.URL != want || len(card.Additional) != 1 || card.Additional[0].URL == want) {
			t.Fatalf("v0.3 card url %q additional %+v, want the function URL as url", card.URL, card.Additional)
		}
	}
}
