// Package work is the claim protocol every kind of background work shares:
// evolution runs and applies, chat turns, naming jobs and A2A tasks.
//
// A work item has a status, an attempt counter, a claim token and a heartbeat.
// Claiming takes a pending item to running, conditional on the status and attempts
// the claimer saw and on a free slot of its kind's concurrency budget; the slot
// counter and, when the item names one, a lock are updated in the same transaction,
// so budgets and locks hold however many claimers, ticks and duplicate messages run
// at once. Every later write of the claimer (heartbeat, checkpoint, finish) is
// conditional on the claim still being its own; when that condition fails the
// writer gets ELOSTCLAIM and must stop. A stale claim (heartbeat older than its
// kind's timeout) is returned to pending by the tick while the retry budget lasts
// and made terminal after.
//
// The protocol is written once, here (Protocol), on a Backend that commits a list
// of conditional operations atomically. Each store adapter (internal/sqlite,
// internal/dynamo) implements Backend; the conformance suite in internal/storetest
// proves they agree.
//
// Every write carries a fresh operation id stored on the item. When a write's
// outcome is unknown (the request failed in transit, or was applied but its response
// was lost), the protocol reads the item back and compares the operation id, so no
// claim is counted twice, no lock is left held by nobody, and no claim is reported
// lost when it was in fact taken.
package work
