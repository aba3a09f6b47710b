package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/molt-dev/molt/internal/httpapi"
)

// sampleV2 loads a real API Gateway HTTP API (payload 2.0) sample event shipped
// with the aws-lambda-go module this build uses.
func sampleV2(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("go list aws-lambda-go: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go list aws-lambda-go: %v (%s)", err, out)
	}
	b, err := os.ReadFile(filepath.Join(mod.Dir, "events", "testdata", name))
	if err != nil {
		t.Fatalf("read sample: %v", err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("decode sample %s: %v", name, err)
	}
	return ev
}

// TestLambdaProxy serves the handler the way the api function does:
// httpadapter.NewV2(h).ProxyWithContext on payload 2.0 events.
func TestLambdaProxy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	proxy := httpadapter.NewV2(e.h)
	for i, sample := range []string{"apigw-v2-request-no-authorizer.json", "apigw-v2-request-lambda-authorizer.json"} {
		file := fmt.Sprintf("/api/workspaces/acme/files/agents/lambda-%d/AGENT.md", i)
		base := sampleV2(t, sample)
		// event builds a request from the sample; rawPath carries the path as sent.
		event := func(method, rawPath, query, token, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
			ev := base
			ev.RawPath, ev.RawQueryString = rawPath, query
			ev.RequestContext.HTTP.Method = method
			ev.RequestContext.HTTP.Path = rawPath
			ev.Headers = map[string]string{}
			for k, v := range base.Headers {
				ev.Headers[k] = v
			}
			delete(ev.Headers, "content-length")
			delete(ev.Headers, "authorization")
			if token != "" {
				ev.Headers["authorization"] = "Bearer " + token
			}
			for k, v := range headers {
				ev.Headers[k] = v
			}
			ev.Body = base64.StdEncoding.EncodeToString([]byte(body))
			ev.IsBase64Encoded = true
			return ev
		}
		invoke := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			t.Helper()
			resp, err := proxy.ProxyWithContext(ctx, ev)
			if err != nil {
				t.Fatalf("%s %s: proxy: %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
			}
			if resp.Headers["X-Content-Type-Options"] != "nosniff" || resp.Headers["Cache-Control"] != "no-store" {
				t.Errorf("%s %s: security headers missing: %v", ev.RequestContext.HTTP.Method, ev.RawPath, resp.Headers)
			}
			if resp.StatusCode >= 400 && resp.Headers["Content-Type"] != "application/problem+json" {
				t.Errorf("%s %s: status %d with Content-Type %q", ev.RequestContext.HTTP.Method, ev.RawPath, resp.StatusCode, resp.Headers["Content-Type"])
			}
			return resp
		}
		ctx := context.Background()
		want := func(resp events.APIGatewayV2HTTPResponse, status int) {
			t.Helper()
			if resp.StatusCode != status {
				t.Fatalf("%s: status %d, want %d; body %s", sample, resp.StatusCode, status, resp.Body)
			}
		}

		want(invoke(ctx, event("GET", "/health", "", "", "", nil)), 200)

		resp := invoke(ctx, event("GET", "/api/workspaces", "", "", "", nil))
		want(resp, 401)
		if !strings.HasPrefix(resp.Headers["Www-Authenticate"], "Bearer") {
			t.Errorf("WWW-Authenticate = %q (headers %v)", resp.Headers["Www-Authenticate"], resp.Headers)
		}
		want(invoke(ctx, event("GET", "/api/settings", "", e.ro, "", nil)), 403)

		content := "# Lambda\nsurvives, commas and all\n"
		want(invoke(ctx, event("PUT", file, "", e.full, content, nil)), 201)
		want(invoke(ctx, event("PUT", file, "", e.full, content, nil)), 200)
		resp = invoke(ctx, event("GET", file, "", e.wsTok, "", nil))
		want(resp, 200)
		got := resp.Body
		if resp.IsBase64Encoded {
			b, _ := base64.StdEncoding.DecodeString(resp.Body)
			got = string(b)
		}
		if got != content || resp.Headers["X-Molt-Scope"] != "workspace" || resp.Headers["Etag"] != `"`+sha(content)+`"` {
			t.Errorf("GET through the proxy: body %q, headers %v", got, resp.Headers)
		}
		// The proxy splits If-None-Match on commas; the match still holds.
		want(invoke(ctx, event("GET", file, "", e.full, "",
			map[string]string{"if-none-match": `"other", "` + sha(content) + `"`})), 304)
		want(invoke(ctx, event("GET", strings.Replace(file, "acme", "other", 1), "", e.wsTok, "", nil)), 404)

		// Query strings reach the handler.
		resp = invoke(ctx, event("GET", "/api/workspaces", "limit=1", e.full, "", nil))
		want(resp, 200)
		var l list[wsItem]
		if err := json.Unmarshal([]byte(resp.Body), &l); err != nil || len(l.Items) != 1 || l.NextCursor == "" {
			t.Errorf("limit=1 page: %+v, %v", l, err)
		}
		resp = invoke(ctx, event("GET", "/api/workspaces", "limit=1&cursor="+l.NextCursor, e.full, "", nil))
		want(resp, 200)
		var l2 list[wsItem]
		if err := json.Unmarshal([]byte(resp.Body), &l2); err != nil || len(l2.Items) != 1 || l2.Items[0].Name == l.Items[0].Name {
			t.Errorf("second page: %+v, %v", l2, err)
		}

		// The raw path arrives unclean and is refused, never redirected or written.
		for _, p := range []string{"../x", "%2e%2e/x", "a//b", "/abs", "x/../../y", "secrets.txt"} {
			resp := invoke(ctx, event("PUT", "/api/workspaces/acme/files/"+p, "", e.full, "pwned", nil))
			if resp.StatusCode != 400 && resp.StatusCode != 404 {
				t.Errorf("PUT %s through the proxy: status %d; body %s", p, resp.StatusCode, resp.Body)
			}
		}
		want(invoke(ctx, event("PUT", "/api/workspaces/acme/../global/files/INSTRUCTIONS.md", "", e.full, "pwned", nil)), 400)

		// The Lambda request id becomes the request id.
		lctx := lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "8476a536-e9f4-11e8-9739-2dfe598c3fcd"})
		resp = invoke(lctx, event("GET", "/health", "", "", "", nil))
		if got := resp.Headers["X-Request-Id"]; got != "8476a536-e9f4-11e8-9739-2dfe598c3fcd" {
			t.Errorf("X-Request-Id = %q, want the Lambda request id", got)
		}
	}
	for _, f := range e.allFiles("acme", "other") {
		if string(f.Content) == "pwned" {
			t.Errorf("written through the proxy: %s/%s", f.Workspace, f.Path)
		}
	}
}

