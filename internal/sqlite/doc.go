// Package sqlite is the embedded store adapter: it implements store.Store (the
// work backend, workspaces and files, tokens, settings) on one SQLite file through
// the pure-Go driver modernc.org/sqlite, so `molt serve` and the unit tests need no
// cgo and no server.
//
// # Concurrency
//
// The file is opened in WAL mode with a busy timeout, and synchronous=FULL unless
// Options.Sync is SyncNormal (MOLT_SQLITE_SYNC=normal): an acknowledged write
// survives a power loss. Writes go through one
// connection per Store, so writers of one process queue in Go rather than inside
// SQLite; each write is one BEGIN IMMEDIATE transaction, which takes the write lock
// up front, so a transaction never has to upgrade a read lock and fail with
// SQLITE_BUSY half-way. When another process (e.g. `molt token create` while
// `molt serve` runs) holds the lock longer than the busy timeout, the write is
// retried from scratch until its context ends. Reads use a separate pool of
// connections and never wait for writers (WAL readers see the last commit).
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
// set, a wrapper consults the injector once per write: faults.Before fails it
// without touching the file, faults.After commits it and then reports an error, as
// if the response was lost. Both errors wrap faults.ErrInjected and never look like
// a condition failure.
package sqlite
