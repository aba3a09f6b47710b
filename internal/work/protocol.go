package work

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// Protocol implements the claim protocol on a Backend.
type Protocol struct {
	Backend Backend
	Clock   molt.Clock
	IDs     molt.IDs
	// Tries bounds how often a write whose outcome was unknown is re-tried after a
	// read-back showed it had not been applied (default 3).
	Tries int
}

// Conflict reasons returned by the protocol (molt.ECONFLICT with these Reasons).
const (
	ReasonExists       = "exists"        // Create: an item with that key exists
	ReasonNotClaimable = "not_claimable" // Claim: not pending at the attempts seen
	ReasonBudgetFull   = "budget_full"   // Claim: every slot of the kind is taken
	ReasonLocked       = "locked"        // Claim: the item's lock is held by another
	ReasonChanged      = "changed"       // Update/Requeue: the item is not as seen
	ReasonAlsoFailed   = "also_failed"   // an extra op of the transaction failed
)

// readBackTimeout bounds the read-back of a write its caller abandoned (which
// runs without the caller's context, so a store that stopped answering would
// hold the caller for ever). A variable for tests.
var readBackTimeout = 10 * time.Second

// detached returns a context for the read-back of a write ctx abandoned.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
}

func (p *Protocol) now() time.Time { return p.Clock.Now().UTC() }

func (p *Protocol) tries() int {
	if p.Tries > 0 {
		return p.Tries
	}
	return 3
}

// Create stores a new pending item (ID generated when empty) together with also,
// atomically. It returns the stored item, ECONFLICT/ReasonExists when the key is
// taken, EINVALID for a malformed item, and ECONFLICT/ReasonAlsoFailed when an
// extra op's condition failed.
func (p *Protocol) Create(ctx context.Context, it Item, also ...Op) (Item, error) {
	if it.ID == "" {
		it.ID = p.IDs.NewID()
	}
	if it.Status == "" {
		it.Status = StatusPending
	}
	now := p.now()
	it.Active, it.Slot, it.Token, it.HeartbeatAt = false, false, "", time.Time{}
	it.CreatedAt, it.UpdatedAt = now, now
	it.OpID = p.IDs.NewID()
	if err := it.Validate(); err != nil {
		return Item{}, err
	}
	ops := append([]Op{CreateItem{Item: it}}, also...)
	err := p.commit(ctx, it.Kind, it.ID, it.OpID, ops)
	if err != nil {
		if idx, ok := failedIndex(err); ok {
			if idx == 0 {
				return Item{}, molt.Conflict(ReasonExists, "%s %s exists", it.Kind, it.ID)
			}
			return Item{}, alsoFailed(ops, idx, 1)
		}
		return Item{}, fmt.Errorf("create %s %s: %w", it.Kind, it.ID, err)
	}
	return it, nil
}

// Claim takes the pending item kind/id, whose attempts the caller saw as seen, to
// running: attempts+1, a new token, heartbeat now, one slot of the kind's budget
// (budget <= 0: unlimited) and the item's lock, all in one write. It reads the
// item first; a caller that has just read it should use ClaimSeen.
//
// Errors: ENOTFOUND; ECONFLICT with ReasonNotClaimable (not pending at seen),
// ReasonBudgetFull or ReasonLocked; EUNAVAILABLE when the store could not be
// reached: the claim was not taken, or, when even the read-back after a lost
// response failed, it may have been (a claim nobody holds goes stale and the tick
// returns it).
func (p *Protocol) Claim(ctx context.Context, kind Kind, id string, seen, budget int) (Claim, Item, error) {
	if err := ValidateKey(kind, id); err != nil {
		return Claim{}, Item{}, err
	}
	cur, err := p.Backend.GetItem(ctx, kind, id)
	if err != nil {
		return Claim{}, Item{}, err
	}
	if cur.Attempts != seen {
		return Claim{}, Item{}, molt.Conflict(ReasonNotClaimable, "%s %s is at attempt %d, not %d", kind, id, cur.Attempts, seen)
	}
	return p.ClaimSeen(ctx, cur, budget)
}

