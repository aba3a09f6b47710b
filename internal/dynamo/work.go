package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// Work item attributes.
const (
	attrKind      = "kind"
	attrID        = "id"
	attrWorkspace = "ws"
	attrLockKey   = "lock_key"
	attrStatus    = "status"
	attrActive    = "active"
	// attrNoSlot is present (true) on a claimed item whose claim holds no slot
	// (work.Item.Slot false: a kind without a budget). Stored inverted so that
	// an item claimed before the attribute existed, when every claim took a
	// slot, still reads as holding one and its release frees it.
	attrNoSlot = "noslot"
	// attrSlotShard is the counter shard of the item's slot
	// (work.Item.SlotShard), absent for shard 0: an item claimed before
	// counters were sharded reads shard 0, the counter it took its slot from.
	attrSlotShard    = "slot_shard"
	attrAttempts     = "attempts"
	attrAttemptsBase = "attempts_base"
	attrToken        = "token"
	attrHeartbeat    = "heartbeat_at"
	attrReason       = "reason"
	attrData         = "data"
	attrCreatedAt    = "created_at"
	attrUpdatedAt    = "updated_at"
	attrOpID         = "op_id"
	attrExpiresAt    = TTLAttribute // epoch seconds
	attrArchivedAt   = "archived_at"
	attrAgeArchived  = "gsi4a" // an archived item's gsi4sk, kept by its later writes
	attrCount        = "n"
	attrHolder       = "holder"
)

// conflictTries bounds retries of a transaction cancelled by a conflicting one.
const conflictTries = 6

func workPK(kind work.Kind, id string) string { return "WORK#" + string(kind) + "#" + id }
func kindPK(kind work.Kind) string            { return "WORK#" + string(kind) }
func statusPK(kind work.Kind, st work.Status) string {
	return "WORK#" + string(kind) + "#" + string(st)
}

// Phases of an item's age key (gsi4sk).
const (
	ageUpdated  = "u" // not archived: by updated_at
	ageArchived = "a" // archived: by archived_at
)

// ageKey is an item's sort key in gsi4, which lists one status partition by
// age: "<phase>#<time>#<id>", the time as 20-digit Unix nanoseconds, so text
// order is time order within a phase.
func ageKey(phase string, t time.Time, id string) string {
	return fmt.Sprintf("%s#%020d#%s", phase, ageNanos(t), id)
}

// ageNanos is t in Unix nanoseconds; 0 for the zero time (or any before 1970).
func ageNanos(t time.Time) int64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return t.UnixNano()
}

const (
	skWork  = "WORK"
	skSlots = "SLOTS"
	skLock  = "LOCK"
)

func workKey(kind work.Kind, id string) map[string]types.AttributeValue {
	return key(workPK(kind, id), skWork)
}

// slotsKey is shard k of kind's slot counter, an item of its own (a partition
// of its own) per shard; shard 0 keeps the unsharded counter's key.
func slotsKey(kind work.Kind, k int) map[string]types.AttributeValue {
	if k == 0 {
		return key("SLOTS#"+string(kind), skSlots)
	}
	return key(fmt.Sprintf("SLOTS#%s#%d", kind, k), skSlots)
}

func lockKey(k string) map[string]types.AttributeValue { return key("LOCK#"+k, skLock) }

