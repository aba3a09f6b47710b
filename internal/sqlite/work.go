package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// MaxOps bounds the ops of one Commit (work.MaxOps, DynamoDB's limit).
const MaxOps = work.MaxOps

// Commit applies ops atomically, in order, in one transaction (see work.Backend).
// It returns EINVALID or ETOOLARGE for malformed ops before writing anything
// (work.CheckCommit), a *work.ConditionFailed naming the first op whose
// condition failed (nothing is written), and any other error when the outcome
// is unknown.
func (s *Store) Commit(ctx context.Context, ops ...work.Op) error {
	if err := work.CheckCommit(ops); err != nil {
		return err
	}
	return commitErr(ops, s.w.writeEach(ctx, []unit{s.unit(ctx, ops)})[0])
}

// unit is the write of ops for the group writer.
func (s *Store) unit(ctx context.Context, ops []work.Op) unit {
	single := false
	if len(ops) == 1 {
		switch ops[0].(type) {
		case work.CreateItem, work.UpdateItem, work.DeleteItem, work.AcquireLock, work.ReleaseLock:
			single = true // one statement each (see applyOp)
		}
	}
	return unit{fn: s.applyAll(ctx, ops), single: single}
}

// CommitEach commits each of cs as Commit would, independently (see
// work.Backend): the valid ones are queued together on the write connection,
// so they share one transaction (and fsync), each in its own savepoint with its
// own result.
func (s *Store) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	errs := make([]error, len(cs))
	var at []int
	var fns []unit
	for i, ops := range cs {
		if err := work.CheckCommit(ops); err != nil {
			errs[i] = err
			continue
		}
		at = append(at, i)
		fns = append(fns, s.unit(ctx, ops))
	}
	if len(fns) == 0 {
		return errs
	}
	for j, err := range s.w.writeEach(ctx, fns) {
		errs[at[j]] = commitErr(cs[at[j]], err)
	}
	return errs
}

// applyAll returns the write of ops, in order; it fails with a
// *work.ConditionFailed at the first op whose condition fails.
func (s *Store) applyAll(ctx context.Context, ops []work.Op) func(q querier) error {
	return func(q querier) error {
		for i, op := range ops {
			ok, err := applyOp(ctx, q, op, s)
			if err != nil {
				return fmt.Errorf("op %d (%T): %w", i, op, err)
			}
			if !ok {
				return &work.ConditionFailed{Index: i}
			}
		}
		return nil
	}
}

func commitErr(ops []work.Op, err error) error {
	var cf *work.ConditionFailed
	if err != nil && !errors.As(err, &cf) {
		return fmt.Errorf("commit %d ops: %w", len(ops), err)
	}
	return err
}