// ClaimSeen is Claim for an item the caller has just read: one conditional write,
// no read. The write's condition is on the status and attempts in seen, so a stale
// seen only makes the claim fail with ReasonNotClaimable.
func (p *Protocol) ClaimSeen(ctx context.Context, seen Item, budget int) (Claim, Item, error) {
	r := p.ClaimEach(ctx, []Item{seen}, budget)[0]
	return r.Claim, r.Item, r.Err
}

// Claimed is one result of ClaimEach: the claim and the item as claimed, or
// why not (ClaimSeen's errors).
type Claimed struct {
	Claim Claim
	Item  Item
	Err   error
}

// ClaimEach is ClaimSeen for several items the caller has just read, claimed
// in one store round trip (Backend.CommitEach) where the store allows: each
// claim is its own conditional commit, on its own item's status and attempts,
// taking its own slot of the budget (budget <= 0: none) and its own lock, and
// it lands or fails on its own. Under a budget every claim adjusts one shard
// of the counter (SlotShards) by one in its own commit, conditioned on that
// shard's share (ShardCap), so the shares summing to the budget keep it exact
// and a batch larger than the free slots claims as many as fit. A claim starts
// at a shard chosen from its id and, refused there, tries the next shards in
// turn (one more round trip each); it fails with ReasonBudgetFull only when
// every shard was full as it tried it, which a release on a shard it had
// already tried may have made untrue (docs/architecture.md, the trade-off).
// It returns one result per item of seen, in order.
func (p *Protocol) ClaimEach(ctx context.Context, seen []Item, budget int) []Claimed {
	out := make([]Claimed, len(seen))
	type claim struct {
		at               int
		cur              Item
		shard, tries     int
		c                Claim
		it               Item
		slotIdx, lockIdx int
	}
	slot := budget > 0
	shards := SlotShards(budget)
	var todo []*claim
	for i, cur := range seen {
		kind, id := cur.Kind, cur.ID
		if err := ValidateKey(kind, id); err != nil {
			out[i].Err = err
			continue
		}
		if cur.Status != StatusPending || cur.Active {
			out[i].Err = molt.Conflict(ReasonNotClaimable, "%s %s is %s at attempt %d", kind, id, cur.Status, cur.Attempts)
			continue
		}
		todo = append(todo, &claim{at: i, cur: cur, shard: firstShard(id, shards)})
	}
	// Each round commits every claim still to make; a claim refused by its
	// shard's share of a sharded budget tries the next shard in the next
	// round, until every shard has refused it.
	for len(todo) > 0 {
		now := p.now()
		commits := make([]pending, len(todo))
		for j, cl := range todo {
			cur, kind, id := cl.cur, cl.cur.Kind, cl.cur.ID
			shard := 0
			if slot {
				shard = cl.shard
			}
			c := Claim{Kind: kind, ID: id, Attempts: cur.Attempts + 1, Token: p.IDs.NewID(), LockKey: cur.LockKey,
				Slot: slot, SlotShard: shard}
			opID := p.IDs.NewID()
			ops := []Op{
				UpdateItem{Kind: kind, ID: id,
					If: Cond{Statuses: []Status{StatusPending}, Attempts: Ptr(cur.Attempts), Active: Ptr(false)},
					Set: Set{Status: StatusRunning, Active: Ptr(true), Slot: Ptr(slot), SlotShard: Ptr(shard),
						Attempts: Ptr(c.Attempts), Token: Ptr(c.Token), HeartbeatAt: Ptr(now), Reason: Ptr(""),
						UpdatedAt: now, OpID: opID}},
			}
			cl.slotIdx, cl.lockIdx = -1, -1
			if slot {
				cl.slotIdx = len(ops)
				ops = append(ops, AdjustSlots{Kind: kind, Shard: shard, Delta: 1, Max: ShardCap(budget, shard)})
			}
			if cur.LockKey != "" {
				cl.lockIdx = len(ops)
				ops = append(ops, AcquireLock{Key: cur.LockKey, Holder: Holder(kind, id)})
			}
			it := cur
			it.Status, it.Active, it.Slot, it.SlotShard, it.Attempts, it.Token = StatusRunning, true, slot, shard, c.Attempts, c.Token
			it.HeartbeatAt, it.UpdatedAt, it.Reason, it.OpID = now, now, "", opID
			cl.c, cl.it = c, it
			commits[j] = pending{kind: kind, id: id, opID: opID, ops: ops}
		}
		var again []*claim
		for j, err := range p.commitEach(ctx, commits) {
			cl := todo[j]
			kind, id := cl.c.Kind, cl.c.ID
			if err == nil {
				out[cl.at] = Claimed{Claim: cl.c, Item: cl.it}
				continue
			}
			if idx, ok := failedIndex(err); ok {
				switch {
				case idx >= 0 && idx == cl.slotIdx:
					if cl.tries++; cl.tries < shards {
						cl.shard = (cl.shard + 1) % shards
						again = append(again, cl)
						continue
					}
					err = molt.Conflict(ReasonBudgetFull, "no free %s slot (budget %d)", kind, budget)
				case idx >= 0 && idx == cl.lockIdx:
					err = molt.Conflict(ReasonLocked, "lock %s is held", cl.c.LockKey)
				default:
					err = molt.Conflict(ReasonNotClaimable, "%s %s changed before the claim", kind, id)
				}
			} else {
				err = fmt.Errorf("claim %s %s: %w", kind, id, err)
			}
			out[cl.at].Err = err
		}
		todo = again
	}
	return out
}

