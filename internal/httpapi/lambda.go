package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/obs"
)

// Lambda serves h (a handler from New) to API Gateway HTTP API (payload 2.0)
// events through aws-lambda-go-api-proxy, with what the proxy leaves out:
//
//   - A named stage prefixes rawPath ("/prod/api/…"; $default does not): that
//     one leading segment is removed before routing.
//   - An event the proxy cannot turn into a request (a rawPath with a bad
//     percent-encoding or a control character, a body flagged base64 that is
//     not) is answered with a 400 problem. The proxy would return a Lambda
//     error, which API Gateway shows as a bare 500, after printing the event's
//     path to stdout outside the JSON log.
//
// The proxy splits the values of most headers on commas (docs/architecture.md,
// "AWS facts molt relies on");
// handlers that read such a header look at every value (etagMatches), and
// Authorization is passed whole.
func Lambda(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	proxy := httpadapter.NewV2(h)
	log := slog.Default()
	if s, ok := h.(*server); ok {
		log = s.log
	}
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ev.RawPath = stripStage(ev.RawPath, ev.RequestContext.Stage)
		ev.RequestContext.HTTP.Path = stripStage(ev.RequestContext.HTTP.Path, ev.RequestContext.Stage)
		if err := checkEvent(ev); err != nil {
			return lambdaProblem(ctx, log, ev, err), nil
		}
		resp, err := proxy.ProxyWithContext(ctx, ev)
		if err != nil {
			// Left: the proxy failing to build its response. Never a bare 500.
			return lambdaProblem(ctx, log, ev, &molt.Error{Code: molt.EINTERNAL, Message: "proxy failed", Err: err}), nil
		}
		return resp, nil
	}
}

// stripStage removes a named stage's leading segment from p.
func stripStage(p, stage string) string {
	if stage == "" || stage == "$default" {
		return p
	}
	prefix := "/" + stage
	switch {
	case p == prefix:
		return "/"
	case strings.HasPrefix(p, prefix+"/"):
		return p[len(prefix):]
	}
	return p
}

// checkEvent refuses what the proxy could not turn into an http.Request.
func checkEvent(ev events.APIGatewayV2HTTPRequest) error {
	p := ev.RawPath
	if p == "" {
		p = ev.RequestContext.HTTP.Path
	}
	if u, err := url.ParseRequestURI("/" + strings.TrimPrefix(p, "/")); err != nil || u.RawQuery != "" || u.Fragment != "" {
		return &molt.Error{Code: molt.EINVALID, Reason: reasonInvalidPath, Field: "path",
			Message: "the request path is not a valid percent-encoded path"}
	}
	if ev.IsBase64Encoded {
		if _, err := base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return molt.Invalid("body", "the request body is flagged base64 but is not")
		}
	}
	return nil
}

// lambdaProblem answers err as ServeHTTP would, with the same headers and one
// access log line.
func lambdaProblem(ctx context.Context, log *slog.Logger, ev events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	id := newRequestID(ctx, "")
	ctx = obs.With(ctx, slog.String("request_id", id))
	p, internal := problemFor(err)
	p.RequestID = id
	if internal {
		log.LogAttrs(ctx, slog.LevelError, "request failed", slog.String("method", ev.RequestContext.HTTP.Method),
			slog.String("code", molt.ErrorCode(err)), slog.String("error", err.Error()))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "http request", slog.String("method", ev.RequestContext.HTTP.Method),
		slog.String("route", "unmatched"), slog.Int("status", p.Status), slog.Int64("duration_ms", 0))
	b, _ := json.Marshal(p)
	return events.APIGatewayV2HTTPResponse{
		StatusCode: p.Status,
		Headers: map[string]string{
			"Content-Type":           "application/problem+json",
			"Content-Length":         strconv.Itoa(len(b)),
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "no-store",
			"X-Request-Id":           id,
		},
		Body: string(b),
	}
}