// applyOp runs one op; ok is false when its condition failed.
func applyOp(ctx context.Context, q querier, op work.Op, s *Store) (ok bool, err error) {
	var res sql.Result
	switch op := op.(type) {
	case work.CreateItem:
		it := op.Item
		res, err = q.ExecContext(ctx, `INSERT INTO items (kind, id, workspace, lock_key, status, active,
			attempts, attempts_base, token, heartbeat_at, reason, data, created_at, updated_at, op_id, expires_at,
			archived_at, slot, slot_shard)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, id) DO NOTHING`,
			string(it.Kind), it.ID, it.Workspace, it.LockKey, string(it.Status), it.Active,
			it.Attempts, it.AttemptsBase, it.Token, ts(it.HeartbeatAt), it.Reason, it.Data,
			ts(it.CreatedAt), ts(it.UpdatedAt), it.OpID, ts(expiry(it.ExpiresAt)), ts(it.ArchivedAt), it.Slot, it.SlotShard)
	case work.UpdateItem:
		query, args := updateSQL(op, s)
		res, err = q.ExecContext(ctx, query, args...)
	case work.DeleteItem:
		where, args := condSQL(op.Kind, op.ID, op.If)
		res, err = q.ExecContext(ctx, "DELETE FROM items WHERE "+strings.Join(where, " AND "), args...)
	case work.AdjustSlots:
		if _, err = q.ExecContext(ctx, `INSERT INTO slots (kind, shard, active) VALUES (?, ?, 0)
			ON CONFLICT (kind, shard) DO NOTHING`, string(op.Kind), op.Shard); err != nil {
			return false, err
		}
		query, args := `UPDATE slots SET active = active + ?1 WHERE kind = ?2 AND shard = ?3`, []any{op.Delta, string(op.Kind), op.Shard}
		switch {
		case op.Delta > 0 && op.Max > 0:
			query, args = query+` AND active + ?1 <= ?4`, append(args, op.Max)
		case op.Delta < 0:
			query += ` AND active + ?1 >= 0`
		}
		res, err = q.ExecContext(ctx, query, args...)
	case work.AcquireLock:
		// An upsert whose DO UPDATE is filtered out changes no row: held by another.
		res, err = q.ExecContext(ctx, `INSERT INTO locks (key, holder) VALUES (?1, ?2)
			ON CONFLICT (key) DO UPDATE SET holder = excluded.holder WHERE locks.holder = excluded.holder`,
			op.Key, op.Holder)
	case work.ReleaseLock:
		res, err = q.ExecContext(ctx, `DELETE FROM locks WHERE key = ? AND holder = ?`, op.Key, op.Holder)
	case session.AppendMessage:
		return s.applyAppend(ctx, q, op)
	case session.SetSummary:
		return s.applySummary(ctx, q, op)
	case session.MarkExternal:
		res, err = q.ExecContext(ctx, `UPDATE sessions SET external = 1 WHERE id = ?`, op.SessionID)
	case session.RequestNaming:
		return s.applyRequestNaming(ctx, q, op)
	case session.SaveTitle:
		return s.applySaveTitle(ctx, q, op)
	default:
		return false, molt.Invalid("ops", "unknown op %T", op)
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// updateSQL builds the conditional UPDATE of an UpdateItem: Set's non-empty fields
// (and always op_id, updated_at) where the item exists and every non-zero field of
// If holds.
func updateSQL(op work.UpdateItem, s *Store) (string, []any) {
	set := op.Set
	updated := set.UpdatedAt
	if updated.IsZero() {
		updated = s.clock.Now()
	}
	cols := []string{"op_id = ?"}
	args := []any{set.OpID}
	if !set.KeepUpdatedAt {
		cols = append(cols, "updated_at = ?")
		args = append(args, ts(updated))
	}
	add := func(col string, v any) {
		cols = append(cols, col+" = ?")
		args = append(args, v)
	}
	if set.Status != "" {
		add("status", string(set.Status))
	}
	if set.Active != nil {
		add("active", *set.Active)
	}
	if set.Slot != nil {
		add("slot", *set.Slot)
	}
	if set.SlotShard != nil {
		add("slot_shard", *set.SlotShard)
	}
	if set.Attempts != nil {
		add("attempts", *set.Attempts)
	}
	if set.AttemptsBase != nil {
		add("attempts_base", *set.AttemptsBase)
	}
	if set.Token != nil {
		add("token", *set.Token)
	}
	if set.HeartbeatAt != nil {
		add("heartbeat_at", ts(*set.HeartbeatAt))
	}
	if set.Reason != nil {
		add("reason", *set.Reason)
	}
	if len(set.Data) > 0 {
		add("data", set.Data)
	}
	if set.ExpiresAt != nil {
		add("expires_at", ts(expiry(*set.ExpiresAt)))
	}
	if set.ArchivedAt != nil {
		add("archived_at", ts(*set.ArchivedAt))
	}

	where, wargs := condSQL(op.Kind, op.ID, op.If)
	args = append(args, wargs...)
	return "UPDATE items SET " + strings.Join(cols, ", ") + " WHERE " + strings.Join(where, " AND "), args
}

// condSQL is the WHERE clause of a conditional write of kind/id: the item exists
// and every non-zero field of c holds.
func condSQL(kind work.Kind, id string, c work.Cond) ([]string, []any) {
	where := []string{"kind = ?", "id = ?"}
	args := []any{string(kind), id}
	if len(c.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(c.Statuses)-1)+")")
		for _, st := range c.Statuses {
			args = append(args, string(st))
		}
	}
	if c.Attempts != nil {
		where = append(where, "attempts = ?")
		args = append(args, *c.Attempts)
	}
	if c.Token != "" {
		// A stored token is never equal to the empty string compared here.
		where = append(where, "token = ?")
		args = append(args, c.Token)
	}
	if c.Active != nil {
		where = append(where, "active = ?")
		args = append(args, *c.Active)
	}
	if !c.StaleBefore.IsZero() {
		// Fixed-width UTC text compares in time order; "" (never beaten) is before all.
		where = append(where, "heartbeat_at < ?")
		args = append(args, ts(c.StaleBefore))
	}
	if c.OpID != "" {
		where = append(where, "op_id = ?")
		args = append(args, c.OpID)
	}
	return where, args
}

const itemCols = `kind, id, workspace, lock_key, status, active, attempts, attempts_base,
	token, heartbeat_at, reason, data, created_at, updated_at, op_id, expires_at, archived_at, slot, slot_shard`

// expiry is an item's expiry as stored: whole seconds, like DynamoDB's TTL.
func expiry(t time.Time) time.Time { return t.Truncate(time.Second) }

type scanner interface{ Scan(dest ...any) error }

