// Package offlineevo makes molt's offline model answer the built-in evolution
// agents deterministically, so a whole evolution run — draft, dry-run, score,
// gates, and the apply's merge — works with no network and always gives the same
// result. internal/app/modelenv passes Handlers to offline.New whenever MOLT_MODEL is unset or
// "offline"; New does the same for tests and tools.
//
// # Which agent is asking
//
// Handle answers a request only when the first line of its system prompt is the
// marker of a built-in agent (evolution.Marker, e.g.
// "<!-- molt:internal-agent __evo_agent__ -->"): evolution.DraftPrompt,
// ScorePrompt and MergePrompt put the agent's AGENT.md, which starts with that
// line, in Request.System. It reads its input from the data blocks of the last
// user message (evolution.ParseDataBlocks). Every other request passes on to the
// offline model's built-in rules: a dry-run, being the source agent's ordinary
// chat request, gets the normal labelled echo reply.
//
// Every answer starts with offline.Label ("[offline model]") followed by one
// ```json block in the format the evolution parsers read.
//
// # __evo_agent__ (draft)
//
//   - With a hint (its whitespace collapsed to single spaces): a patch of one file,
//     INSTRUCTIONS.md, whose content is the surface's current INSTRUCTIONS.md (any
//     scope; empty when there is none) with the line "- <hint>" added to its
//     "## Rules" section (after the section's last non-blank line) — the heading
//     is appended when missing (AddRule). When the section already has that exact
//     line the content is unchanged, so the run demonstrates no_effective_change.
//     Test scenario: description "The answer follows the new rule: <hint>",
//     message ScenarioMessage ("Please introduce yourself in two sentences and tell
//     me what you can help me with."). Rationale: a labelled sentence naming the
//     hint. A "## Larger observation" section is added only when the hint contains
//     the word "observe" (any case, as a whole word).
//   - Without a hint: a skip with the reason SkipNoHint,
//     "no hint: offline model drafts only from a hint".
//
// # __score__
//
// Always Score: lint 100, behavior 85, scope 90, avg 88, confidence high, checks
// usedInDryRun, probe and probeLanguage true (patchInSandbox is the worker's). These
// pass the score gate at the default auto_apply_threshold of 80, so a prompt-only
// offline run auto-applies at L2; any threshold above 88 (e.g. 100) stops it with
// below_threshold.
//
// # __apply_agent__ (merge)
//
// For each path of the request, evolution.UnionMerge of the current content and
// every run's version in run order: lines any run inserted are kept, in run order,
// once each; a line any run removed is removed. Two runs that each added a rule to
// INSTRUCTIONS.md therefore merge into the union of their rule lines.
package offlineevo
