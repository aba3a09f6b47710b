// Package offline is molt's deterministic development model: no network, no
// credentials, and replies that say plainly they come from no real model. `molt
// serve` uses it when MOLT_MODEL is unset or "offline".
//
// Every answer is a pure function of the request: the same Request always gives
// the same Response. Generate looks at the request in this order and the first rule
// that applies answers:
//
//  1. Handlers passed to New, in order. A handler that returns ok=false passes
//     the request on. Package evolution/offlineevo provides the handlers that
//     answer the built-in evolution agents (draft, score, merge), recognised by
//     the marker line that starts their system prompt; internal/app/modelenv installs them.
//     Their rules are documented there (and in its README.md).
//
//  2. Summarisation. When the system prompt starts with model.SummarizeMarker
//     ("molt:summarize"), the reply is
//
//     [offline model] Summary of N messages (U user, A assistant, T tool).
//     - user: <first line of the message, at most 80 characters>
//     - assistant: …
//
//     listing at most the last 8 messages that have text (older ones are counted,
//     not listed).
//
//  3. Naming. When the system prompt starts with model.NameMarker
//     ("molt:name-session"), the reply is a title, labelled:
//
//     Offline: <the first six words of the first user message, at most 60 characters>
//
//     ("Offline: untitled conversation" without a user message).
//
//  4. Tool results. When the last message carries tool results (role "tool"), the
//     reply summarises them, one line each, naming the tool from the assistant
//     message that called it:
//
//     [offline model] Tool results:
//     - <tool name> (<call id>): <first line of the content, at most 200 characters>
//     - <tool name> (<call id>) failed: <…>
//
//     No tool is called after a tool result, so a runtime's tool loop always ends.
//
//  5. Tool trigger. When the request offers tools and the last message is a user
//     message with one or more lines of the form
//
//     /tool <name> <json object>
//
//     (the JSON is optional and defaults to {}), the reply calls those tools, in
//     order, with StopReason "tool_use" and the text
//     "[offline model] Calling tool <name>." per call. Call ids are "offline-" plus
//     16 hex digits of a SHA-256 over the position in the conversation, the line's
//     index, the name and the input. A trigger naming a tool that is not offered,
//     or with input that is not a JSON object, is answered with a labelled text
//     saying so and calls nothing.
//
//  6. Echo, for everything else:
//
//     [offline model] This is a deterministic offline reply, not a real model.
//     Messages: N. System prompt: "<first line, at most 80 characters>".
//     Last user message: "<first 200 characters, lines joined with spaces>".
//
// Usage is estimated with model.EstimateTokens (one token per four bytes): input
// over the system prompt, the tools and every message; output over the reply text
// and tool inputs. When Request.MaxTokens is set and a text reply is longer than
// MaxTokens·4 bytes, it is cut there (on a character boundary) and StopReason is
// "max_tokens". Response.Model is "offline". A cancelled ctx returns the
// ReasonCanceled error; nothing else fails.
package offline
