package lambdainvoke

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/molt-dev/molt/internal/search"
)

// Reasons of a failed invocation, beside search's malformed and too_large.
const (
	ReasonFunctionError = "function_error" // the function raised or timed out
	ReasonInvokeFailed  = "invoke_failed"  // the Lambda API refused the call
)

// DefaultMaxPayload bounds a function's answer: Lambda's own limit on a
// synchronous invocation's response (6 MB).
const DefaultMaxPayload = 6 << 20

// maxRequestBody bounds a request body wrapped into the event (SearXNG's are
// GETs; Lambda accepts 6 MB of event).
const maxRequestBody = 1 << 20

// API is the Lambda call Transport makes (*lambda.Client).
type API interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ API = (*lambda.Client)(nil)

// Options configures a Transport.
type Options struct {
	// MaxPayload bounds the function's answer in bytes; 0 is DefaultMaxPayload.
	// The client passed to New must enforce it on the wire too (ClientOptions).
	MaxPayload int64
	// Logger receives the Lambda API's error code of a refused call; nil is
	// slog.Default().
	Logger *slog.Logger
	// Now stamps the events (requestContext.timeEpoch); nil is time.Now.
	Now func() time.Time
}

// Transport invokes one function per request. It is safe for concurrent use.
type Transport struct {
	api      API
	function string
	max      int64
	log      *slog.Logger
	now      func() time.Time
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport invoking function (a name or ARN) through api.
func New(api API, function string, o Options) *Transport {
	t := &Transport{api: api, function: function, max: o.MaxPayload, log: o.Logger, now: o.Now}
	if t.max <= 0 {
		t.max = DefaultMaxPayload
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// ClientOptions configures a *lambda.Client for a Transport: no retries (the
// search chain falls back instead, within its own timeout) and an answer read
// only up to maxPayload bytes (0: DefaultMaxPayload), so a large payload is
// refused before it is held in memory.
func ClientOptions(maxPayload int64) func(*lambda.Options) {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	return func(o *lambda.Options) {
		o.RetryMaxAttempts = 1
		next := o.HTTPClient
		if next == nil {
			next = http.DefaultClient
		}
		o.HTTPClient = &boundedClient{next: next, max: maxPayload}
	}
}

// RoundTrip invokes the function with req as an API Gateway v2 event and
// returns its answer; see the package documentation for its errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	ev, err := t.event(req)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, &search.Failure{Reason: search.ReasonMalformed}
	}
	out, err := t.api.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(t.function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errTooLarge) {
			return nil, &search.Failure{Reason: search.ReasonTooLarge}
		}
		code := "unknown"
		var ae smithy.APIError
		if errors.As(err, &ae) {
			code = ae.ErrorCode()
		}
		t.log.WarnContext(ctx, "lambda invoke failed", slog.String("function", t.function), slog.String("error_code", code))
		return nil, &search.Failure{Reason: ReasonInvokeFailed}
	}
	if out.FunctionError != nil {
		// The payload is the function's error object: not shown, only its kind.
		t.log.WarnContext(ctx, "lambda function error", slog.String("function", t.function),
			slog.String("function_error", aws.ToString(out.FunctionError)))
		return nil, &search.Failure{Reason: ReasonFunctionError}
	}
	if int64(len(out.Payload)) > t.max {
		return nil, &search.Failure{Reason: search.ReasonTooLarge}
	}
	return t.response(req, out.Payload)
}

// event is req as API Gateway v2 (payload 2.0) would deliver it.
func (t *Transport) event(req *http.Request) (events.APIGatewayV2HTTPRequest, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBody+1))
		req.Body.Close()
		if err != nil || len(b) > maxRequestBody {
			return events.APIGatewayV2HTTPRequest{}, &search.Failure{Reason: search.ReasonTooLarge}
		}
		body = b
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	headers := map[string]string{}
	for k, vs := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	headers["host"] = host
	var qs map[string]string
	if q := req.URL.Query(); len(q) > 0 {
		qs = make(map[string]string, len(q))
		for k, vs := range q {
			qs[k] = strings.Join(vs, ",")
		}
	}
	now := t.now().UTC()
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               path,
		RawQueryString:        req.URL.RawQuery,
		Headers:               headers,
		QueryStringParameters: qs,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   "$default",
			Stage:      "$default",
			RequestID:  strconv.FormatInt(now.UnixNano(), 36),
			DomainName: host,
			Time:       now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:  now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    req.Method,
				Path:      path,
				Protocol:  "HTTP/1.1",
				SourceIP:  "127.0.0.1",
				UserAgent: req.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return ev, nil
}

// response is the function's API Gateway v2 answer as an *http.Response.
func (t *Transport) response(req *http.Request, payload []byte) (*http.Response, error) {
	var a struct {
		StatusCode        int                 `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		Body              string              `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
		Cookies           []string            `json:"cookies"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&a); err != nil || a.StatusCode < 100 || a.StatusCode > 599 {
		return nil, &search.Failure{Reason: search.ReasonMalformed}
	}
	body := []byte(a.Body)
	if a.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(a.Body)
		if err != nil {
			return nil, &search.Failure{Reason: search.ReasonMalformed}
		}
		body = b
	}
	h := http.Header{}
	for k, vs := range a.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for k, v := range a.Headers {
		if _, ok := a.MultiValueHeaders[k]; !ok {
			h.Set(k, v)
		}
	}
	for _, c := range a.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", a.StatusCode, http.StatusText(a.StatusCode)),
		StatusCode:    a.StatusCode,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// errTooLarge is the read error of an answer past its bound.
var errTooLarge = errors.New("lambda answer too large")

// boundedClient is the Lambda client's HTTP client with its answers bounded.
type boundedClient struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	max int64
}

func (c *boundedClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > c.max {
		resp.Body.Close()
		return nil, errTooLarge
	}
	resp.Body = &boundedBody{r: resp.Body, left: c.max}
	return resp, nil
}

type boundedBody struct {
	r    io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.r.Close() }