// encodeItem returns the full DynamoDB item of a work item. Empty strings, zero
// times and empty data are left out; they read back as their zero values.
func encodeItem(it work.Item) map[string]types.AttributeValue {
	m := workKey(it.Kind, it.ID)
	m[attrG1PK] = str(kindPK(it.Kind))
	m[attrG1SK] = str(it.ID)
	m[attrG2PK] = str(statusPK(it.Kind, it.Status))
	m[attrG2SK] = str(it.ID)
	if it.ArchivedAt.IsZero() {
		m[attrG4SK] = str(ageKey(ageUpdated, it.UpdatedAt, it.ID))
	} else {
		k := ageKey(ageArchived, it.ArchivedAt, it.ID)
		m[attrG4SK], m[attrAgeArchived], m[attrArchivedAt] = str(k), str(k), tnum(it.ArchivedAt)
	}
	m[attrKind] = str(string(it.Kind))
	m[attrID] = str(it.ID)
	m[attrStatus] = str(string(it.Status))
	m[attrActive] = boolean(it.Active)
	if it.Active && !it.Slot {
		m[attrNoSlot] = boolean(true)
	}
	if it.SlotShard != 0 {
		m[attrSlotShard] = num(int64(it.SlotShard))
	}
	m[attrAttempts] = num(int64(it.Attempts))
	m[attrAttemptsBase] = num(int64(it.AttemptsBase))
	opt := func(k, v string) {
		if v != "" {
			m[k] = str(v)
		}
	}
	opt(attrWorkspace, it.Workspace)
	opt(attrLockKey, it.LockKey)
	opt(attrToken, it.Token)
	opt(attrReason, it.Reason)
	opt(attrOpID, it.OpID)
	if !it.HeartbeatAt.IsZero() {
		m[attrHeartbeat] = tnum(it.HeartbeatAt)
	}
	if !it.CreatedAt.IsZero() {
		m[attrCreatedAt] = tnum(it.CreatedAt)
	}
	if !it.UpdatedAt.IsZero() {
		m[attrUpdatedAt] = tnum(it.UpdatedAt)
		m[attrG3PK] = str(kindPK(it.Kind))
		m[attrG3SK] = str(changeSK(it.UpdatedAt, it.ID))
	}
	if len(it.Data) > 0 {
		m[attrData] = &types.AttributeValueMemberB{Value: it.Data}
	}
	if !it.ExpiresAt.IsZero() {
		m[attrExpiresAt] = num(it.ExpiresAt.Unix())
	}
	return m
}

func decodeItem(m map[string]types.AttributeValue) work.Item {
	return work.Item{
		Kind:         work.Kind(getS(m, attrKind)),
		ID:           getS(m, attrID),
		Workspace:    getS(m, attrWorkspace),
		LockKey:      getS(m, attrLockKey),
		Status:       work.Status(getS(m, attrStatus)),
		Active:       getBool(m, attrActive),
		Slot:         getBool(m, attrActive) && !getBool(m, attrNoSlot),
		SlotShard:    int(getN(m, attrSlotShard)),
		Attempts:     int(getN(m, attrAttempts)),
		AttemptsBase: int(getN(m, attrAttemptsBase)),
		Token:        getS(m, attrToken),
		HeartbeatAt:  getTime(m, attrHeartbeat),
		Reason:       getS(m, attrReason),
		Data:         getB(m, attrData),
		CreatedAt:    getTime(m, attrCreatedAt),
		UpdatedAt:    getTime(m, attrUpdatedAt),
		OpID:         getS(m, attrOpID),
		ExpiresAt:    getSeconds(m, attrExpiresAt),
		ArchivedAt:   getTime(m, attrArchivedAt),
	}
}

// getSeconds reads an epoch-seconds attribute (the TTL attribute); absent is zero.
func getSeconds(m map[string]types.AttributeValue, k string) time.Time {
	if _, ok := m[k]; !ok {
		return time.Time{}
	}
	return time.Unix(getN(m, k), 0).UTC()
}

// Commit applies ops atomically: one conditional PutItem/UpdateItem/DeleteItem for
// a single op that writes one item, one TransactWriteItems otherwise (an
// AppendMessage writes two items: the session and the message). A failed
// condition returns a *work.ConditionFailed naming the op. Invalid ops return
// EINVALID/ETOOLARGE before any request (work.CheckCommit). Any other error
// leaves the outcome unknown, including a condition failure on a request the SDK
// had to retry (its first attempt may have landed).
func (s *Store) Commit(ctx context.Context, ops ...work.Op) error {
	if err := work.CheckCommit(ops); err != nil {
		return err
	}
	tx, err := s.transaction(ops)
	if err != nil {
		return err
	}
	return s.commitTx(ctx, ops, tx)
}

