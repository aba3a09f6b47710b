// Package evolution holds the pure core of evolution runs: the
// formats the built-in internal agents answer in and their parsers, the
// human-readable patch.md, the change classifier, the auto-apply gates, the
// built-in agents themselves and the prompt builders that hand session content
// to them as delimited data.
//
// Nothing here touches a store, a queue, HTTP or AWS: the run worker (elsewhere)
// reads state, calls the model with the requests built here, parses the answers
// with ParsePatch, ParseScore and ParseMerge, classifies the sandbox with Classify
// and decides with Decide.
//
// # Formats
//
// The __evo_agent__ answers with one fenced ```json block and, optionally, a
// "## Larger observation" Markdown section (see ParsePatch):
//
//	{"skip_reason": "…"}                              // nothing worth changing, or
//	{"files": [{"path": "INSTRUCTIONS.md", "content": "<full new content>"}],
//	 "deletes": ["skills/old/SKILL.md"],              // optional; always manual
//	 "test_scenario": {"description": "…", "message": "…"},
//	 "rationale": "…"}
//
// The __score__ agent answers with one fenced ```json block (see ParseScore):
//
//	{"lint": 100, "behavior": 85, "scope": 90, "avg": 88, "confidence": "high",
//	 "checks": {"usedInDryRun": true, "probe": true, "probeLanguage": true},
//	 "notes": "…"}
//
// patchInSandbox is never read from the model: the worker computes it.
//
// The __apply_agent__ answers with one fenced ```json block (see ParseMerge):
//
//	{"files": [{"path": "INSTRUCTIONS.md", "content": "<merged content>"}]}
//
// # Recognising an internal agent
//
// The system prompt of every request built by DraftPrompt, ScorePrompt and
// MergePrompt is the agent's AGENT.md, whose first line is Marker(id), e.g.
//
//	<!-- molt:internal-agent __evo_agent__ -->
//
// AgentFromSystem reads it back; the offline model uses it to pick its
// deterministic answer (package offlineevo).
package evolution