// Heartbeat refreshes the claim's heartbeat. It returns ELOSTCLAIM when the claim
// is no longer the caller's (the caller must stop and write nothing more). A
// heartbeat leaves updated_at as it was (Set.KeepUpdatedAt): it is not a change
// of the item, and the change feed and the age listings do not see it.
func (p *Protocol) Heartbeat(ctx context.Context, c Claim) error {
	now := p.now()
	opID := p.IDs.NewID()
	op := UpdateItem{Kind: c.Kind, ID: c.ID, If: owned(c),
		Set: Set{HeartbeatAt: Ptr(now), KeepUpdatedAt: true, OpID: opID}}
	if err := p.commit(ctx, c.Kind, c.ID, opID, []Op{op}); err != nil {
		return p.ownedErr(c, "heartbeat", err)
	}
	return nil
}

// Transition is a claimed item's move to another status by its owner.
type Transition struct {
	To     Status
	Keep   bool    // keep the claim (slot, lock, token): e.g. running → syncing
	Data   []byte  // new Data; nil keeps it
	Reason *string // new Reason; nil keeps it
	// Uncounted: the attempt does not count against Policy.MaxAttempts
	// (attempts_base = attempts), for an item given back through no failure
	// of its own (e.g. another item it must write was held).
	Uncounted bool
}

// Transition moves the claimed item to t.To, releasing its slot and lock unless
// t.Keep, together with also, in one conditional write (no read). It returns the
// fields it wrote (Kind, ID, Status, Active, Attempts, Token, UpdatedAt, OpID, and
// Data/Reason when set); ELOSTCLAIM when the claim is no longer the caller's; and
// ECONFLICT/ReasonAlsoFailed when an extra op's condition failed (nothing written).
func (p *Protocol) Transition(ctx context.Context, c Claim, t Transition, also ...Op) (Item, error) {
	r := p.TransitionEach(ctx, []Move{{Claim: c, To: t, Also: also}})[0]
	return r.Item, r.Err
}

// Move is one transition of TransitionEach: the claim, where it goes, and the
// extra ops committed with it.
type Move struct {
	Claim Claim
	To    Transition
	Also  []Op
}

// Moved is one result of TransitionEach: Transition's item and error.
type Moved struct {
	Item Item
	Err  error
}