// commitTx sends tx, the transaction of ops, and translates its outcome (see
// Commit).
func (s *Store) commitTx(ctx context.Context, ops []work.Op, tx txn) error {
	retried, err := s.write(ctx, tx.items)
	if err == nil {
		return nil
	}
	if idx, ok := conditionIndex(err); ok {
		if retried {
			return fmt.Errorf("commit %d ops: condition failed after a retried request, outcome unknown: %w", len(ops), err)
		}
		if g := tx.sessions[idx]; g != nil {
			return &work.ConditionFailed{Index: s.sessionFailed(ctx, g)}
		}
		return &work.ConditionFailed{Index: tx.owner[idx]}
	}
	return fmt.Errorf("commit %d ops: %w", len(ops), err)
}

// maxTxBytes bounds the estimated size of one transaction CommitEach packs
// several commits into, well under DynamoDB's 4 MB for TransactWriteItems.
const maxTxBytes = 2 << 20

// CommitEach commits each of cs as Commit would, independently (see
// work.Backend). It packs commits that write disjoint records into one
// TransactWriteItems (at most work.MaxOps items and about maxTxBytes; a commit
// alone is Commit's single-item call when it writes one item). A transaction
// succeeds or fails as a whole, so when one is cancelled because conditions
// failed (reasons without an SDK retry, which would make them ambiguous), the
// commits whose item failed its condition get their *work.ConditionFailed and
// the others are sent again without them, so no commit's condition fails
// another. Commits that write one record (a budget's slot counter, a lock) go
// in successive transactions, one at a time, so each keeps its own result.
// Commits with session ops go alone (their failed op is found by a read).
func (s *Store) CommitEach(ctx context.Context, cs ...[]work.Op) []error {
	errs := make([]error, len(cs))
	type member struct {
		at   int
		tx   txn
		recs []string
		size int
	}
	var todo []member
	for i, ops := range cs {
		if err := work.CheckCommit(ops); err != nil {
			errs[i] = err
			continue
		}
		tx, err := s.transaction(ops)
		if err != nil {
			errs[i] = err
			continue
		}
		if len(tx.sessions) > 0 {
			errs[i] = s.commitTx(ctx, ops, tx)
			continue
		}
		size := 0
		for _, op := range ops {
			size += 1 << 10
			switch op := op.(type) {
			case work.CreateItem:
				size += len(op.Item.Data)
			case work.UpdateItem:
				size += len(op.Set.Data)
			}
		}
		todo = append(todo, member{at: i, tx: tx, recs: work.Records(ops), size: size})
	}
	for len(todo) > 0 {
		var chunk, rest []member
		used := map[string]bool{}
		items, size := 0, 0
		for _, m := range todo {
			fits := items+len(m.tx.items) <= work.MaxOps && size+m.size <= maxTxBytes
			for _, r := range m.recs {
				fits = fits && !used[r]
			}
			if !fits && len(chunk) > 0 {
				rest = append(rest, m)
				continue
			}
			for _, r := range m.recs {
				used[r] = true
			}
			items, size = items+len(m.tx.items), size+m.size
			chunk = append(chunk, m)
		}
		todo = rest
		if len(chunk) == 1 {
			m := chunk[0]
			errs[m.at] = s.commitTx(ctx, cs[m.at], m.tx)
			continue
		}
		var tx []types.TransactWriteItem
		type owner struct{ member, op int }
		var owners []owner
		for j, m := range chunk {
			tx = append(tx, m.tx.items...)
			for _, op := range m.tx.owner {
				owners = append(owners, owner{j, op})
			}
		}
		retried, err := s.write(ctx, tx)
		if err == nil {
			continue
		}
		var tce *types.TransactionCanceledException
		if !retried && errors.As(err, &tce) && len(tce.CancellationReasons) == len(tx) {
			failed := make([]bool, len(chunk))
			anyFailed := false
			for k, r := range tce.CancellationReasons {
				if aws.ToString(r.Code) != "ConditionalCheckFailed" {
					continue
				}
				o := owners[k]
				if !failed[o.member] {
					failed[o.member], anyFailed = true, true
					errs[chunk[o.member].at] = &work.ConditionFailed{Index: o.op}
				}
			}
			if anyFailed {
				// Nothing was written: send the others again, first.
				var again []member
				for j, m := range chunk {
					if !failed[j] {
						again = append(again, m)
					}
				}
				todo = append(again, todo...)
				continue
			}
		}
		for _, m := range chunk {
			if _, ok := conditionIndex(err); ok && retried {
				errs[m.at] = fmt.Errorf("commit %d ops: condition failed after a retried request, outcome unknown: %w", len(cs[m.at]), err)
				continue
			}
			errs[m.at] = fmt.Errorf("commit %d ops: %w", len(cs[m.at]), err)
		}
	}
	return errs
}

