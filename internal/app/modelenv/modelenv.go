// Package modelenv chooses molt's model provider from the environment. It is the
// one place that knows every provider and the offline model's evolution answers,
// so internal/model stays free of the AWS SDK and of evolution. Only the
// composition root (internal/localbackend, internal/awsbackend) imports it;
// internal/app itself does not, so it links no provider SDK.
package modelenv

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/molt-dev/molt/internal/evolution/offlineevo"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/bedrock"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/model/openai"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/supervisor/offlinesup"
)

// The environment variables FromEnv reads.
const (
	EnvModel         = "MOLT_MODEL"      // offline | openai:<model> | bedrock:<model-id>
	EnvOpenAIBaseURL = "OPENAI_BASE_URL" // default openai.DefaultBaseURL
	EnvOpenAIKey     = "OPENAI_API_KEY"  // Bearer token; required for the default base URL
)

// FromEnv returns the model MOLT_MODEL names:
//
//   - "" or "offline": the offline development provider, with the deterministic
//     answers of the evolution agents (package evolution/offlineevo) and of the
//     supervisor's (package supervisor/offlinesup);
//   - "openai:<model>": an OpenAI-compatible endpoint at OPENAI_BASE_URL (default
//     https://api.openai.com/v1) with OPENAI_API_KEY, which may be empty only for
//     another base URL (local servers often need none);
//   - "bedrock:<model-id>": Bedrock Converse with the AWS configuration awsCfg
//     loads (internal/awsenv.Load in production), called only for this choice.
//
// Anything else, or a missing model id or key, is EINVALID naming the variable.
// The API key is never part of an error.
func FromEnv(ctx context.Context, getenv func(string) string, awsCfg func(context.Context) (aws.Config, error)) (model.Model, error) {
	spec := strings.TrimSpace(getenv(EnvModel))
	provider, id, _ := strings.Cut(spec, ":")
	id = strings.TrimSpace(id)
	switch {
	case spec == "" || spec == "offline":
		return offline.New(append(offlineevo.Handlers(), offlinesup.Handlers()...)...), nil
	case provider == "openai" && id != "":
		base := strings.TrimSpace(getenv(EnvOpenAIBaseURL))
		key := strings.TrimSpace(getenv(EnvOpenAIKey))
		if key == "" && (base == "" || strings.TrimRight(base, "/") == openai.DefaultBaseURL) {
			return nil, molt.Invalid(EnvOpenAIKey, "%s is required for %s", EnvOpenAIKey, openai.DefaultBaseURL)
		}
		return openai.New(openai.Config{BaseURL: base, APIKey: key, Model: id})
	case provider == "bedrock" && id != "":
		cfg, err := awsCfg(ctx)
		if err != nil {
			return nil, fmt.Errorf("load aws config for bedrock: %w", err)
		}
		return bedrock.New(bedrock.NewClient(cfg), id)
	}
	return nil, molt.Invalid(EnvModel, "%s=%q: want offline, openai:<model> or bedrock:<model-id>", EnvModel, shorten(spec))
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Named returns a function that builds the model a setting names (naming.model)
// as FromEnv would build it from MOLT_MODEL=name, with every other variable as
// getenv has it; each name is built once and kept.
func Named(getenv func(string) string, awsCfg func(context.Context) (aws.Config, error)) func(name string) (model.Model, error) {
	var mu sync.Mutex
	built := map[string]model.Model{}
	return func(name string) (model.Model, error) {
		mu.Lock()
		defer mu.Unlock()
		if m, ok := built[name]; ok {
			return m, nil
		}
		env := func(k string) string {
			if k == EnvModel {
				return name
			}
			return getenv(k)
		}
		m, err := FromEnv(context.Background(), env, awsCfg)
		if err != nil {
			return nil, err
		}
		built[name] = m
		return m, nil
	}
}