func scanItem(r scanner) (work.Item, error) {
	var (
		it                        work.Item
		kind, status              string
		heartbeat, created, updat string
		expires, archived         string
		data                      []byte
	)
	if err := r.Scan(&kind, &it.ID, &it.Workspace, &it.LockKey, &status, &it.Active, &it.Attempts,
		&it.AttemptsBase, &it.Token, &heartbeat, &it.Reason, &data, &created, &updat, &it.OpID, &expires,
		&archived, &it.Slot, &it.SlotShard); err != nil {
		return work.Item{}, err
	}
	it.Kind, it.Status = work.Kind(kind), work.Status(status)
	if len(data) > 0 {
		it.Data = data
	}
	var err error
	if it.HeartbeatAt, err = parseTS(heartbeat); err != nil {
		return work.Item{}, err
	}
	if it.CreatedAt, err = parseTS(created); err != nil {
		return work.Item{}, err
	}
	if it.UpdatedAt, err = parseTS(updat); err != nil {
		return work.Item{}, err
	}
	if it.ExpiresAt, err = parseTS(expires); err != nil {
		return work.Item{}, err
	}
	if it.ArchivedAt, err = parseTS(archived); err != nil {
		return work.Item{}, err
	}
	return it, nil
}

// GetItem reads one item; EINVALID for a malformed key, ENOTFOUND when absent.
// Reads see every committed write (there is one copy of the data).
func (s *Store) GetItem(ctx context.Context, kind work.Kind, id string) (work.Item, error) {
	if err := work.ValidateKey(kind, id); err != nil {
		return work.Item{}, err
	}
	row := s.getItem.QueryRowContext(ctx, string(kind), id)
	it, err := scanItem(row)
	if errors.Is(err, sql.ErrNoRows) {
		return work.Item{}, molt.NotFound("%s %s not found", kind, id)
	}
	if err != nil {
		return work.Item{}, fmt.Errorf("get %s %s: %w", kind, id, err)
	}
	return it, nil
}

var _ work.BatchReader = (*Store)(nil)

// GetItems reads the items kind/ids in one query (work.BatchReader):
// items[i] and errs[i] for ids[i], ENOTFOUND when absent, EINVALID for a
// malformed key.
func (s *Store) GetItems(ctx context.Context, kind work.Kind, ids []string) ([]work.Item, []error) {
	items, errs := make([]work.Item, len(ids)), make([]error, len(ids))
	var args []any
	at := map[string][]int{}
	for i, id := range ids {
		if err := work.ValidateKey(kind, id); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = molt.NotFound("%s %s not found", kind, id)
		if at[id] == nil {
			args = append(args, id)
		}
		at[id] = append(at[id], i)
	}
	if len(args) == 0 {
		return items, errs
	}
	fail := func(err error) ([]work.Item, []error) {
		for _, is := range at {
			for _, i := range is {
				errs[i] = fmt.Errorf("get %s %s: %w", kind, ids[i], err)
			}
		}
		return items, errs
	}
	st, err := s.getItemsStmt(len(args))
	if err != nil {
		return fail(err)
	}
	rows, err := st.QueryContext(ctx, append([]any{string(kind)}, args...)...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return fail(err)
		}
		for _, i := range at[it.ID] {
			items[i], errs[i] = it, nil
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return items, errs
}

// getItemsStmt returns GetItems' query for n ids, prepared once per n.
func (s *Store) getItemsStmt(n int) (*sql.Stmt, error) {
	if st, ok := s.getItems.Load(n); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.Prepare(`SELECT ` + itemCols + ` FROM items WHERE kind = ? AND id IN (?` + strings.Repeat(", ?", n-1) + `)`)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.getItems.LoadOrStore(n, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// ListItems lists items of one kind by id, newest first (or oldest first with
// q.Oldest), optionally of one status. The cursor is the last id of the previous
// page, so items inserted meanwhile (with greater ids) never shift a listing.
// With q.UpdatedBy or q.ArchivedBy it lists by age instead (see listByAge).
// EINVALID for a bad kind, status, cursor or limit.
func (s *Store) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	if err := q.Validate(); err != nil {
		return page.Page[work.Item]{}, err
	}
	limit, after, err := q.Page.Normalize()
	if err != nil {
		return page.Page[work.Item]{}, err
	}
	switch {
	case !q.UpdatedBy.IsZero():
		return s.listByAge(ctx, q, "updated_at", "archived_at = ''", q.UpdatedBy, limit, after)
	case !q.ArchivedBy.IsZero():
		return s.listByAge(ctx, q, "archived_at", "archived_at != ''", q.ArchivedBy, limit, after)
	}
	where := []string{"kind = ?"}
	args := []any{string(q.Kind)}
	if q.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(q.Status))
	}
	order, cmp := "DESC", "<"
	if q.Oldest {
		order, cmp = "ASC", ">"
	}
	if after != "" {
		where = append(where, "id "+cmp+" ?")
		args = append(args, after)
	}
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+itemCols+` FROM items WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id `+order+` LIMIT ?`, args...)
	if err != nil {
		return page.Page[work.Item]{}, fmt.Errorf("list %s items: %w", q.Kind, err)
	}
	defer rows.Close()
	out := page.Page[work.Item]{Items: []work.Item{}}
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return page.Page[work.Item]{}, fmt.Errorf("list %s items: %w", q.Kind, err)
		}
		out.Items = append(out.Items, it)
	}
	if err := rows.Err(); err != nil {
		return page.Page[work.Item]{}, fmt.Errorf("list %s items: %w", q.Kind, err)
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		out.Next = page.Cursor(out.Items[limit-1].ID)
	}
	return out, nil
}