// txn is a Commit's ops as transaction items.
type txn struct {
	items    []types.TransactWriteItem
	owner    []int               // owner[i]: the op that wrote items[i]
	sessions map[int]*sessionOps // by the index of a session's META update
}

// transaction turns ops, which work.CheckCommit accepted, into transaction
// items: one per record CheckCommit counted, as the session ops of one session
// share one META update (see sessionUpdate).
func (s *Store) transaction(ops []work.Op) (txn, error) {
	tx := txn{sessions: map[int]*sessionOps{}}
	add := func(op int, ti types.TransactWriteItem) {
		tx.items = append(tx.items, ti)
		tx.owner = append(tx.owner, op)
	}
	bySession := map[string]*sessionOps{}
	group := func(op int, id string) *sessionOps {
		g := bySession[id]
		if g == nil {
			g = &sessionOps{id: id, item: len(tx.items)}
			bySession[id] = g
			tx.sessions[g.item] = g
			// A placeholder, filled in once every op of the session is known.
			add(op, types.TransactWriteItem{})
		}
		return g
	}
	for i, op := range ops {
		switch op := op.(type) {
		case session.AppendMessage:
			m := op.Message
			if m.CreatedAt.IsZero() {
				m.CreatedAt = s.now()
			}
			g := group(i, m.SessionID)
			g.steps = append(g.steps, sessionStep{op: i, msg: m})
			add(i, s.messagePut(m))
		case session.SetSummary:
			g := group(i, op.SessionID)
			g.steps = append(g.steps, sessionStep{op: i, summary: &op})
		case session.MarkExternal:
			g := group(i, op.SessionID)
			g.steps = append(g.steps, sessionStep{op: i, external: true})
		case session.RequestNaming, session.SaveTitle:
			ti, err := s.namingUpdate(op)
			if err != nil {
				return txn{}, err
			}
			add(i, ti)
		default:
			ti, err := s.writeItem(op)
			if err != nil {
				return txn{}, err
			}
			add(i, ti)
		}
	}
	for _, g := range bySession {
		up, err := s.sessionUpdate(g)
		if err != nil {
			return txn{}, err
		}
		tx.items[g.item] = types.TransactWriteItem{Update: up}
	}
	return tx, nil
}

// write sends items (see send), retrying a write that DynamoDB refused without
// applying it because of a conflicting transaction (see retrying). retried
// reports whether the SDK re-sent any request (a condition failure is then
// ambiguous).
func (s *Store) write(ctx context.Context, items []types.TransactWriteItem) (retried bool, err error) {
	return s.retrying(ctx, func(opt func(*dynamodb.Options)) error { return s.send(ctx, items, opt) })
}

// retrying runs call, one write request, passing it a fresh attempt counter as a
// per-call option; while DynamoDB refuses the write without applying it for a
// conflicting transaction or throttling (see transient), it calls it again after
// a backoff, up to conflictTries times. retried reports whether the SDK re-sent
// any request (its first attempt may have landed).
func (s *Store) retrying(ctx context.Context, call func(opt func(*dynamodb.Options)) error) (retried bool, err error) {
	for try := 0; ; try++ {
		var n attempts
		err := call(n.opt)
		retried = retried || n.retried()
		if err == nil || !transient(err) || try+1 >= conflictTries {
			return retried, err
		}
		if werr := backoff(ctx, try); werr != nil {
			return retried, err
		}
	}
}

