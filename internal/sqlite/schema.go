package sqlite

import (
	"context"
	"fmt"
)

// migrations bring a file's schema up to date, in order; PRAGMA user_version
// counts those applied. Never edit an applied migration: append a new one.
var migrations = []string{
	// 1: the whole first schema.
	`
CREATE TABLE items (
	kind          TEXT    NOT NULL,
	id            TEXT    NOT NULL,
	workspace     TEXT    NOT NULL DEFAULT '',
	lock_key      TEXT    NOT NULL DEFAULT '',
	status        TEXT    NOT NULL,
	active        INTEGER NOT NULL DEFAULT 0,
	attempts      INTEGER NOT NULL DEFAULT 0,
	attempts_base INTEGER NOT NULL DEFAULT 0,
	token         TEXT    NOT NULL DEFAULT '',
	heartbeat_at  TEXT    NOT NULL DEFAULT '',
	reason        TEXT    NOT NULL DEFAULT '',
	data          BLOB,
	created_at    TEXT    NOT NULL DEFAULT '',
	updated_at    TEXT    NOT NULL DEFAULT '',
	op_id         TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (kind, id)
);
-- ListItems with a status filter; without one the primary key serves.
CREATE INDEX items_by_status ON items (kind, status, id);

-- Slot counters, one row per kind, created by the first AdjustSlots (kinds
-- without a budget have none: their claims take no slot).
CREATE TABLE slots (
	kind   TEXT PRIMARY KEY,
	active INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- A lock row exists while the lock is held.
CREATE TABLE locks (
	key    TEXT PRIMARY KEY,
	holder TEXT NOT NULL
) WITHOUT ROWID;

-- sort_key is an id from molt.IDs made at creation: ListWorkspaces sorts by it.
CREATE TABLE workspaces (
	name        TEXT PRIMARY KEY,
	sort_key    TEXT NOT NULL UNIQUE,
	description TEXT NOT NULL DEFAULT '',
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL
);

-- The global surface's files have workspace 'global', which has no workspaces row.
CREATE TABLE files (
	workspace  TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	content    BLOB    NOT NULL,
	sha256     TEXT    NOT NULL,
	size       INTEGER NOT NULL,
	updated_at TEXT    NOT NULL,
	PRIMARY KEY (workspace, path)
);

CREATE TABLE tokens (
	hash       TEXT PRIMARY KEY,
	id         TEXT NOT NULL,
	level      TEXT NOT NULL,
	workspace  TEXT NOT NULL DEFAULT '',
	name       TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL
) WITHOUT ROWID;

-- The settings document: one row.
CREATE TABLE settings (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	doc        TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
`,
	// 2: chat sessions and their append-only message logs.
	`
CREATE TABLE sessions (
	id           TEXT    PRIMARY KEY,
	workspace    TEXT    NOT NULL,
	agent        TEXT    NOT NULL,
	title        TEXT    NOT NULL DEFAULT '',
	title_source TEXT    NOT NULL DEFAULT '',
	title_rev    INTEGER NOT NULL DEFAULT 0,
	access       TEXT    NOT NULL,
	external     INTEGER NOT NULL DEFAULT 0,
	parent       TEXT    NOT NULL DEFAULT '',
	next_seq     INTEGER NOT NULL DEFAULT 1,
	summary_seq  INTEGER NOT NULL DEFAULT 0,
	summary      TEXT    NOT NULL DEFAULT '',
	created_at   TEXT    NOT NULL,
	updated_at   TEXT    NOT NULL
);
-- ListSessions: one workspace, newest (highest id) first.
CREATE INDEX sessions_by_workspace ON sessions (workspace, id);

-- Written only by the AppendMessage op, after the session's next_seq check.
CREATE TABLE messages (
	session_id   TEXT    NOT NULL,
	seq          INTEGER NOT NULL,
	role         TEXT    NOT NULL,
	text         TEXT    NOT NULL DEFAULT '',
	tool_calls   BLOB,
	tool_results BLOB,
	turn_id      TEXT    NOT NULL DEFAULT '',
	created_at   TEXT    NOT NULL,
	PRIMARY KEY (session_id, seq)
);
`,
	// 3: retention's expiry of work items (DynamoDB's TTL attribute elsewhere).
	`
ALTER TABLE items ADD COLUMN expires_at TEXT NOT NULL DEFAULT '';
`,
	// 4: the settings' revision, for writes conditional on it (0: saved before it).
	`
ALTER TABLE settings ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
`,
	// 5: the seq the newest naming job of a session was asked for.
	`
ALTER TABLE sessions ADD COLUMN naming_seq INTEGER NOT NULL DEFAULT 0;
`,
	// 6: token use and revocation; revoke and list find tokens by id.
	`
ALTER TABLE tokens ADD COLUMN last_used_at TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN revoked_at TEXT NOT NULL DEFAULT '';
CREATE INDEX tokens_by_id ON tokens (id);
`,
	// 7: the change feed (ItemsChangedAfter) reads a kind's items by update time.
	`
CREATE INDEX items_by_updated ON items (kind, updated_at, id);
`,
	// 8: retention's archive time, and the two indexes its listings by age use
	// (ListItems with UpdatedBy or ArchivedBy), so a pass reads only what is due.
	`
ALTER TABLE items ADD COLUMN archived_at TEXT NOT NULL DEFAULT '';
-- Items archived before the column: the archive time their data holds, to the
-- second (never after the true one: retention compares its data's own time).
UPDATE items SET archived_at = COALESCE(strftime('%Y-%m-%dT%H:%M:%S.000000000Z',
		CASE WHEN json_valid(CAST(data AS TEXT)) THEN json_extract(CAST(data AS TEXT), '$.archived_at') END), '')
	WHERE data IS NOT NULL AND instr(CAST(data AS TEXT), '"archived_at"') > 0;
CREATE INDEX items_unarchived_by_update ON items (kind, status, updated_at, id) WHERE archived_at = '';
CREATE INDEX items_archived ON items (kind, status, archived_at, id) WHERE archived_at != '';
`,
	// 9: a workspace's overrides of the settings and their revision (0: none saved).
	`
ALTER TABLE workspaces ADD COLUMN settings TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN settings_revision INTEGER NOT NULL DEFAULT 0;
`,
	// 10: whether a claimed item holds a slot of its kind's budget (work.Item.Slot):
	// before it every claim took one, so every claimed item holds one.
	`
ALTER TABLE items ADD COLUMN slot INTEGER NOT NULL DEFAULT 0;
UPDATE items SET slot = 1 WHERE active = 1;
`,
	// 11: sharded slot counters (work.SlotShards): a counter row per kind and
	// shard, the old row becoming shard 0, and the shard a claimed item's slot
	// is in (work.Item.SlotShard; 0, the old row, for the items before it).
	`
CREATE TABLE slot_shards (
	kind   TEXT NOT NULL,
	shard  INTEGER NOT NULL,
	active INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, shard)
) WITHOUT ROWID;
INSERT INTO slot_shards (kind, shard, active) SELECT kind, 0, active FROM slots;
DROP TABLE slots;
ALTER TABLE slot_shards RENAME TO slots;
ALTER TABLE items ADD COLUMN slot_shard INTEGER NOT NULL DEFAULT 0;
`,
}

// migrate applies the migrations the file lacks, in one transaction, so two
// processes opening a new file at once cannot both apply one.
func migrate(ctx context.Context, w writer) error {
	return w.write(ctx, func(q querier) error {
		var v int
		if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this program (%d)", v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := q.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
			}
		}
		if v < len(migrations) {
			if _, err := q.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
				return fmt.Errorf("set schema version: %w", err)
			}
		}
		return nil
	})
}
