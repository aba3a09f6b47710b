// Package chat is molt's agent runtime: sessions, turns on a queue, prompt
// assembly, the tool loop and compaction. It has no HTTP in it; the UI API
// (internal/httpapi), A2A and evolution's dry-runs reuse it.
//
// # Turns
//
// Posting a message (Service.Post) appends it to the session and creates its turn
// (a work item of kind work.KindTurn, locked by "turn/<session id>") in one
// conditional write, then sends the turn's wake-up. The worker (Service.Handle)
// claims the turn under the shared claim protocol, assembles the agent's system
// prompt from the effective prompt surface (Assemble), compacts the transcript
// when it is over budget, runs the model with a bounded tool loop (Loop), and
// commits the reply in the write that makes the turn done. The message log is
// append-only and every reply is written by the turn that owns the claim, in the
// same write that ends it: a turn never replies twice, whatever the queue
// delivers and whoever crashes.
//
// Turns of one session run one at a time, in the order their messages were
// posted: a user message carries the id of the turn that answers it (TurnID), a
// turn waits while the turn of the previous user message is pending or running,
// and a turn that ends wakes the next one. A reply may land after a message posted
// while it was being written; Transcript puts each turn's messages back after the
// message they answer.
//
// # Chat commands
//
// A posted text whose first word is a registered command (HandleCommand) runs it
// instead of going to the model; "/compact" is built in (a compact-only turn).
// "/evo" belongs to the evolution issue, which registers it here.
//
// # Compaction
//
// When the estimated tokens of the system prompt and the visible transcript pass
// Config.CompactTokens, or on /compact, the turn summarises the older messages with
// the model (SummaryRequest, whose system prompt starts with model.SummarizeMarker)
// and keeps a tail of at least Config.KeepTail messages (CutPoint). The summary
// (session.SetSummary) is committed in the turn's final write, and the turn's data
// records compacted: true, once per compacting turn. A hook registered with
// HandleCompacted adds its ops and one system line to that same write for root
// sessions (the evolution pre-compact trigger: one run per compacting turn).
package chat
