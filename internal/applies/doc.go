// Package applies runs evolution applies (their states: docs/architecture.md,
// "State machines"): the worker that merges
// approved runs' patches, re-tests them, snapshots what it will overwrite and
// publishes; rollback; the one notice an auto apply sends to its session; and
// the retention of runs' and applies' artifacts.
//
// # Items
//
// An apply is a work.KindApply item created pending by internal/runs (a
// reviewer's approve or the auto-apply gates, in the same write as the run's
// approved status) with LockKey "apply/<ws>" and Data {workspace, runs,
// approved_by}; this package adds the rest of Data (see Data). Its statuses and
// who moves it are documented on the Status constants.
//
// # The worker (Service.Handle)
//
// A wake-up names an apply. A pending one is claimed with Protocol.ClaimSeen:
// one slot of max_concurrent_apply and the workspace's apply lock in the same
// conditional write, so at most one apply (or rollback) per workspace is ever
// running or syncing. When the lock or the budget is taken the wake-up is
// dropped: whoever holds the lock or slot wakes the oldest pending applies when
// it ends, and the tick re-sends wake-ups of pending applies. The claim
// heartbeats every heartbeat_seconds; a lost claim cancels the model calls and
// nothing more is written. Then, with artifacts keyed by the claim's attempt
// (applies/<id>/attempt-<n>/: merge.json, regress/<run>/dryrun.json and
// score.json — never an earlier attempt's):
//
//  1. merge: each run's current patch (runs/<run>/attempt-<n>/patch.json, n the
//     attempt of its result) over the workspace's current files, in run order.
//     A path written by one patch, or by several with equal content, is taken
//     as is. A path two patches write differently, or one patch writes while the
//     live content moved since its run drafted it (its snapshot surface differs),
//     overlaps: the __apply_agent__ merges it. A run's version of a moved path is
//     first re-applied onto the live content (a line-wise three-way union with
//     the run's base), so neither the agent nor the offline model's union merge
//     drops edits made since. Deletions are never applied: publish never deletes
//     (they are reported in skipped_deletes).
//  2. regress: for each run, its test scenario is answered by its agent on the
//     merged sandbox (built-in, global and workspace files; no tools) and scored
//     by __score__ in regress mode; lint < 50, behavior < 50 or an unreadable
//     score fails the apply.
//     The regression's sandbox, like what preflight publishes, also holds the
//     copies that keep a workspace folder the merge creates (agents/<id>/,
//     skills/<id>/, prompts/<kind>/) from hiding the other files of the global
//     or built-in folder it replaces (evolution.FolderCopies): byte-equal
//     copies, in the manifest as new and unchanged, removed by a rollback.
//  3. preflight: the merged files are diffed against the live workspace files;
//     limits are checked; a heartbeat re-confirms the claim; then the rollback
//     snapshot is written from scratch (this claim never reached syncing, so the
//     workspace is still pre-apply): before/<rel> for each overwritten file,
//     after/<rel> for each file to publish, MANIFEST.json last.
//  4. auto re-check (auto applies): the files about to be published are
//     classified against the live surface with the level read again; blocked →
//     failed with auto_recheck:<reason>.
//  5. checkpoint: running → syncing (Transition Keep: slot, lock and token
//     kept), recording the manifest's sha256 in Data.Snapshot.
//  6. publish: each file written to the workspace (idempotent; never deletes).
//  7. finalize, one write: the apply applied, its still-approved runs applied,
//     for an auto apply its pending notice created, slot and lock released.
//
// Before the checkpoint a failure fails the apply (an auto apply's runs back to
// awaiting_review in the same write; a reviewer apply's runs stay approved), and
// an unavailable model gives the claim back (pending) while attempts last. A
// claim that dies is requeued by the tick and everything runs again from the
// merge. After the checkpoint nothing goes back: a syncing apply whose worker
// died is taken over in place by the next wake-up the tick sends
// (Protocol.Takeover keeps the lock) and resumed at publish, with no model
// call, from the snapshot its checkpoint recorded (the manifest must hash as
// recorded; every staged file as its manifest entry); files already published
// are not written again. A resume or publish that fails releases the syncing
// apply: its failure goes to Reason and failure_reason and its heartbeat is
// cleared, so the next tick resumes it; with the attempts spent the tick fails
// it with its last reason (Policy.Expiry), an auto apply's runs back to review
// (Policy.OnExpire). A stale running apply with its attempts spent ends timeout.
//
// # Rollback (Service.Rollback)
//
// Rollback runs under the workspace's apply lock, so it cannot interleave with
// an apply of the workspace. It takes the lock by creating its own work item
// (kind apply_rollback) already claimed: in one write the item (running,
// attempt 1, a token, a fresh heartbeat), a slot of its kind, the lock and a
// touch of the apply (still applied and unchanged; its op id renewed). Deleting
// the apply's run is refused while the rollback holds the lock, and the touch
// makes a delete that read the apply before the claim fail too. While the
// rollback holds the lock, an apply's claim fails "locked" and waits for the
// wake-up the rollback sends when it ends. The rollback heartbeats before its writes and
// ends in the same transaction that makes the apply and its applied runs
// rolled_back, releasing the lock. A plain AcquireLock/ReleaseLock pair was not
// used: a process dying between the two would hold the lock forever, since
// nothing could tell a live holder from a dead one. A claim can: when a rollback
// dies, its item's heartbeat goes stale after Config.RollbackTimeout and the
// tick (RollbackPolicy) ends it failed, releasing the lock in the same write.
// Files it restored stay restored; rolling back again completes the job (those
// files now read as reverted).
//
// The checks come first and write nothing to the surface: not_applied,
// apply_in_flight (an apply of the workspace pending, running or syncing, or
// another holder of the lock), no_snapshot (manifest missing, not the one the
// checkpoint recorded, a path outside the surface, a backup missing), conflict
// (modified, missing or unverified files, without force), backup_mismatch (a
// backup that does not hash to its before, even with force). Then what will be
// overwritten or removed is saved under rollback-pre/, overwritten files are
// restored, new files removed, each created folder reported removed when no
// workspace file is left in it (in this store a folder is its files) or kept
// otherwise (it still overrides the global folder of that name), ROLLBACK.json
// written, and the final transaction committed.
//
// # Notices (Service.Notify, each tick)
//
// The finalize of an auto apply creates a pending apply_notice item (id = the
// apply's) in its own write. Each tick lists pending notices (oldest first) and,
// per notice, commits in one write: the notice deleted (conditional on it being
// unchanged), the apply's notified_at stamped (conditional on the apply being
// unchanged since read) and one system line appended to the source session
// (conditional on its next sequence number). Two ticks at once: one wins, the
// other's write fails and writes nothing. A tick that dies leaves the notice for
// the next; a restart re-reads the store: never twice, never missed. A session
// that is gone gets no line, the apply is stamped all the same. The outbox item
// keeps the tick from scanning every applied apply for a missing stamp.
//
// # Retention (Service.Retain, each tick, at most hourly per process)
//
// A run, apply or rollback item terminal for 14 days (by its last update) has
// its artifacts zipped into archive/<kind>-<id>.zip (runs: everything under
// runs/<id>/; applies: the attempt folders — the rollback snapshot, rollback-pre/
// and ROLLBACK.json stay while the apply exists), then archived_at set in its
// Data and on the item (work.Item.ArchivedAt) with work.Set.ExpiresAt (DynamoDB's
// TTL attribute) at the purge time plus Config.ExpiryGrace, then the originals
// deleted. 30 days after archived_at the
// tick deletes the zip, whatever else the item has in the blob store and the
// item (each write conditional on the item being unchanged since read). Active
// items are never touched; an archived run is not retryable. On AWS the TTL and
// an S3 lifecycle rule expiring archive/ are backstops that delete what the
// tick's purge missed (TTL cannot delete an apply's rollback snapshot in S3, so
// the tick's purge stays the primary path on both backends). A pass lists only
// what is due, per terminal status: the items not archived and updated before
// the archive age, and the items archived before the purge age (index ranges
// on both stores), so its cost does not grow with the history kept.
package applies
