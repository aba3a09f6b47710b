package lambdainvoke_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/molt-dev/molt/internal/lambdainvoke"
	"github.com/molt-dev/molt/internal/search"
)

const function = "molt-dev-SearxngFunction-abc123"

// fakeLambda speaks the Lambda Invoke API's wire format (REST-JSON, as the SDK
// sends and reads it): POST /2015-03-31/functions/{name}/invocations with the
// event as the body; the answer is the function's payload, with
// X-Amz-Function-Error when the function failed, or an API error (a status,
// X-Amzn-Errortype and a JSON message).
type fakeLambda struct {
	t      *testing.T
	answer func(event map[string]any) (status int, header http.Header, body []byte)

	mu     sync.Mutex
	events []map[string]any
	paths  []string
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := "/2015-03-31/functions/" + function + "/invocations"
	if r.Method != http.MethodPost || r.URL.Path != want {
		w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"Type":"User","message":"Function not found: `+r.URL.Path+`"}`)
		return
	}
	if it := r.Header.Get("X-Amz-Invocation-Type"); it != "" && it != "RequestResponse" {
		f.t.Errorf("X-Amz-Invocation-Type = %q, want RequestResponse", it)
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		f.t.Errorf("the invoke is not SigV4-signed: %q", r.Header.Get("Authorization"))
	}
	var ev map[string]any
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
		f.t.Errorf("event is not JSON: %v", err)
	}
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	status, h, body := f.answer(ev)
	for k, vs := range h {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	w.WriteHeader(status)
	w.Write(body)
}

// webAdapter answers as the Lambda Web Adapter does for an API Gateway v2
// event: an API Gateway v2 response.
func webAdapter(status int, contentType, body string, b64 bool) []byte {
	resp := map[string]any{
		"statusCode":        status,
		"headers":           map[string]string{"content-type": contentType, "x-request-id": "r1"},
		"multiValueHeaders": map[string][]string{},
		"body":              body,
		"isBase64Encoded":   b64,
		"cookies":           []string{},
	}
	if b64 {
		resp["body"] = base64.StdEncoding.EncodeToString([]byte(body))
	}
	b, _ := json.Marshal(resp)
	return b
}

func setup(t *testing.T, max int64, answer func(map[string]any) (int, http.Header, []byte)) (*fakeLambda, *lambdainvoke.Transport) {
	t.Helper()
	f := &fakeLambda{t: t, answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := lambda.New(lambda.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-never-shown", ""),
	}, lambdainvoke.ClientOptions(max))
	return f, lambdainvoke.New(client, function, lambdainvoke.Options{MaxPayload: max,
		Now: func() time.Time { return time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) }})
}

func ok(body []byte) func(map[string]any) (int, http.Header, []byte) {
	return func(map[string]any) (int, http.Header, []byte) { return http.StatusOK, nil, body }
}

const searxngJSON = `{"query":"go","results":[{"title":"The Go Programming Language","url":"https://go.dev/","content":"Go is an open source language"}],"answers":[],"corrections":[],"infoboxes":[],"suggestions":[],"unresponsive_engines":[]}`

func TestRoundTripEventAndResponse(t *testing.T) {
	t.Parallel()
	f, tr := setup(t, 0, ok(webAdapter(200, "application/json; charset=utf-8", searxngJSON, false)))
	req, _ := http.NewRequest(http.MethodGet, "http://searxng.invalid/search?q=go+lang&format=json&pageno=1", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != searxngJSON {
		t.Errorf("got %d %q, want 200 and the SearXNG answer", resp.StatusCode, b)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	if len(f.events) != 1 {
		t.Fatalf("%d invocations, want 1", len(f.events))
	}
	ev := f.events[0]
	rc, _ := ev["requestContext"].(map[string]any)
	httpd, _ := rc["http"].(map[string]any)
	hd, _ := ev["headers"].(map[string]any)
	for _, c := range []struct {
		name string
		got  any
		want any
	}{
		{"version", ev["version"], "2.0"},
		{"routeKey", ev["routeKey"], "$default"},
		{"rawPath", ev["rawPath"], "/search"},
		{"rawQueryString", ev["rawQueryString"], "q=go+lang&format=json&pageno=1"},
		{"requestContext.http.method", httpd["method"], "GET"},
		{"requestContext.http.path", httpd["path"], "/search"},
		{"headers.accept", hd["accept"], "application/json"},
		{"headers.host", hd["host"], "searxng.invalid"},
		{"isBase64Encoded", ev["isBase64Encoded"], false},
	} {
		if c.got != c.want {
			t.Errorf("event %s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestRoundTripBase64AndBody(t *testing.T) {
	t.Parallel()
	f, tr := setup(t, 0, ok(webAdapter(201, "application/octet-stream", "\x00\x01binary", true)))
	req, _ := http.NewRequest(http.MethodPost, "http://searxng.invalid/x", strings.NewReader("q=1"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || string(b) != "\x00\x01binary" {
		t.Errorf("got %d %q, want 201 and the decoded body", resp.StatusCode, b)
	}
	ev := f.events[0]
	if ev["isBase64Encoded"] != true || ev["body"] != base64.StdEncoding.EncodeToString([]byte("q=1")) {
		t.Errorf("event body = %v (base64 %v), want q=1 base64-encoded", ev["body"], ev["isBase64Encoded"])
	}
}

// TestSearchThroughFunction runs the search client on the transport: the
// answers and failures of the function become results and safe reasons.
func TestSearchThroughFunction(t *testing.T) {
	t.Parallel()
	unresponsive := `{"query":"go","results":[],"unresponsive_engines":[["duckduckgo","timeout"],["wikipedia","timeout"]]}`
	cases := []struct {
		name   string
		max    int64
		answer func(map[string]any) (int, http.Header, []byte)
		reason string // "" for success
	}{
		{"results", 0, ok(webAdapter(200, "application/json", searxngJSON, false)), ""},
		{"results base64", 0, ok(webAdapter(200, "application/json", searxngJSON, true)), ""},
		{"engines unresponsive", 0, ok(webAdapter(200, "application/json", unresponsive, false)), search.ReasonEnginesUnresponsive},
		{"json disabled", 0, ok(webAdapter(403, "text/html", "<html>Forbidden</html>", false)), search.ReasonJSONDisabled},
		{"bang redirect", 0, ok(webAdapter(302, "text/html", "", false)), search.ReasonRedirectRefused},
		{"searxng 500", 0, ok(webAdapter(500, "text/html", "oops", false)), search.HTTPReason(500)},
		{"function error", 0, func(map[string]any) (int, http.Header, []byte) {
			return 200, http.Header{"X-Amz-Function-Error": {"Unhandled"}},
				[]byte(`{"errorMessage":"2026-12-01T09:00:00Z Task timed out after 30.00 seconds","errorType":"Sandbox.Timedout"}`)
		}, lambdainvoke.ReasonFunctionError},
		{"throttled", 0, func(map[string]any) (int, http.Header, []byte) {
			return 429, http.Header{"X-Amzn-Errortype": {"TooManyRequestsException"}},
				[]byte(`{"Reason":"ConcurrentInvocationLimitExceeded","Type":"User","message":"Rate Exceeded."}`)
		}, lambdainvoke.ReasonInvokeFailed},
		{"access denied", 0, func(map[string]any) (int, http.Header, []byte) {
			return 403, http.Header{"X-Amzn-Errortype": {"AccessDeniedException"}},
				[]byte(`{"Message":"User: arn:aws:sts::123456789012:assumed-role/x is not authorized to perform: lambda:InvokeFunction"}`)
		}, lambdainvoke.ReasonInvokeFailed},
		{"not an API Gateway answer", 0, ok([]byte(`"hello"`)), search.ReasonMalformed},
		{"bad base64", 0, ok([]byte(`{"statusCode":200,"body":"%%%","isBase64Encoded":true}`)), search.ReasonMalformed},
		{"payload too large", 4096, ok(webAdapter(200, "application/json", `{"results":[],"pad":"`+strings.Repeat("x", 8192)+`"}`, false)), search.ReasonTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, tr := setup(t, c.max, c.answer)
			cl := search.New(search.Config{Backend: search.BackendSearXNG, SearXNGTransport: tr, Timeout: 5 * time.Second}, nil)
			defer cl.Close()
			resp, err := cl.Search(context.Background(), search.Query{Text: "go"})
			if c.reason == "" {
				if err != nil {
					t.Fatalf("Search: %v", err)
				}
				if resp.Backend != search.BackendSearXNG || len(resp.Results) != 1 || resp.Results[0].URL != "https://go.dev/" {
					t.Errorf("got %+v, want the one SearXNG result", resp)
				}
				return
			}
			if err == nil {
				t.Fatalf("Search succeeded with %+v, want reason %s", resp, c.reason)
			}
			if len(resp.Attempts) == 0 {
				t.Fatalf("no attempts in the response (err %v)", err)
			}
			a := resp.Attempts[0]
			if a.Outcome != search.OutcomeFailed || a.Reason != c.reason {
				t.Errorf("attempt = %+v, want failed with %s", a, c.reason)
			}
			if strings.Contains(err.Error(), "secret-never-shown") || strings.Contains(err.Error(), "arn:aws") {
				t.Errorf("error %q leaks a credential or the API's message", err)
			}
		})
	}
}

func TestCancelledInvoke(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	_, tr := setup(t, 0, func(map[string]any) (int, http.Header, []byte) {
		<-release
		return 200, nil, webAdapter(200, "application/json", searxngJSON, false)
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://searxng.invalid/search?q=x", nil)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RoundTrip = %v, want the context's deadline", err)
	}
	if search.ReasonOf(err) != "" {
		t.Errorf("a timeout reported as %q, want the context's error", search.ReasonOf(err))
	}
}

// TestWireBound checks that the client refuses a payload past its bound while
// reading it (ClientOptions), before the transport sees it.
func TestWireBound(t *testing.T) {
	t.Parallel()
	f := &fakeLambda{t: t, answer: ok(webAdapter(200, "application/json", strings.Repeat("x", 10000), false))}
	srv := httptest.NewServer(f)
	defer srv.Close()
	client := lambda.New(lambda.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "s", "")}, lambdainvoke.ClientOptions(4096))
	tr := lambdainvoke.New(client, function, lambdainvoke.Options{}) // the transport's own bound is 6 MB
	req, _ := http.NewRequest(http.MethodGet, "http://searxng.invalid/search?q=x", nil)
	_, err := tr.RoundTrip(req)
	if got := search.ReasonOf(err); got != search.ReasonTooLarge {
		t.Errorf("RoundTrip = %v (reason %q), want too_large", err, got)
	}
}
