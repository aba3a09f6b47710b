// Package openai is a model.Model for any OpenAI-compatible chat completions
// endpoint (OpenAI, Azure-style proxies, vLLM, Ollama, LiteLLM, …), written over
// net/http without an SDK.
//
// One Generate is one `POST {base}/chat/completions` with model, messages (the
// system prompt first; assistant tool calls as tool_calls; tool results as role
// "tool" messages with tool_call_id), tools (type "function") and max_tokens. The
// API key, when set, is sent as a Bearer token and never appears in errors or logs.
//
// Failures: 429, 5xx and connection errors are retried with exponential backoff and
// full jitter, at most three attempts in all, honouring Retry-After up to a cap;
// other 4xx are never retried. Request.Timeout (default two minutes) bounds the
// whole call, retries included. Response bodies above 4 MiB, bodies that are not
// JSON and answers without choices are ReasonMalformedResponse. Every error is a
// *molt.Error with one of model's Reason categories and never quotes the body.
package openai