// TransitionEach makes each move as Transition would, in one store round trip
// where the store allows (Backend.CommitEach): final writes that are ready
// together are committed together, and each lands or fails on its own (a move
// whose claim was lost, or whose extra op's condition failed, fails no other).
// It returns one result per move, in order.
func (p *Protocol) TransitionEach(ctx context.Context, ms []Move) []Moved {
	out := make([]Moved, len(ms))
	type move struct {
		at, base int
		it       Item
	}
	var mv []move
	var commits []pending
	now := p.now()
	for i, m := range ms {
		c, t := m.Claim, m.To
		if t.To == "" {
			out[i].Err = molt.Invalid("status", "transition needs a target status")
			continue
		}
		if err := ValidateKey(c.Kind, c.ID); err != nil {
			out[i].Err = err
			continue
		}
		opID := p.IDs.NewID()
		it := Item{Kind: c.Kind, ID: c.ID, LockKey: c.LockKey, Status: t.To, Active: true, Slot: c.Slot,
			SlotShard: c.SlotShard, Attempts: c.Attempts, Token: c.Token, Data: t.Data, UpdatedAt: now, OpID: opID}
		if t.Reason != nil {
			it.Reason = *t.Reason
		}
		set := Set{Status: t.To, Data: t.Data, Reason: t.Reason, UpdatedAt: now, OpID: opID}
		if t.Uncounted {
			set.AttemptsBase, it.AttemptsBase = Ptr(c.Attempts), c.Attempts
		}
		var release []Op
		if !t.Keep {
			set.Active, set.Slot, set.Token = Ptr(false), Ptr(false), Ptr("")
			release = releaseOps(it)
			it.Active, it.Slot, it.Token = false, false, ""
		}
		ops := append([]Op{UpdateItem{Kind: c.Kind, ID: c.ID, If: owned(c), Set: set}}, release...)
		base := len(ops)
		ops = append(ops, m.Also...)
		mv = append(mv, move{at: i, base: base, it: it})
		commits = append(commits, pending{kind: c.Kind, id: c.ID, opID: opID, ops: ops})
	}
	if len(commits) == 0 {
		return out
	}
	for j, err := range p.commitEach(ctx, commits) {
		m := mv[j]
		if err == nil {
			out[m.at].Item = m.it
			continue
		}
		if idx, ok := failedIndex(err); ok && idx >= m.base {
			out[m.at].Err = alsoFailed(commits[j].ops, idx, m.base)
			continue
		}
		out[m.at].Err = p.ownedErr(ms[m.at].Claim, "transition", err)
	}
	return out
}

// Requeue is the tick's move of a stale claim: seen is the item as the tick read
// it, running (or in another claimed status) with a heartbeat before staleBefore.
// While seen.Used() < maxAttempts it goes back to pending; otherwise to expired
// (e.g. StatusTimeout) with reason "timeout". Slot and lock are released in the
// same write. It returns ECONFLICT/ReasonChanged when the item moved on since it
// was read (another tick, or a late heartbeat): nothing is written.
func (p *Protocol) Requeue(ctx context.Context, seen Item, staleBefore time.Time, maxAttempts int, expired Status) (Item, error) {
	if !seen.Active || seen.Token == "" || !seen.HeartbeatAt.Before(staleBefore) {
		return Item{}, molt.Conflict(ReasonChanged, "%s %s is not stale", seen.Kind, seen.ID)
	}
	now := p.now()
	opID := p.IDs.NewID()
	to, reason := StatusPending, "requeued: heartbeat stale"
	if seen.Used() >= maxAttempts {
		to, reason = expired, "timeout: heartbeat stale and attempts spent"
	}
	ops := []Op{UpdateItem{Kind: seen.Kind, ID: seen.ID,
		If:  staleCond(seen, staleBefore),
		Set: Set{Status: to, Active: Ptr(false), Slot: Ptr(false), Token: Ptr(""), Reason: Ptr(reason), UpdatedAt: now, OpID: opID}}}
	ops = append(ops, releaseOps(seen)...)
	if err := p.commit(ctx, seen.Kind, seen.ID, opID, ops); err != nil {
		if _, ok := failedIndex(err); ok {
			return Item{}, molt.Conflict(ReasonChanged, "%s %s changed since it was read", seen.Kind, seen.ID)
		}
		return Item{}, fmt.Errorf("requeue %s %s: %w", seen.Kind, seen.ID, err)
	}
	it := seen
	it.Status, it.Active, it.Slot, it.Token, it.Reason, it.UpdatedAt, it.OpID = to, false, false, "", reason, now, opID
	return it, nil
}