// listByAge lists the items of q's kind and status that match part (archived
// or not) with col (updated_at or archived_at) at or before by, oldest first
// by (col, id): a range of one of the partial indexes items_unarchived_by_update
// and items_archived. The cursor is the last item's col and id.
func (s *Store) listByAge(ctx context.Context, q work.ListQuery, col, part string, by time.Time, limit int, after string) (page.Page[work.Item], error) {
	where := []string{"kind = ?", "status = ?", part, col + " <= ?"}
	args := []any{string(q.Kind), string(q.Status), ts(by)}
	if after != "" {
		at, id, ok := strings.Cut(after, "/")
		if _, err := parseTS(at); !ok || err != nil || id == "" {
			return page.Page[work.Item]{}, molt.Invalid("cursor", "malformed cursor")
		}
		where = append(where, "("+col+", id) > (?, ?)")
		args = append(args, at, id)
	}
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+itemCols+` FROM items WHERE `+strings.Join(where, " AND ")+
		` ORDER BY `+col+`, id LIMIT ?`, args...)
	if err != nil {
		return page.Page[work.Item]{}, fmt.Errorf("list %s items by %s: %w", q.Kind, col, err)
	}
	defer rows.Close()
	out := page.Page[work.Item]{Items: []work.Item{}}
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return page.Page[work.Item]{}, fmt.Errorf("list %s items by %s: %w", q.Kind, col, err)
		}
		out.Items = append(out.Items, it)
	}
	if err := rows.Err(); err != nil {
		return page.Page[work.Item]{}, fmt.Errorf("list %s items by %s: %w", q.Kind, col, err)
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		last := out.Items[limit-1]
		at := last.UpdatedAt
		if col == "archived_at" {
			at = last.ArchivedAt
		}
		out.Next = page.Cursor(ts(at) + "/" + last.ID)
	}
	return out, nil
}

// ActiveCount returns the kind's slot counter, the sum of its shards (0 before
// its first AdjustSlots).
func (s *Store) ActiveCount(ctx context.Context, kind work.Kind) (int, error) {
	if err := work.ValidateKind(kind); err != nil {
		return 0, err
	}
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE(SUM(active), 0) FROM slots WHERE kind = ?`, string(kind)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active %s: %w", kind, err)
	}
	return n, nil
}

// LockHolder returns who holds the lock key, or "" when it is free.
func (s *Store) LockHolder(ctx context.Context, key string) (string, error) {
	if err := work.ValidateLockKey(key); err != nil {
		return "", err
	}
	var h string
	err := s.rdb.QueryRowContext(ctx, `SELECT holder FROM locks WHERE key = ?`, key).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lock %s: %w", key, err)
	}
	return h, nil
}

// ItemsChangedAfter lists kind's items whose (updated_at, id) comes after (at,
// id), oldest change first, through the index items_by_updated.
func (s *Store) ItemsChangedAfter(ctx context.Context, kind work.Kind, at time.Time, id string, limit int) ([]work.Item, error) {
	if err := work.ValidateKind(kind); err != nil {
		return nil, err
	}
	if limit < 1 || limit > page.MaxLimit {
		return nil, molt.Invalid("limit", "limit must be between 1 and %d", page.MaxLimit)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+itemCols+` FROM items
		WHERE kind = ? AND updated_at != '' AND (updated_at > ? OR (updated_at = ? AND id > ?))
		ORDER BY updated_at, id LIMIT ?`, string(kind), ts(at), ts(at), id, limit)
	if err != nil {
		return nil, fmt.Errorf("list changed %s items: %w", kind, err)
	}
	defer rows.Close()
	out := []work.Item{}
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("list changed %s items: %w", kind, err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list changed %s items: %w", kind, err)
	}
	return out, nil
}