// send writes items: alone with a single-item call, together in a transaction.
func (s *Store) send(ctx context.Context, items []types.TransactWriteItem, opt func(*dynamodb.Options)) error {
	if len(items) > 1 {
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, opt)
		return err
	}
	ti := items[0]
	var err error
	switch {
	case ti.Put != nil:
		p := ti.Put
		_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item,
			ConditionExpression: p.ConditionExpression, ExpressionAttributeNames: p.ExpressionAttributeNames,
			ExpressionAttributeValues: p.ExpressionAttributeValues}, opt)
	case ti.Update != nil:
		u := ti.Update
		_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
			UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues}, opt)
	case ti.Delete != nil:
		d := ti.Delete
		_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: d.TableName, Key: d.Key,
			ConditionExpression: d.ConditionExpression, ExpressionAttributeNames: d.ExpressionAttributeNames,
			ExpressionAttributeValues: d.ExpressionAttributeValues}, opt)
	default:
		err = fmt.Errorf("unsupported write")
	}
	return err
}

// writeItem returns op, one of package work's ops, as a transaction item.
func (s *Store) writeItem(op work.Op) (types.TransactWriteItem, error) {
	tbl := aws.String(s.table)
	switch op := op.(type) {
	case work.CreateItem:
		var e exprs
		return types.TransactWriteItem{Put: &types.Put{TableName: tbl, Item: encodeItem(op.Item),
			ConditionExpression:      aws.String("attribute_not_exists(" + e.name(attrPK) + ")"),
			ExpressionAttributeNames: e.names}}, nil

	case work.UpdateItem:
		up, err := s.updateItem(op)
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		return types.TransactWriteItem{Update: up}, nil

	case work.DeleteItem:
		e := &exprs{}
		cond := itemCond(e, op.If)
		return types.TransactWriteItem{Delete: &types.Delete{TableName: tbl, Key: workKey(op.Kind, op.ID),
			ConditionExpression: aws.String(strings.Join(cond, " AND ")), ExpressionAttributeNames: e.names,
			ExpressionAttributeValues: e.values}}, nil

	case work.AdjustSlots:
		var e exprs
		n := e.name(attrCount)
		up := &types.Update{TableName: tbl, Key: slotsKey(op.Kind, op.Shard),
			UpdateExpression: aws.String("ADD " + n + " " + e.value(num(int64(op.Delta))))}
		switch {
		case op.Delta > 0 && op.Max > 0 && op.Delta > op.Max:
			// Even an empty counter has no room: a condition no item satisfies.
			up.ConditionExpression = aws.String(n + " < " + e.value(num(0)))
		case op.Delta > 0 && op.Max > 0:
			up.ConditionExpression = aws.String("attribute_not_exists(" + n + ") OR " + n + " <= " + e.value(num(int64(op.Max-op.Delta))))
		case op.Delta < 0:
			up.ConditionExpression = aws.String(n + " >= " + e.value(num(int64(-op.Delta))))
		}
		up.ExpressionAttributeNames, up.ExpressionAttributeValues = e.names, e.values
		return types.TransactWriteItem{Update: up}, nil

	case work.AcquireLock:
		var e exprs
		item := lockKey(op.Key)
		item[attrHolder] = str(op.Holder)
		return types.TransactWriteItem{Put: &types.Put{TableName: tbl, Item: item,
			ConditionExpression: aws.String("attribute_not_exists(" + e.name(attrPK) + ") OR " +
				e.name(attrHolder) + " = " + e.value(str(op.Holder))),
			ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values}}, nil

	case work.ReleaseLock:
		var e exprs
		return types.TransactWriteItem{Delete: &types.Delete{TableName: tbl, Key: lockKey(op.Key),
			ConditionExpression:      aws.String(e.name(attrHolder) + " = " + e.value(str(op.Holder))),
			ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values}}, nil
	}
	return types.TransactWriteItem{}, molt.Invalid("ops", "unknown op %T", op)
}

