// Package dynamo is the DynamoDB adapter of store.Store: all of molt's state in
// one table, every state change a conditional write (or one TransactWriteItems of
// them), every read of one item strongly consistent.
//
// # Table
//
// The schema is fixed (CreateTable and template.yaml declare the same): billing
// PAY_PER_REQUEST; key pk (S, HASH) + sk (S, RANGE); GSI gsi1 on (gsi1pk, gsi1sk),
// GSI gsi2 on (gsi2pk, gsi2sk), GSI gsi3 on (gsi3pk, gsi3sk: a work item's
// updated_at in 20-digit nanoseconds, "#", its id; the change feed) and GSI gsi4
// on (gsi2pk, gsi4sk: a status partition by age, for retention), all strings
// with projection ALL; TTL on
// expires_at (epoch seconds: work.Item.ExpiresAt, set by retention through
// work.Set.ExpiresAt); point-in-time recovery in the template.
//
// # Items
//
//	entity          pk                      sk             gsi1pk / gsi1sk          gsi2pk / gsi2sk
//	work item       WORK#<kind>#<id>        WORK           WORK#<kind> / <id>       WORK#<kind>#<status> / <id>
//	                (gsi4: WORK#<kind>#<status> / u#<updated_at>#<id>, or a#<archived_at>#<id> once archived)
//	slot counter    SLOTS#<kind>            SLOTS          –                        –
//	                (shard k > 0 of a sharded counter, work.SlotShards: SLOTS#<kind>#<k>)
//	lock            LOCK#<key>              LOCK           –                        –
//	workspace       WS#<name>               META           WORKSPACES / <sort id>   –
//	file            WS#<name>               FILE#<path>    –                        –
//	file counter    WS#<name>               FILES          –                        –
//	token           TOKEN#<sha256 hex>      TOKEN          TOKENS / <id>            –
//	settings        SETTINGS                SETTINGS       –                        –
//	session         SESSION#<id>            META           SESSIONS#<ws> / <id>     –
//	message         SESSION#<id>            MSG#<seq>      –                        –
//
// A message's seq is zero-padded to 10 digits in its sort key, so key order is seq
// order and ListMessages is one strongly consistent Query of the session's
// partition with sk BETWEEN MSG#<after+1> AND MSG#9999999999.
// Attributes: a work item keeps kind, id, ws, lock_key, status, active (BOOL),
// noslot (BOOL, present while its claim holds no slot: work.Item.Slot is active
// and not noslot, so an item claimed before the attribute holds a slot), slot_shard
// (N, the counter shard of its slot, absent for shard 0), attempts, attempts_base, token, heartbeat_at, reason, data (B), created_at,
// updated_at, op_id, expires_at (N, epoch seconds), archived_at, and gsi4a (the
// archived item's gsi4sk, which every later update copies back into gsi4sk with
// if_not_exists, so an archived item stays listed by its archive time; an item
// not archived gets gsi4sk from the update's updated_at); a slot or file counter keeps n
// (ADD); a lock keeps holder; a
// workspace keeps name, description, created_at, updated_at, and deleting (N)
// while DeleteWorkspace cleans its partition up (it then reads as absent and
// refuses writes and re-creation); a file keeps ws, path,
// content (B), sha256, size, updated_at; a token keeps id, level, ws, name,
// created_at, last_used_at and revoked_at (revocation keeps the item);
// settings keep doc (the JSON document) and updated_at; a session
// keeps id, ws, agent, title, title_source, title_rev, access, external (BOOL),
// parent, next_seq, summary_seq, summary, created_at, updated_at; a message keeps
// session_id, seq, role, text, tool_calls (B), tool_results (B), turn_id,
// created_at. Times are Unix
// nanoseconds (N): exact, numeric, comparable in conditions. Empty strings, zero
// times and empty binaries are not stored; they read back as zero values. The
// global surface's files live under WS#global, which has no META item.
//
// # Writes
//
// Commit maps each work.Op to one conditional write: CreateItem is a Put with
// attribute_not_exists(pk); UpdateItem is an Update with attribute_exists(pk) and
// one clause per non-zero field of Cond (status IN, attempts =, token =, active =,
// heartbeat_at < StaleBefore, op_id =), setting gsi2pk with the status; DeleteItem is a
// Delete with the same conditions; AdjustSlots is ADD n on its shard's item (only
// a claim under a budget sends one: a kind without a budget has no counter item
// to be hot)
// with n <= Max-Delta (or absent) when Delta > 0 and Max > 0, n >= -Delta when
// Delta < 0; AcquireLock is a Put with attribute_not_exists(pk) OR holder = :h;
// ReleaseLock is a Delete with holder = :h. One op is sent as a single
// PutItem/UpdateItem/DeleteItem, several as one TransactWriteItems (at most 100,
// each item at most once: work.CheckCommit refuses any other commit first, on
// every adapter). ConditionalCheckFailedException becomes
// work.ConditionFailed{Index: 0}; TransactionCanceledException becomes the index of
// the first ConditionalCheckFailed reason. A transaction cancelled only by
// conflicts or throttling was not applied and is retried here with backoff; any
// other error is returned as an unknown outcome.
//
// CommitEach packs independent commits that write disjoint records into one
// TransactWriteItems (at most 100 items, about 2 MB); when conditions cancel it,
// the commits whose items failed get their ConditionFailed and the others are sent
// again without them. Commits sharing a record (a budget's slot counter, a lock)
// go in successive transactions, so each keeps its own result.
//
// The SDK re-sends a request after a transient failure. If the first attempt was
// applied and its response lost, the second attempt's condition fails against the
// write itself, so a condition failure on a re-sent request is reported as an
// unknown outcome, not as a refusal; the claim protocol then reads the item back
// and compares op ids (ReturnValuesOnConditionCheckFailure is not used: the
// emulator does not support it, and the read-back works everywhere).
//
// # Sessions
//
// The session ops of Commit touch two kinds of item. All the AppendMessage and
// SetSummary ops of one session in a Commit become one Update of its META item
// (a transaction may write an item only once): attribute_exists(pk), next_seq =
// the first message's seq, summary_seq = the first summary's IfSummarySeq; it sets
// next_seq past the last message, summary and summary_seq to the last summary's,
// and updated_at. The messages must follow each other and each summary must start
// where the previous ended, as if applied one by one; an op that breaks the chain
// can never succeed and is reported as its condition failure without a request.
// Each message is a Put with attribute_not_exists(pk). An AppendMessage is
// therefore always two items and always a TransactWriteItems, even alone. When
// the META update's condition fails, a consistent read of the session tells which
// of its ops failed. A message item is at most about 200 KB (text and each tool
// field at most 64 KiB), under the 400 KB item limit; a transaction's 4 MB limit
// allows about 20 maximal messages, and at most 100 items in all.
//
// CreateSession is one transaction: a ConditionCheck that the workspace's META
// exists, the session Put with attribute_not_exists(pk), and for a sub-session a
// ConditionCheck that the parent exists in the same workspace. SetTitle is one
// UpdateItem conditional on the session existing with title_rev = ifRev.
// DeleteSession deletes META first (ENOTFOUND when absent), then the messages
// (Query, BatchWriteItem, unprocessed items re-sent): an append racing the delete
// either committed before it, and its message is found and deleted, or fails its
// condition on META. A deletion that stopped part way leaves messages without
// META; DeleteSession again, or CreateSession with that explicit id, removes them.
// DeleteWorkspace deletes the sessions gsi1 lists for it after its META and files
// (best effort: the index may lag a session created a moment before).
//
// # Reads
//
// GetItem, ActiveCount, LockHolder, GetWorkspace, GetFile, ListFiles, TokenByHash,
// GetSession and ListMessages read with ConsistentRead. ListItems, ListWorkspaces
// and ListSessions query a GSI, which DynamoDB keeps eventually consistent: a
// listing may lag a write briefly, and every write made from a listing is
// conditional. Retention's listings by age (work.ListQuery.UpdatedBy, ArchivedBy)
// are one key range of gsi4 (gsi4sk BETWEEN the phase's start, or just after the
// cursor, and the bound); the others sort by id (time ordered); the cursor is the last sort key
// of a page, and the next page's key condition starts strictly after it, so a
// cursor stays valid while items are added, change status or are deleted. A page
// asks for one item more than its limit and follows LastEvaluatedKey when a
// response stops at 1 MB, so Next is empty exactly on the last page.
//
// # Workspaces and files
//
// PutWorkspace is one UpdateItem (created_at and the listing id set only when
// absent; ALL_OLD tells whether it was created). PutFile is one transaction: a
// ConditionCheck that the workspace's META exists (not for the global surface),
// the file Put, and for a new file an ADD to the surface's file counter bounded by
// workspace.MaxFiles. DeleteFile deletes the file and decrements the counter in one
// transaction. DeleteWorkspace deletes META first (ENOTFOUND when absent), which
// makes every later PutFile to it fail, then the files and counter with
// BatchWriteItem, re-sending unprocessed items.
package dynamo
