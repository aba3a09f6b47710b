// Package model is the port between molt's agent runtime and language models:
// messages, a system prompt, tools, a token bound and a per-call timeout in;
// text, tool calls, a stop reason and token usage out.
//
// Providers live in subpackages, one per dependency:
//
//   - offline: a deterministic, clearly labelled development provider (no network).
//   - openai: any OpenAI-compatible chat completions endpoint, over net/http.
//   - bedrock: Amazon Bedrock's Converse API through aws-sdk-go-v2.
//
// The composition root picks one from the environment (MOLT_MODEL: package
// internal/app/modelenv). This package imports no provider SDK, and nothing of
// the features that use it (evolution, chat).
package model