// Expire is the tick's terminal move of a stale claim whose retry budget is spent:
// seen (as the tick read it, heartbeat before staleBefore) goes to status to with
// reason, releasing slot and lock, together with also (e.g. the apply's source run
// back to review) in one write. ECONFLICT/ReasonChanged when the item moved on.
func (p *Protocol) Expire(ctx context.Context, seen Item, staleBefore time.Time, to Status, reason string, also ...Op) (Item, error) {
	if !seen.Active || seen.Token == "" || !seen.HeartbeatAt.Before(staleBefore) {
		return Item{}, molt.Conflict(ReasonChanged, "%s %s is not stale", seen.Kind, seen.ID)
	}
	now := p.now()
	opID := p.IDs.NewID()
	ops := []Op{UpdateItem{Kind: seen.Kind, ID: seen.ID, If: staleCond(seen, staleBefore),
		Set: Set{Status: to, Active: Ptr(false), Slot: Ptr(false), Token: Ptr(""), Reason: Ptr(reason), UpdatedAt: now, OpID: opID}}}
	ops = append(ops, releaseOps(seen)...)
	base := len(ops)
	ops = append(ops, also...)
	if err := p.commit(ctx, seen.Kind, seen.ID, opID, ops); err != nil {
		if idx, ok := failedIndex(err); ok {
			if idx >= base {
				return Item{}, alsoFailed(ops, idx, base)
			}
			return Item{}, molt.Conflict(ReasonChanged, "%s %s changed since it was read", seen.Kind, seen.ID)
		}
		return Item{}, fmt.Errorf("expire %s %s: %w", seen.Kind, seen.ID, err)
	}
	it := seen
	it.Status, it.Active, it.Slot, it.Token, it.Reason, it.UpdatedAt, it.OpID = to, false, false, "", reason, now, opID
	return it, nil
}

// Takeover claims a stale claimed item in place: seen (as the caller read it, its
// heartbeat before staleBefore) keeps its status, slot and lock, and gets
// attempts+1, a new token and a fresh heartbeat. It is how a checkpointed item
// (an apply in syncing) is resumed after its worker died, without ever letting
// go of its lock. The old claimer's writes fail from then on. ECONFLICT/
// ReasonChanged when the item is not stale as seen.
func (p *Protocol) Takeover(ctx context.Context, seen Item, staleBefore time.Time) (Claim, Item, error) {
	if !seen.Active || seen.Token == "" || !seen.HeartbeatAt.Before(staleBefore) {
		return Claim{}, Item{}, molt.Conflict(ReasonChanged, "%s %s is not stale", seen.Kind, seen.ID)
	}
	now := p.now()
	c := Claim{Kind: seen.Kind, ID: seen.ID, Attempts: seen.Attempts + 1, Token: p.IDs.NewID(), LockKey: seen.LockKey,
		Slot: seen.Slot, SlotShard: seen.SlotShard}
	opID := p.IDs.NewID()
	op := UpdateItem{Kind: seen.Kind, ID: seen.ID, If: staleCond(seen, staleBefore),
		Set: Set{Attempts: Ptr(c.Attempts), Token: Ptr(c.Token), HeartbeatAt: Ptr(now), UpdatedAt: now, OpID: opID}}
	if err := p.commit(ctx, seen.Kind, seen.ID, opID, []Op{op}); err != nil {
		if _, ok := failedIndex(err); ok {
			return Claim{}, Item{}, molt.Conflict(ReasonChanged, "%s %s changed since it was read", seen.Kind, seen.ID)
		}
		return Claim{}, Item{}, fmt.Errorf("take over %s %s: %w", seen.Kind, seen.ID, err)
	}
	it := seen
	it.Attempts, it.Token, it.HeartbeatAt, it.UpdatedAt, it.OpID = c.Attempts, c.Token, now, now, opID
	return c, it, nil
}

func staleCond(seen Item, staleBefore time.Time) Cond {
	return Cond{Statuses: []Status{seen.Status}, Attempts: Ptr(seen.Attempts), Token: seen.Token,
		Active: Ptr(true), StaleBefore: staleBefore}
}

// Change is an unclaimed move of an item (a reviewer's approve or reject, a retry).
type Change struct {
	From         []Status // the item's status must be one of these
	Attempts     int      // and its attempts must equal this (as the caller saw)
	To           Status
	AttemptsBase *int    // e.g. a retry: attempts_base = attempts
	Data         []byte  // nil keeps it
	Reason       *string // nil keeps it
}

