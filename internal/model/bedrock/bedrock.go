package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
)

// Defaults of the provider's limits.
const (
	DefaultTimeout     = 2 * time.Minute
	DefaultMaxAttempts = 3
	DefaultMaxBackoff  = 8 * time.Second
	MaxBodyBytes       = 4 << 20 // a larger response body is ReasonMalformedResponse
)

// Client is the part of *bedrockruntime.Client the provider uses.
type Client interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
}

var _ Client = (*bedrockruntime.Client)(nil)

// Retryer returns the SDK's standard retryer bounded to maxAttempts attempts in
// all and backoffs of at most maxBackoff, without the SDK's client-wide retry
// quota (the attempt bound is the limit).
func Retryer(maxAttempts int, maxBackoff time.Duration) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = max(maxAttempts, 1)
		o.MaxBackoff = maxBackoff
		o.RateLimiter = ratelimit.None
	})
}

// NewClient returns a bedrockruntime client for cfg whose retryer is
// Retryer(DefaultMaxAttempts, DefaultMaxBackoff) and whose response bodies are
// limited to MaxBodyBytes. optFns run in between and may replace the retryer or
// the HTTP client (tests shorten the backoff and set BaseEndpoint to a local
// server).
func NewClient(cfg aws.Config, optFns ...func(*bedrockruntime.Options)) *bedrockruntime.Client {
	opts := []func(*bedrockruntime.Options){func(o *bedrockruntime.Options) {
		o.Retryer = Retryer(DefaultMaxAttempts, DefaultMaxBackoff)
	}}
	opts = append(opts, optFns...)
	opts = append(opts, func(o *bedrockruntime.Options) {
		hc := o.HTTPClient
		if hc == nil {
			hc = awshttp.NewBuildableClient()
		}
		o.HTTPClient = limitedClient{next: hc, max: MaxBodyBytes}
	})
	return bedrockruntime.NewFromConfig(cfg, opts...)
}

// limitedClient fails the reading of a response body past max bytes, so that a
// runaway response cannot exhaust memory.
type limitedClient struct {
	next bedrockruntime.HTTPClient
	max  int64
}

func (c limitedClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err == nil && resp.Body != nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: c.max}
	}
	return resp, err
}

var errBodyTooLarge = errors.New("response body too large")

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte decides between the exact limit and too much.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return b.ReadCloser.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// Model is a model.Model for one Bedrock model id (or inference profile). It is
// safe for concurrent use.
type Model struct {
	client  Client
	modelID string
	timeout time.Duration
}

var _ model.Model = (*Model)(nil)

// Option adjusts a Model.
type Option func(*Model)

// WithDefaultTimeout sets the timeout of calls whose Request.Timeout is 0.
func WithDefaultTimeout(d time.Duration) Option { return func(m *Model) { m.timeout = d } }

// New returns a Model calling modelID through client (see NewClient). It returns
// EINVALID when modelID is empty.
func New(client Client, modelID string, opts ...Option) (*Model, error) {
	if modelID == "" {
		return nil, molt.Invalid("model", "bedrock model id is empty")
	}
	m := &Model{client: client, modelID: modelID, timeout: DefaultTimeout}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// Name returns "bedrock:<model-id>".
func (m *Model) Name() string { return "bedrock:" + m.modelID }

const what = "bedrock converse"

// Generate sends req to Converse. See the package doc for mapping and errors.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	in, err := m.input(req)
	if err != nil {
		return model.Response{}, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = m.timeout
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := m.client.Converse(callCtx, in)
	if err != nil {
		return model.Response{}, failure(ctx, callCtx, err)
	}
	return m.response(out)
}

func (m *Model) input(req model.Request) (*bedrockruntime.ConverseInput, error) {
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(m.modelID)}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	if req.MaxTokens > 0 {
		in.InferenceConfig = &types.InferenceConfiguration{MaxTokens: aws.Int32(int32(min(req.MaxTokens, 1<<31-1)))}
	}
	for _, msg := range req.Messages {
		role := types.ConversationRoleUser
		if msg.Role == model.RoleAssistant {
			role = types.ConversationRoleAssistant
		}
		var blocks []types.ContentBlock
		for _, r := range msg.ToolResults {
			tr := types.ToolResultBlock{
				ToolUseId: aws.String(r.CallID),
				Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: r.Content}},
			}
			if r.IsError {
				tr.Status = types.ToolResultStatusError
			}
			blocks = append(blocks, &types.ContentBlockMemberToolResult{Value: tr})
		}
		if msg.Text != "" {
			blocks = append(blocks, &types.ContentBlockMemberText{Value: msg.Text})
		}
		for i, tc := range msg.ToolCalls {
			input, err := object(tc.Input)
			if err != nil {
				return nil, molt.Invalid("messages", "tool call %d of a message has input that is not a JSON object", i)
			}
			blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
				ToolUseId: aws.String(tc.ID), Name: aws.String(tc.Name), Input: document.NewLazyDocument(input),
			}})
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, blocks...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	if len(req.Tools) > 0 {
		tc := &types.ToolConfiguration{}
		for _, t := range req.Tools {
			schema, err := object(t.InputSchema)
			if err != nil {
				return nil, molt.Invalid("tools", "input schema of tool %q is not a JSON object", t.Name)
			}
			if len(schema) == 0 {
				schema = map[string]any{"type": "object"}
			}
			spec := types.ToolSpecification{
				Name:        aws.String(t.Name),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
			}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		in.ToolConfig = tc
	}
	return in, nil
}