// updateItem builds the conditional update of op: the item must exist and every
// non-zero field of op.If must hold; non-nil fields of op.Set are written, and
// OpID and UpdatedAt always.
func (s *Store) updateItem(op work.UpdateItem) (*types.Update, error) {
	set := op.Set
	e := &exprs{}
	cond := itemCond(e, op.If)

	u := &update{e: e}
	if set.Status != "" {
		u.setVal(attrStatus, str(string(set.Status)))
		u.setVal(attrG2PK, str(statusPK(op.Kind, set.Status)))
	}
	if set.Active != nil {
		u.setVal(attrActive, boolean(*set.Active))
	}
	if set.Slot != nil {
		if *set.Slot || (set.Active != nil && !*set.Active) {
			u.remove = append(u.remove, e.name(attrNoSlot))
		} else {
			u.setVal(attrNoSlot, boolean(true))
		}
	}
	if set.SlotShard != nil {
		if *set.SlotShard == 0 {
			u.remove = append(u.remove, e.name(attrSlotShard))
		} else {
			u.setVal(attrSlotShard, num(int64(*set.SlotShard)))
		}
	}
	if set.Attempts != nil {
		u.setVal(attrAttempts, num(int64(*set.Attempts)))
	}
	if set.AttemptsBase != nil {
		u.setVal(attrAttemptsBase, num(int64(*set.AttemptsBase)))
	}
	if set.Token != nil {
		u.setStr(attrToken, *set.Token)
	}
	if set.HeartbeatAt != nil {
		u.setTime(attrHeartbeat, *set.HeartbeatAt)
	}
	if set.Reason != nil {
		u.setStr(attrReason, *set.Reason)
	}
	if len(set.Data) > 0 {
		u.setVal(attrData, &types.AttributeValueMemberB{Value: set.Data})
	}
	if set.ExpiresAt != nil {
		if set.ExpiresAt.IsZero() {
			u.remove = append(u.remove, e.name(attrExpiresAt))
		} else {
			u.setVal(attrExpiresAt, num(set.ExpiresAt.Unix()))
		}
	}
	u.setStr(attrOpID, set.OpID)
	if !set.KeepUpdatedAt {
		s.setUpdated(u, e, op, set)
	}

	return &types.Update{TableName: aws.String(s.table), Key: workKey(op.Kind, op.ID),
		UpdateExpression:          aws.String(u.expr()),
		ConditionExpression:       aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values}, nil
}

// itemCond is the condition of a conditional write of a work item: it exists and
// every non-zero field of c holds (c is valid: see work.Validate).
func itemCond(e *exprs, c work.Cond) []string {
	cond := []string{"attribute_exists(" + e.name(attrPK) + ")"}
	if len(c.Statuses) > 0 {
		vs := make([]string, len(c.Statuses))
		for i, st := range c.Statuses {
			vs[i] = e.value(str(string(st)))
		}
		cond = append(cond, e.name(attrStatus)+" IN ("+strings.Join(vs, ", ")+")")
	}
	if c.Attempts != nil {
		cond = append(cond, e.name(attrAttempts)+" = "+e.value(num(int64(*c.Attempts))))
	}
	if c.Token != "" {
		cond = append(cond, e.name(attrToken)+" = "+e.value(str(c.Token)))
	}
	if c.Active != nil {
		cond = append(cond, e.name(attrActive)+" = "+e.value(boolean(*c.Active)))
	}
	if !c.StaleBefore.IsZero() {
		// A missing heartbeat is the zero time: before everything.
		hb := e.name(attrHeartbeat)
		cond = append(cond, "(attribute_not_exists("+hb+") OR "+hb+" < "+e.value(tnum(c.StaleBefore))+")")
	}
	if c.OpID != "" {
		cond = append(cond, e.name(attrOpID)+" = "+e.value(str(c.OpID)))
	}
	return cond
}

// GetItem reads kind/id with a strongly consistent read; ENOTFOUND when absent.
func (s *Store) GetItem(ctx context.Context, kind work.Kind, id string) (work.Item, error) {
	if err := work.ValidateKey(kind, id); err != nil {
		return work.Item{}, err
	}
	m, ok, err := s.get(ctx, workKey(kind, id))
	if err != nil {
		return work.Item{}, failure(fmt.Sprintf("get %s %s", kind, id), err)
	}
	if !ok {
		return work.Item{}, molt.NotFound("%s %s not found", kind, id)
	}
	return decodeItem(m), nil
}

