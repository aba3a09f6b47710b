package modelenv_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/molt-dev/molt/internal/app/modelenv"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func noAWS(t *testing.T) func(context.Context) (aws.Config, error) {
	return func(context.Context) (aws.Config, error) {
		t.Error("AWS config loaded for a provider that does not need it")
		return aws.Config{}, errors.New("unexpected")
	}
}

func TestChoices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{}, "offline"},
		{map[string]string{"MOLT_MODEL": " offline "}, "offline"},
		{map[string]string{"MOLT_MODEL": "openai:gpt-4o", "OPENAI_API_KEY": "sk-x"}, "openai:gpt-4o"},
		{map[string]string{"MOLT_MODEL": "openai:llama3", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "openai:llama3"},
	} {
		m, err := modelenv.FromEnv(context.Background(), env(tc.env), noAWS(t))
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if m.Name() != tc.name {
			t.Errorf("%v: Name = %q; want %q", tc.env, m.Name(), tc.name)
		}
	}
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	const key = "sk-SECRET-0d1e"
	for _, tc := range []struct {
		env   map[string]string
		field string
	}{
		{map[string]string{"MOLT_MODEL": "gpt-4o"}, "MOLT_MODEL"},
		{map[string]string{"MOLT_MODEL": "openai:"}, "MOLT_MODEL"},
		{map[string]string{"MOLT_MODEL": "bedrock"}, "MOLT_MODEL"},
		{map[string]string{"MOLT_MODEL": "anthropic:claude"}, "MOLT_MODEL"},
		{map[string]string{"MOLT_MODEL": "Offline"}, "MOLT_MODEL"},
		{map[string]string{"MOLT_MODEL": "openai:gpt-4o"}, "OPENAI_API_KEY"},
		{map[string]string{"MOLT_MODEL": "openai:gpt-4o", "OPENAI_BASE_URL": "localhost:8000", "OPENAI_API_KEY": key}, "OPENAI_BASE_URL"},
	} {
		_, err := modelenv.FromEnv(context.Background(), env(tc.env), noAWS(t))
		var me *molt.Error
		if !errors.As(err, &me) || me.Code != molt.EINVALID || me.Field != tc.field {
			t.Errorf("%v: err = %#v; want EINVALID on %s", tc.env, err, tc.field)
			continue
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("%v: error %q contains the API key", tc.env, err)
		}
	}
}

func TestBedrockAWSConfigError(t *testing.T) {
	t.Parallel()
	boom := errors.New("no credentials")
	_, err := modelenv.FromEnv(context.Background(), env(map[string]string{"MOLT_MODEL": "bedrock:amazon.nova-lite-v1:0"}),
		func(context.Context) (aws.Config, error) { return aws.Config{}, boom })
	if !errors.Is(err, boom) {
		t.Errorf("err = %v; want the config error wrapped", err)
	}
}

// The chosen providers are wired to what the environment names: each answers from
// a local server speaking its wire format.
func TestWiredProvidersAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/chat/completions":
			if r.Header.Get("Authorization") != "" {
				t.Errorf("Authorization sent without a key")
			}
			_, _ = io.WriteString(w, `{"model":"llama3","choices":[{"index":0,"message":{"role":"assistant","content":"hi from openai"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
		case "/model/amazon.nova-lite-v1:0/converse":
			_, _ = io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"hi from bedrock"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}`)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	awsCfg := func(context.Context) (aws.Config, error) {
		return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, nil
	}
	for spec, want := range map[string]string{"openai:llama3": "hi from openai", "bedrock:amazon.nova-lite-v1:0": "hi from bedrock"} {
		m, err := modelenv.FromEnv(context.Background(), env(map[string]string{"MOLT_MODEL": spec, "OPENAI_BASE_URL": srv.URL + "/v1"}), awsCfg)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		if err != nil || resp.Text != want {
			t.Errorf("%s: got %q, %v; want %q", spec, resp.Text, err, want)
		}
	}
}