// object decodes a JSON object; empty input is an empty object.
func object(raw json.RawMessage) (map[string]any, error) {
	v := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, errors.New("null")
	}
	return v, nil
}

func (m *Model) response(out *bedrockruntime.ConverseOutput) (model.Response, error) {
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return model.Response{}, model.Fail(model.ReasonMalformedResponse, what+": response has no message", nil)
	}
	resp := model.Response{StopReason: string(out.StopReason), Model: m.modelID}
	if resp.StopReason == "" {
		resp.StopReason = model.StopEndTurn
	}
	for _, block := range msg.Value.Content {
		switch b := block.(type) {
		case *types.ContentBlockMemberText:
			resp.Text += b.Value
		case *types.ContentBlockMemberToolUse:
			input := json.RawMessage(`{}`)
			if b.Value.Input != nil {
				raw, err := b.Value.Input.MarshalSmithyDocument()
				if err != nil || !json.Valid(raw) {
					return model.Response{}, model.Fail(model.ReasonMalformedResponse, what+": tool use input is not JSON", nil)
				}
				input = raw
			}
			name := aws.ToString(b.Value.Name)
			if name == "" {
				return model.Response{}, model.Fail(model.ReasonMalformedResponse, what+": tool use has no name", nil)
			}
			resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: aws.ToString(b.Value.ToolUseId), Name: name, Input: input})
		}
		// Other blocks (reasoning, citations, images) are not part of the port.
	}
	if out.Usage != nil {
		resp.Usage = model.Usage{
			InputTokens:  int(aws.ToInt32(out.Usage.InputTokens)),
			OutputTokens: int(aws.ToInt32(out.Usage.OutputTokens)),
		}
	}
	return resp, nil
}

// failure maps an SDK error to a safe *molt.Error: it looks at the error code and
// the HTTP status, never at the service's message.
func failure(ctx, callCtx context.Context, err error) error {
	if ce := model.ContextFailure(ctx, callCtx, what); ce != nil {
		return ce
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	after := ""
	var mae *retry.MaxAttemptsError
	if errors.As(err, &mae) {
		after = fmt.Sprintf(" (after %d attempts)", mae.Attempt)
	}
	if errors.Is(err, errBodyTooLarge) {
		return model.Fail(model.ReasonMalformedResponse, fmt.Sprintf("%s: response larger than %d bytes", what, MaxBodyBytes), nil)
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		msg := fmt.Sprintf("%s: response could not be decoded (HTTP %d)%s", what, status, after)
		if status >= 300 {
			// An error status whose body is not Bedrock's: the status says enough.
			return byStatus(status, msg)
		}
		return model.Fail(model.ReasonMalformedResponse, msg, nil)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		msg := fmt.Sprintf("%s: %s (HTTP %d)%s", what, code, status, after)
		switch code {
		case "ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException":
			return model.Fail(model.ReasonRateLimited, msg, nil)
		case "InternalServerException", "ServiceUnavailableException", "ModelNotReadyException", "ModelErrorException":
			return model.Fail(model.ReasonServerError, msg, nil)
		case "ModelTimeoutException":
			return model.Fail(model.ReasonTimeout, msg, nil)
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
			"ExpiredTokenException", "MissingAuthenticationTokenException", "IncompleteSignature":
			return model.Fail(model.ReasonAuth, msg, nil)
		case "ValidationException", "ResourceNotFoundException", "ConflictException", "SerializationException":
			return model.Fail(model.ReasonBadRequest, msg, nil)
		}
		return byStatus(status, msg)
	}
	// A *net.OpError says what failed and where (e.g. "dial tcp 127.0.0.1:1:
	// connect: connection refused") without a URL or a body: safe to keep.
	var cause error
	var op *net.OpError
	if errors.As(err, &op) {
		cause = op
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return model.Fail(model.ReasonTimeout, what+": network timeout", cause)
	}
	return model.Fail(model.ReasonNetwork, what+": request failed", cause)
}

func byStatus(status int, msg string) *molt.Error {
	switch {
	case status == http.StatusTooManyRequests:
		return model.Fail(model.ReasonRateLimited, msg, nil)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return model.Fail(model.ReasonAuth, msg, nil)
	case status >= 400 && status < 500:
		return model.Fail(model.ReasonBadRequest, msg, nil)
	default:
		return model.Fail(model.ReasonServerError, msg, nil)
	}
}