// ListItems lists one kind's items by id (newest first, or oldest first with
// q.Oldest), through gsi1 or, for one status, gsi2. Index reads are eventually
// consistent on DynamoDB: a listing may lag a write by a moment; every write the
// caller then makes is conditional on the item's current state. The cursor is the
// last id returned; the next page starts strictly after it, so it stays valid
// when that item changes status or is deleted.
func (s *Store) ListItems(ctx context.Context, q work.ListQuery) (page.Page[work.Item], error) {
	if err := q.Validate(); err != nil {
		return page.Page[work.Item]{}, err
	}
	limit, after, err := q.Page.Normalize()
	if err != nil {
		return page.Page[work.Item]{}, err
	}
	if !q.UpdatedBy.IsZero() || !q.ArchivedBy.IsZero() {
		return s.listByAge(ctx, q, limit, after)
	}
	idx, hk, rk, hv := index1, attrG1PK, attrG1SK, kindPK(q.Kind)
	if q.Status != "" {
		idx, hk, rk, hv = index2, attrG2PK, attrG2SK, statusPK(q.Kind, q.Status)
	}
	in := afterQuery(idx, hk, hv, rk, after, q.Oldest)
	items, more, err := s.queryPage(ctx, in, limit)
	if err != nil {
		return page.Page[work.Item]{}, failure(fmt.Sprintf("list %s", q.Kind), err)
	}
	out := page.Page[work.Item]{Items: make([]work.Item, 0, len(items))}
	for _, m := range items {
		out.Items = append(out.Items, decodeItem(m))
	}
	if more && len(items) > 0 {
		out.Next = page.Cursor(getS(items[len(items)-1], rk))
	}
	return out, nil
}

// listByAge lists q's status partition of gsi4 in age order, within one
// phase: not archived and updated at or before q.UpdatedBy, or archived at or
// before q.ArchivedBy. The key condition is gsi4sk BETWEEN a lower bound (the
// phase's start, or just after the cursor) and the last key of the bound's
// nanosecond, so a page reads only what it returns. The cursor is the last
// item's gsi4sk; the key just after it is the cursor followed by "!", which
// sorts below every character an id may hold (work.ValidateKey), so no key
// lies between the two.
func (s *Store) listByAge(ctx context.Context, q work.ListQuery, limit int, after string) (page.Page[work.Item], error) {
	phase, by := ageUpdated, q.UpdatedBy
	if !q.ArchivedBy.IsZero() {
		phase, by = ageArchived, q.ArchivedBy
	}
	lo, hi := phase+"#", fmt.Sprintf("%s#%020d#~", phase, ageNanos(by))
	if after != "" {
		if !strings.HasPrefix(after, lo) || strings.Count(after, "#") != 2 {
			return page.Page[work.Item]{}, molt.Invalid("cursor", "malformed cursor")
		}
		lo = after + "!"
	}
	out := page.Page[work.Item]{Items: []work.Item{}}
	if lo > hi {
		return out, nil // a cursor past the bound: nothing is left
	}
	var e exprs
	in := &dynamodb.QueryInput{
		IndexName: aws.String(index4),
		KeyConditionExpression: aws.String(e.name(attrG2PK) + " = " + e.value(str(statusPK(q.Kind, q.Status))) +
			" AND " + e.name(attrG4SK) + " BETWEEN " + e.value(str(lo)) + " AND " + e.value(str(hi))),
		ScanIndexForward: aws.Bool(true),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.names, e.values
	items, more, err := s.queryPage(ctx, in, limit)
	if err != nil {
		return page.Page[work.Item]{}, failure(fmt.Sprintf("list %s %s by age", q.Kind, q.Status), err)
	}
	for _, m := range items {
		out.Items = append(out.Items, decodeItem(m))
	}
	if more && len(items) > 0 {
		out.Next = page.Cursor(getS(items[len(items)-1], attrG4SK))
	}
	return out, nil
}

// afterQuery is a Query of one index partition in sort-key order, newest (highest)
// first unless oldest, starting strictly after the sort key after when set.
func afterQuery(idx, hk, hv, rk, after string, oldest bool) *dynamodb.QueryInput {
	var e exprs
	kc := e.name(hk) + " = " + e.value(str(hv))
	if after != "" {
		op := " < "
		if oldest {
			op = " > "
		}
		kc += " AND " + e.name(rk) + op + e.value(str(after))
	}
	return &dynamodb.QueryInput{
		IndexName:                 aws.String(idx),
		KeyConditionExpression:    aws.String(kc),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ScanIndexForward:          aws.Bool(oldest),
	}
}

// ActiveCount returns kind's slot counter, the sum of its shards (an absent
// shard counts 0): work.MaxSlotShards strongly consistent reads, in parallel.
func (s *Store) ActiveCount(ctx context.Context, kind work.Kind) (int, error) {
	if err := work.ValidateKind(kind); err != nil {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		n    [work.MaxSlotShards]int64
		errs [work.MaxSlotShards]error
	)
	for k := range work.MaxSlotShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, _, err := s.get(ctx, slotsKey(kind, k))
			n[k], errs[k] = getN(m, attrCount), err
		}()
	}
	wg.Wait()
	var total int64
	for k := range work.MaxSlotShards {
		if errs[k] != nil {
			return 0, failure(fmt.Sprintf("read %s slots", kind), errs[k])
		}
		total += n[k]
	}
	return int(total), nil
}