// Update applies an unclaimed change to kind/id together with also, atomically. The
// item must not be claimed. It returns ECONFLICT/ReasonChanged when the item is not
// in ch.From at ch.Attempts (or is claimed), ECONFLICT/ReasonAlsoFailed when an
// extra op failed, ENOTFOUND when absent.
func (p *Protocol) Update(ctx context.Context, kind Kind, id string, ch Change, also ...Op) (Item, error) {
	if err := ValidateKey(kind, id); err != nil {
		return Item{}, err
	}
	if len(ch.From) == 0 || ch.To == "" {
		return Item{}, molt.Invalid("status", "update needs from and to statuses")
	}
	cur, err := p.Backend.GetItem(ctx, kind, id)
	if err != nil {
		return Item{}, err
	}
	if cur.Active || cur.Attempts != ch.Attempts || !hasStatus(ch.From, cur.Status) {
		return Item{}, molt.Conflict(ReasonChanged, "%s %s is %s", kind, id, cur.Status)
	}
	now := p.now()
	opID := p.IDs.NewID()
	ops := []Op{UpdateItem{Kind: kind, ID: id,
		If:  Cond{Statuses: ch.From, Attempts: Ptr(ch.Attempts), Active: Ptr(false)},
		Set: Set{Status: ch.To, AttemptsBase: ch.AttemptsBase, Data: ch.Data, Reason: ch.Reason, UpdatedAt: now, OpID: opID}}}
	ops = append(ops, also...)
	if err := p.commit(ctx, kind, id, opID, ops); err != nil {
		if idx, ok := failedIndex(err); ok {
			if idx >= 1 {
				return Item{}, alsoFailed(ops, idx, 1)
			}
			return Item{}, molt.Conflict(ReasonChanged, "%s %s changed since it was read", kind, id)
		}
		return Item{}, fmt.Errorf("update %s %s: %w", kind, id, err)
	}
	it := cur
	it.Status, it.UpdatedAt, it.OpID = ch.To, now, opID
	if ch.AttemptsBase != nil {
		it.AttemptsBase = *ch.AttemptsBase
	}
	if ch.Data != nil {
		it.Data = ch.Data
	}
	if ch.Reason != nil {
		it.Reason = *ch.Reason
	}
	return it, nil
}

// commit runs ops whose first op writes kind/id with opID (see commitEach).
func (p *Protocol) commit(ctx context.Context, kind Kind, id, opID string, ops []Op) error {
	return p.commitEach(ctx, []pending{{kind: kind, id: id, opID: opID, ops: ops}})[0]
}

// pending is one commit of commitEach: ops whose first op writes kind/id with
// opID.
type pending struct {
	kind  Kind
	id    string
	opID  string
	ops   []Op
	tried error // the last unknown outcome (the commit was tried and read back)
}

// commitEach runs each of cs, independently: alone with Backend.Commit, several
// with Backend.CommitEach, in one round trip. When a commit's outcome is
// unknown it reads the item back: opID on the item means the commit was
// applied. When the read-back shows it was not, and the failure was not a
// condition, the commit is tried again (the conditions make that safe) up to
// p.tries() times, together with the others still to try. A condition failure
// after an unknown outcome is also checked against opID: the earlier try may
// have landed late. When the read-back itself fails the outcome stays unknown:
// the write is not sent again blind (an op whose condition its own landing
// does not break, such as a heartbeat's or an extra op's, would apply twice)
// and a condition failure is not reported as a refusal (the write may be the
// one that broke it). Each result is nil, a *ConditionFailed, or EUNAVAILABLE.
func (p *Protocol) commitEach(ctx context.Context, cs []pending) []error {
	errs := make([]error, len(cs))
	todo := make([]int, len(cs))
	for i := range cs {
		todo[i] = i
	}
	for try := 0; try < p.tries() && len(todo) > 0; try++ {
		var res []error
		if len(todo) == 1 {
			res = []error{p.Backend.Commit(ctx, cs[todo[0]].ops...)}
		} else {
			ops := make([][]Op, len(todo))
			for j, i := range todo {
				ops[j] = cs[i].ops
			}
			res = p.Backend.CommitEach(ctx, ops...)
		}
		var again []int
		for j, i := range todo {
			c := &cs[i]
			err := res[j]
			if err == nil {
				continue
			}
			if _, ok := failedIndex(err); ok {
				errs[i] = err
				if c.tried == nil {
					continue
				}
				switch p.landed(ctx, c.kind, c.id, c.opID) {
				case wrote:
					errs[i] = nil
				case unknown:
					errs[i] = molt.Unavailable(c.tried, "%s %s: outcome unknown, the store could not be read back", c.kind, c.id)
				}
				continue
			}
			if ctx.Err() != nil {
				// The caller gave up; we cannot tell, so read back once without it.
				rctx, cancel := detached(ctx)
				got := p.landed(rctx, c.kind, c.id, c.opID)
				cancel()
				if got != wrote {
					errs[i] = molt.Unavailable(err, "%s %s: write abandoned", c.kind, c.id)
				}
				continue
			}
			c.tried = err
			switch p.landed(ctx, c.kind, c.id, c.opID) {
			case wrote:
			case unknown:
				errs[i] = molt.Unavailable(err, "%s %s: outcome unknown, the store could not be read back", c.kind, c.id)
			default:
				again = append(again, i)
			}
		}
		todo = again
	}
	for _, i := range todo {
		errs[i] = molt.Unavailable(cs[i].tried, "%s %s: store unavailable", cs[i].kind, cs[i].id)
	}
	return errs
}

