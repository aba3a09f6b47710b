package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
)

// DefaultBaseURL is OpenAI's own endpoint, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Defaults of the client's limits; Options override them.
const (
	DefaultTimeout       = 2 * time.Minute
	DefaultMaxAttempts   = 3
	DefaultBaseBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff    = 8 * time.Second
	DefaultRetryAfterCap = 20 * time.Second
	DefaultMaxBodyBytes  = 4 << 20
)

// Config says which endpoint and model to talk to.
type Config struct {
	BaseURL string // e.g. https://api.openai.com/v1; "" means DefaultBaseURL
	APIKey  string // sent as "Authorization: Bearer …" when not empty
	Model   string // the model id sent as "model"
}

// Option adjusts a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: a client without an overall
// timeout; Request.Timeout bounds each call).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry sets the number of attempts (at least 1) and the exponential backoff:
// the n-th retry waits a random duration in [0, min(max, base·2ⁿ⁻¹)].
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(c *Client) {
		c.attempts = max1(attempts)
		c.baseBackoff, c.maxBackoff = base, max
	}
}

// WithRetryAfterCap bounds how long a Retry-After header may make a retry wait.
func WithRetryAfterCap(d time.Duration) Option { return func(c *Client) { c.retryAfterCap = d } }

// WithMaxBodyBytes bounds the size of a response body.
func WithMaxBodyBytes(n int64) Option { return func(c *Client) { c.maxBody = n } }

// WithDefaultTimeout sets the timeout of calls whose Request.Timeout is 0.
func WithDefaultTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithLogger logs each retry at warn level (status and category only). Without
// it the client logs nothing; failures are the caller's to log.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// Client is a model.Model over an OpenAI-compatible chat completions endpoint. It is
// safe for concurrent use.
type Client struct {
	endpoint string
	apiKey   string
	model    string

	http          *http.Client
	attempts      int
	baseBackoff   time.Duration
	maxBackoff    time.Duration
	retryAfterCap time.Duration
	maxBody       int64
	timeout       time.Duration
	log           *slog.Logger
}

var _ model.Model = (*Client)(nil)

// New returns a Client for cfg. It returns EINVALID when the base URL is not an
// absolute http(s) URL or the model is empty.
func New(cfg Config, opts ...Option) (*Client, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, molt.Invalid("OPENAI_BASE_URL", "OPENAI_BASE_URL must be an absolute http(s) URL")
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, molt.Invalid("model", "openai model id is empty")
	}
	c := &Client{
		endpoint:      strings.TrimRight(base, "/") + "/chat/completions",
		apiKey:        cfg.APIKey,
		model:         cfg.Model,
		http:          &http.Client{},
		attempts:      DefaultMaxAttempts,
		baseBackoff:   DefaultBaseBackoff,
		maxBackoff:    DefaultMaxBackoff,
		retryAfterCap: DefaultRetryAfterCap,
		maxBody:       DefaultMaxBodyBytes,
		timeout:       DefaultTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Name returns "openai:<model>".
func (c *Client) Name() string { return "openai:" + c.model }

// Generate sends req to the chat completions endpoint. See the package doc for
// retries and errors.
func (c *Client) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	body, err := json.Marshal(c.wireRequest(req))
	if err != nil {
		return model.Response{}, model.Fail(model.ReasonBadRequest, "openai: encode request", err)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.timeout
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	for attempt := 1; ; attempt++ {
		resp, retryAfter, err := c.once(ctx, callCtx, body)
		if err == nil {
			return resp, nil
		}
		giveUp := func() (model.Response, error) {
			if attempt > 1 {
				err.Message = fmt.Sprintf("%s (after %d attempts)", err.Message, attempt)
			}
			return model.Response{}, err
		}
		if !retryable(err) || attempt >= c.attempts {
			return giveUp()
		}
		wait := c.backoff(attempt)
		if retryAfter > 0 {
			wait = min(retryAfter, c.retryAfterCap)
		}
		// Give up now rather than sleep into the deadline.
		if dl, ok := callCtx.Deadline(); ok && time.Until(dl) <= wait {
			return giveUp()
		}
		if c.log != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "model call retry",
				slog.String("model", c.Name()), slog.Int("attempt", attempt),
				slog.String("reason", err.Reason), slog.Duration("wait", wait))
		}
		t := time.NewTimer(wait)
		select {
		case <-callCtx.Done():
			t.Stop()
			return model.Response{}, model.ContextFailure(ctx, callCtx, "openai chat completions")
		case <-t.C:
		}
	}
}

func retryable(e *molt.Error) bool {
	switch e.Reason {
	case model.ReasonRateLimited, model.ReasonServerError, model.ReasonNetwork:
		return true
	}
	return false
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.baseBackoff << (attempt - 1)
	if d > c.maxBackoff || d <= 0 {
		d = c.maxBackoff
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1) // full jitter
}

// once makes one HTTP attempt. retryAfter is the server's Retry-After, or 0.
func (c *Client) once(ctx, callCtx context.Context, body []byte) (model.Response, time.Duration, *molt.Error) {
	const what = "openai chat completions"
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return model.Response{}, 0, model.Fail(model.ReasonBadRequest, what+": build request", nil)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		if ce := model.ContextFailure(ctx, callCtx, what); ce != nil {
			return model.Response{}, 0, ce
		}
		return model.Response{}, 0, model.Fail(model.ReasonNetwork, what+": request failed", transportCause(err))
	}
	defer hresp.Body.Close()

	if hresp.StatusCode != http.StatusOK {
		// Drain a little so the connection can be reused; never look at it.
		_, _ = io.Copy(io.Discard, io.LimitReader(hresp.Body, 64<<10))
		return model.Response{}, retryAfter(hresp.Header.Get("Retry-After")), statusFailure(hresp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(hresp.Body, c.maxBody+1))
	if err != nil {
		if ce := model.ContextFailure(ctx, callCtx, what); ce != nil {
			return model.Response{}, 0, ce
		}
		return model.Response{}, 0, model.Fail(model.ReasonNetwork, what+": reading response failed", transportCause(err))
	}
	if int64(len(data)) > c.maxBody {
		return model.Response{}, 0, model.Fail(model.ReasonMalformedResponse,
			fmt.Sprintf("%s: response larger than %d bytes", what, c.maxBody), nil)
	}
	resp, perr := c.parse(data)
	return resp, 0, perr
}

func statusFailure(status int) *molt.Error {
	msg := fmt.Sprintf("openai chat completions: HTTP %d", status)
	switch {
	case status == http.StatusTooManyRequests:
		return model.Fail(model.ReasonRateLimited, msg, nil)
	case status >= 500:
		return model.Fail(model.ReasonServerError, msg, nil)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return model.Fail(model.ReasonAuth, msg, nil)
	case status >= 400:
		return model.Fail(model.ReasonBadRequest, msg, nil)
	default: // 1xx/2xx other than 200, 3xx (redirects are followed by net/http)
		return model.Fail(model.ReasonMalformedResponse, msg, nil)
	}
}

// transportCause keeps the part of a transport error that is safe to show: the
// operation and the low-level cause, without the URL.
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ne
	}
	return errors.New("transport error")
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}