// LockHolder returns the holder of lock key, or "" when it is free.
func (s *Store) LockHolder(ctx context.Context, k string) (string, error) {
	if err := work.ValidateLockKey(k); err != nil {
		return "", err
	}
	m, _, err := s.get(ctx, lockKey(k))
	if err != nil {
		return "", failure("read lock "+k, err)
	}
	return getS(m, attrHolder), nil
}

// changeSK is an item's gsi3 sort key: its update time in Unix nanoseconds,
// zero-padded to 20 digits so the text sorts as the time, then its id.
func changeSK(t time.Time, id string) string {
	return fmt.Sprintf("%020d#%s", t.UnixNano(), id)
}

// ItemsChangedAfter lists kind's items whose (updated_at, id) comes after (at,
// id), oldest change first, from gsi3 (eventually consistent: a change may show
// a moment after its write).
func (s *Store) ItemsChangedAfter(ctx context.Context, kind work.Kind, at time.Time, id string, limit int) ([]work.Item, error) {
	if err := work.ValidateKind(kind); err != nil {
		return nil, err
	}
	if limit < 1 || limit > page.MaxLimit {
		return nil, molt.Invalid("limit", "limit must be between 1 and %d", page.MaxLimit)
	}
	after := ""
	if at.After(time.Unix(0, 0)) {
		after = changeSK(at, id)
	}
	in := afterQuery(index3, attrG3PK, kindPK(kind), attrG3SK, after, true)
	items, _, err := s.queryPage(ctx, in, limit)
	if err != nil {
		return nil, failure(fmt.Sprintf("list changed %s", kind), err)
	}
	out := make([]work.Item, 0, len(items))
	for _, m := range items {
		out = append(out, decodeItem(m))
	}
	return out, nil
}

// setUpdated writes updated_at (now when set.UpdatedAt is zero) and the index
// keys that follow it: gsi3 (the change feed) and gsi4 (age, unless archived).
func (s *Store) setUpdated(u *update, e *exprs, op work.UpdateItem, set work.Set) {
	updated := set.UpdatedAt
	if updated.IsZero() {
		updated = s.now() // always written
	}
	u.setTime(attrUpdatedAt, updated)
	// gsi3 (the change feed) follows updated_at in the same write.
	u.setVal(attrG3PK, str(kindPK(op.Kind)))
	u.setVal(attrG3SK, str(changeSK(updated, op.ID)))
	// gsi4sk follows updated_at until the item is archived, then archived_at:
	// a write that does not set the archive time keeps an archived item's key
	// (if_not_exists reads its copy in gsi4a).
	byUpdate := str(ageKey(ageUpdated, updated, op.ID))
	switch at := set.ArchivedAt; {
	case at != nil && !at.IsZero():
		k := str(ageKey(ageArchived, *at, op.ID))
		u.setVal(attrArchivedAt, tnum(*at))
		u.setVal(attrAgeArchived, k)
		u.setVal(attrG4SK, k)
	case at != nil:
		u.remove = append(u.remove, e.name(attrArchivedAt), e.name(attrAgeArchived))
		u.setVal(attrG4SK, byUpdate)
	default:
		u.set = append(u.set, e.name(attrG4SK)+" = if_not_exists("+e.name(attrAgeArchived)+", "+e.value(byUpdate)+")")
	}
}