// readBack is what a read-back found out about a write.
type readBack int

const (
	notWritten readBack = iota // the item does not carry the write's op id
	wrote                      // it does: the write was applied
	unknown                    // the item could not be read
	absent                     // Delete: the item does not exist
	present                    // Delete: the item exists
)

// landed reads the item back and reports whether the write opID was applied.
func (p *Protocol) landed(ctx context.Context, kind Kind, id, opID string) readBack {
	for i := 0; i < 3; i++ {
		it, err := p.Backend.GetItem(ctx, kind, id)
		if err == nil {
			if it.OpID == opID {
				return wrote
			}
			return notWritten
		}
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return notWritten
		}
		if ctx.Err() != nil {
			break
		}
	}
	return unknown
}

func (p *Protocol) ownedErr(c Claim, what string, err error) error {
	if _, ok := failedIndex(err); ok {
		return lost(c, what)
	}
	return fmt.Errorf("%s %s %s: %w", what, c.Kind, c.ID, err)
}

func owned(c Claim) Cond {
	return Cond{Attempts: Ptr(c.Attempts), Token: c.Token, Active: Ptr(true)}
}

// releaseOps ends the claim of it: its slot when it holds one (whatever the
// kind's budget is now, so the counter stays exact), and its lock.
func releaseOps(it Item) []Op {
	var ops []Op
	if it.Slot {
		ops = append(ops, AdjustSlots{Kind: it.Kind, Shard: it.SlotShard, Delta: -1})
	}
	if it.LockKey != "" {
		ops = append(ops, ReleaseLock{Key: it.LockKey, Holder: Holder(it.Kind, it.ID)})
	}
	return ops
}

func lost(c Claim, what string) error {
	return &molt.Error{Code: molt.ELOSTCLAIM, Reason: "lost_claim",
		Message: fmt.Sprintf("%s %s %s: claim at attempt %d is no longer held", what, c.Kind, c.ID, c.Attempts)}
}

// alsoFailed reports that ops[idx], the extra op idx-base, failed its
// condition. The op itself travels in the error (FailedOp), never in what an
// API client sees.
func alsoFailed(ops []Op, idx, base int) error {
	var op Op
	if idx >= 0 && idx < len(ops) {
		op = ops[idx]
	}
	return &molt.Error{Code: molt.ECONFLICT, Reason: ReasonAlsoFailed,
		Message: fmt.Sprintf("condition of extra op %d (%s) failed", idx-base, opName(op)),
		Err:     &ConditionFailed{Index: idx - base, Op: op}}
}

// FailedOp returns the extra op whose condition failed, from an error a
// Protocol verb returned with ReasonAlsoFailed (nil for any other error), so a
// caller can tell which of its ops met a change (a session's next seq, a lock)
// by what it is, not by where it was.
func FailedOp(err error) Op {
	if molt.ErrorReason(err) != ReasonAlsoFailed {
		return nil
	}
	var cf *ConditionFailed
	if errors.As(err, &cf) {
		return cf.Op
	}
	return nil
}

func opName(op Op) string {
	if op == nil {
		return "unknown"
	}
	return fmt.Sprintf("%T", op)
}

func failedIndex(err error) (int, bool) {
	var cf *ConditionFailed
	if errors.As(err, &cf) {
		return cf.Index, true
	}
	return 0, false
}

func hasStatus(set []Status, s Status) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}
