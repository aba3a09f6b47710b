// Package sqlite is the embedded store adapter: it implements store.Store (the
// work backend, workspaces and files, tokens, settings) on one SQLite file through
// the pure-Go driver modernc.org/sqlite, so `molt serve` and the unit tests need no
// cgo and no server.
//
// # Concurrency
//
// The file is opened in WAL mode with a busy timeout, and synchronous=FULL unless
// Options.Sync is SyncNormal (MOLT_SQLITE_SYNC=normal): an acknowledged write
// survives a power loss. Writes go through one connection per Store, so writers
// of one process queue in Go rather than inside SQLite.
//
// The writes queued when the connection frees up (up to 64; a lone write does not
// wait for company) are committed together, in one BEGIN IMMEDIATE transaction
// and so one fsync: group commit. Each write runs inside its own SAVEPOINT, in
// the order queued, and sees the writes before it; a write that fails (a
// condition, a constraint) is rolled back to its savepoint and gets its own
// error, the others are released. When the final COMMIT fails, every write of
// the group gets an error whose outcome is unknown. A write's statements run
// without its context's cancellation (an interrupted statement would roll back
// the whole group); a write whose context ends while it is still queued is
// dropped with EUNAVAILABLE.
//
// BEGIN IMMEDIATE takes the write lock up front, so a transaction never has to
// upgrade a read lock and fail with SQLITE_BUSY half-way. When another process
// (e.g. `molt token create` while `molt serve` runs) holds the lock longer than
// the busy timeout, the group is retried from scratch, for at most a minute.
// Reads use a separate pool of connections and never wait for writers (WAL
// readers see the last commit).
//
// # Conditions
//
// Commit applies work.Ops in order inside one transaction; every condition is part
// of the SQL statement that writes (UPDATE … WHERE, INSERT … ON CONFLICT DO
// NOTHING), and a statement that changed no row is the op's failed condition: the
// transaction is rolled back and *work.ConditionFailed names the op.
//
// # Sessions
//
// Sessions live in the sessions table, their logs in messages keyed by
// (session_id, seq). The session ops of Commit are conditional UPDATEs of the
// session row like the work ops: AppendMessage advances next_seq where it equals
// the message's seq and then inserts the message; SetSummary writes where
// summary_seq equals IfSummarySeq. DeleteSession and DeleteWorkspace remove
// sessions and their messages in the same transaction, so an append either
// commits before a delete (and goes with it) or fails its condition after it.
//
// # Faults
//
// Every write passes through the internal writer interface. When Options.Faults is
// set, a wrapper consults the injector once per write (not per group), and once
// for all the commits of one CommitEach (one round trip): faults.Before fails it
// without touching the file, faults.After commits it and then reports an error, as
// if the response was lost. Both errors wrap faults.ErrInjected and never look like
// a condition failure.
package sqlite
