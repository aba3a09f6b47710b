// Package runs is the evolution run pipeline: enqueue (/evo and
// the pre-compact trigger), the run worker (draft, dry-run, score, the auto-apply
// gates), and the reviewer's operations (list, detail, approve, reject, retry,
// delete). The pure parts — formats, parsers, the classifier, the gates, the
// built-in agents and their prompts — live in internal/evolution; this package
// reads and writes state.
//
// # The run record
//
// A run is a work item of kind work.KindRun moved through the statuses of
// status.go under the shared claim protocol (internal/work). Its Data (JSON,
// within work.MaxData) holds what it was enqueued from (workspace, source
// session, agent, trigger, hint, source_access), the snapshot summary, the
// latest attempt's results (patch summary, skip reason, score, verdict,
// observation), who approved its latest apply, and a bounded log. The API's
// attempts is Item.Used() = attempts - attempts_base.
//
// # Artifacts
//
// Blobs under runs/<id>/ (SnapshotKey, AttemptKey):
//
//	snapshot/messages.json  the session's messages at enqueue (frozen)
//	snapshot/toolflow.md    Markdown view of the tool flow, tool results left out
//	snapshot/meta.json      id, trigger, source session, hint, workspace, created
//	snapshot/surface.json   the assembled system prompt, every file of the effective
//	                        surface, agent and skill listings with their scopes
//	attempt-<n>/patch.json  the draft (evolution.Patch, with contents)
//	attempt-<n>/patch.md    evolution.RenderPatchMD against the live surface
//	attempt-<n>/dryrun.json the patched agent's answer to the test message
//	attempt-<n>/score.json  the score (patchInSandbox computed here)
//	attempt-<n>/verdict.json the auto-apply verdict
//
// n is the claim's attempt number, which is never reset, so an attempt only ever
// reads the snapshot and what it wrote itself: a retry, or an attempt after a
// killed one, starts from the draft with fresh artifacts.
//
// # Enqueue
//
// /evo [hint] (Evo, registered on the chat runtime by Register) works in a root
// session opened with full access, posted with a full token; anything else is
// refused with EFORBIDDEN (403). At level L1 or above with triggers.pre_compact
// on, PreCompact (the chat runtime's compaction hook) queues one run per turn
// that compacted a root session, in that turn's own final write, with an id
// derived from the turn's (PreCompactID), so it exists exactly once. Both store
// the snapshot first, then create the run pending and append exactly one system
// line (QueuedNotice) to the session in one write, then send the run's wake-up.
// Nothing else about a run ever enters a conversation.
//
// # The worker
//
// Handle claims a run on its wake-up (budget max_concurrent_run), heartbeats
// every heartbeat_seconds on its own claim, and re-confirms the claim before
// each group of artifacts it writes. Phases:
//
//  1. draft: __evo_agent__ (evolution.DraftPrompt, session content as delimited
//     data) answers a patch or a skip (→ skipped with the reason). The paths are
//     validated, the patch is applied to a sandbox copy of the workspace's
//     files (a workspace folder it creates gets copies of the other files of
//     the global or built-in folder it replaces, as the apply publishes them:
//     evolution.FolderCopies), patch.json and patch.md are stored.
//  2. dry-run: the source agent (chat.Assemble on the sandbox surface, a root
//     session, workspace access) answers the test message, with no tools: the
//     runtime's tools act on the live workspace, and egress tools are never
//     offered at workspace access.
//  3. score: __score__ (evolution.ScorePrompt); patchInSandbox is computed here.
//  4. gates: evolution.Classify against the live surface and evolution.Decide
//     with the level as it is now. A pass (L2/L3 only) flips the run to approved
//     and creates the pending apply (approved_by auto) in the one write that ends
//     the claim, then wakes the applies queue; otherwise the run awaits review
//     with the verdict.
//
// A malformed patch, a model refusal or a model still unavailable on the last
// attempt fails the run with a safe reason; a model unavailable with attempts
// left gives the attempt back (pending; the tick re-sends the wake-up a minute
// later); a lost claim stops the worker without another write.
//
// # Lambda time limit
//
// A run is not checkpointed: one attempt runs in one invocation. Every attempt
// is bounded by run_timeout_minutes (default 12) and by the handler's deadline
// minus Config.CommitMargin, whichever comes first; the run-worker function's
// timeout is 15 minutes, above the default run timeout, so a default attempt
// ends inside one invocation. An attempt that reaches its bound, or whose
// process is stopping (SIGTERM, the end of `molt serve`), gives the run back
// (pending, woken again) while attempts are left, else ends it as timeout: a
// pending run always has attempts left.
// A worker killed outright (the invocation timed out, the process died) stops
// heartbeating: the tick returns the run to pending after run_timeout_minutes
// while attempts - attempts_base < max_attempts, else makes it timeout, and the
// next attempt starts from the draft with fresh artifacts.
//
// # Wake-ups
//
// Enqueue, retry and a give-back wake the run; an approval wakes its apply; a
// run that ends wakes the oldest pending run (a slot is free). Pickup never waits
// for the tick, which re-sends lost wake-ups (Policy).
package runs