// TestLambdaEvents sends API Gateway payload 2.0 events the proxy alone gets
// wrong through httpapi.Lambda: a named stage in rawPath, a rawPath with a bad
// percent-encoding or a control character, a body that is not base64. Each is
// answered by the handler (a problem document, never a Lambda error that API
// Gateway would show as a bare 500), and nothing is written.
func TestLambdaEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fn := httpapi.Lambda(e.h)
	base := sampleV2(t, "apigw-v2-request-no-authorizer.json")
	event := func(method, stage, rawPath, body string, b64 bool) events.APIGatewayV2HTTPRequest {
		ev := base
		ev.RawPath, ev.RawQueryString = rawPath, ""
		ev.RequestContext.Stage = stage
		ev.RequestContext.HTTP.Method = method
		ev.RequestContext.HTTP.Path = rawPath
		ev.Headers = map[string]string{"authorization": "Bearer " + e.full}
		ev.Body, ev.IsBase64Encoded = body, b64
		return ev
	}
	invoke := func(ev events.APIGatewayV2HTTPRequest, status int, code string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		resp, err := fn(context.Background(), ev)
		if err != nil {
			t.Fatalf("%s %s (stage %s): Lambda error %v; want an HTTP answer", ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.Stage, err)
		}
		if resp.StatusCode != status {
			t.Fatalf("%s %s (stage %s): status %d, want %d; body %s", ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.Stage, resp.StatusCode, status, resp.Body)
		}
		if resp.Headers["X-Content-Type-Options"] != "nosniff" || resp.Headers["Cache-Control"] != "no-store" || resp.Headers["X-Request-Id"] == "" {
			t.Errorf("%s: headers %v", ev.RawPath, resp.Headers)
		}
		if status >= 400 {
			var p problemDoc
			if resp.Headers["Content-Type"] != "application/problem+json" || json.Unmarshal([]byte(resp.Body), &p) != nil || p.Code != code || p.Status != status {
				t.Errorf("%s: problem %v %s, want code %s", ev.RawPath, resp.Headers, resp.Body, code)
			}
		}
		return resp
	}

	// A named stage prefixes rawPath; $default does not.
	invoke(event("GET", "prod", "/prod/health", "", false), 200, "")
	invoke(event("GET", "prod", "/prod/api/workspaces/acme", "", false), 200, "")
	invoke(event("PUT", "prod", "/prod/api/workspaces/acme/files/USER.md", "hello", false), 201, "")
	invoke(event("GET", "$default", "/api/workspaces/acme", "", false), 200, "")
	invoke(event("GET", "", "/api/workspaces/acme", "", false), 200, "")
	// Only the stage's own segment is removed.
	invoke(event("GET", "prod", "/production/api/workspaces", "", false), 404, "not_found")

	// Events the proxy cannot turn into a request.
	invoke(event("PUT", "$default", "/api/workspaces/acme/files/INDEX%zz.md", "pwned", false), 400, "invalid_path")
	invoke(event("PUT", "$default", "/api/workspaces/acme/files/INDEX\x7f.md", "pwned", false), 400, "invalid_path")
	invoke(event("PUT", "$default", "/api/workspaces/acme/files/INDEX.md", "!!not base64!!", true), 400, "invalid")
	invoke(event("PUT", "prod", "/prod/api/workspaces/acme/files/%2e%2e/x", "pwned", false), 400, "invalid_path")

	// Header folding: API Gateway joins repeated headers with commas and the
	// proxy splits most of them again; Authorization stays whole.
	ev := event("GET", "$default", "/api/workspaces", "", false)
	ev.Headers["authorization"] = "Bearer " + e.full + ",Bearer " + e.ro
	invoke(ev, 401, "unauthorized")
	ev = event("GET", "$default", "/api/workspaces", "", false)
	ev.Headers["x-request-id"] = "req-1,req-2"
	if got := invoke(ev, 200, "").Headers["X-Request-Id"]; got != "req-1" {
		t.Errorf("X-Request-Id %q, want the first of the folded values", got)
	}
	// Percent-encoded separators name the same surface path, still validated.
	invoke(event("GET", "prod", "/prod/api/workspaces/acme/files/USER%2Emd", "", false), 200, "")
	invoke(event("PUT", "$default", "/api/workspaces/acme/files/agents%2F..%2F..%2Fx", "pwned", false), 400, "invalid_path")

	for _, f := range e.allFiles("acme", "other") {
		if string(f.Content) == "pwned" || f.Path != "USER.md" {
			t.Errorf("written through Lambda: %s/%s", f.Workspace, f.Path)
		}
	}
}
