package work

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
)

// Policy is one kind's claim policy, read from settings at each pass.
type Policy struct {
	Kind        Kind
	Budget      int           // concurrent claims allowed; <= 0 unlimited
	Timeout     time.Duration // a heartbeat older than this is stale
	MaxAttempts int           // claims allowed since the last retry
	Expired     Status        // where a stale item with its attempts spent goes
	// Claimed lists the statuses a claimed item can be in (default: running).
	Claimed []Status
	// ResendAfter: a pending item untouched this long gets its wake-up re-sent
	// (default one minute), covering a message that was lost or dead-lettered.
	ResendAfter time.Duration
	// Resume lists claimed statuses (among Claimed) whose stale items are not
	// returned to pending but resumed in place: the tick re-sends their wake-up and
	// the worker takes the claim over (Protocol.Takeover), keeping slot and lock —
	// e.g. an apply in syncing, which must not let go of its workspace lock.
	Resume []Status
	// OnExpire, when set, returns extra ops committed with a stale item's terminal
	// move (e.g. an auto apply's source run back to review, a system line).
	OnExpire func(ctx context.Context, it Item) ([]Op, error)
	// Heartbeat is how often a claim's keep-alive beats (default Timeout/4, at
	// most a minute; always under the timeout, so a live claim never looks
	// stale).
	Heartbeat time.Duration
	// AttemptTimeout bounds one attempt (0: only the handler's deadline).
	AttemptTimeout time.Duration
	// CommitMargin is kept free before the attempt's deadline for its final
	// write, which runs detached from the handler's context and bounded by it
	// (default 10 s).
	CommitMargin time.Duration
	// WakeNext is how many of the kind's oldest pending items the executor
	// wakes whenever one of its items ends or is given back, so a wake-up
	// refused for a full budget need not wait for the tick's re-send. 0: only
	// after this executor refused a claim for a full budget, and then the
	// budget's worth, at most 4 (a busy kind such as turns pays no listing per
	// item otherwise; a refusal seen by another instance waits for the tick).
	WakeNext int
	// Expiry, when set, chooses a stale item's terminal status and reason instead
	// of Expired and the generic timeout reason (e.g. an apply whose publish kept
	// failing ends failed with its last failure reason, not timeout). An empty
	// status or reason keeps the default.
	Expiry func(it Item) (Status, string)
}

func (p Policy) withDefaults() Policy {
	if p.Heartbeat <= 0 {
		p.Heartbeat = min(p.Timeout/4, time.Minute)
		if p.Heartbeat <= 0 {
			p.Heartbeat = time.Minute
		}
	}
	if p.CommitMargin <= 0 {
		p.CommitMargin = 10 * time.Second
	}
	return p
}

// Maintainer runs the tick's bounded maintenance pass over every kind.
type Maintainer struct {
	Protocol *Protocol
	Queue    queue.Sender
	Policies func(ctx context.Context) ([]Policy, error)
	// Limit bounds the work of one pass per kind and status (default 100): the
	// stale claims it moves or wakes, and the pending items it looks at. Claimed
	// items are paged through until Limit stale ones are found, so a stale claim
	// behind many fresh ones is reached (their number is the kind's budget, which
	// may exceed Limit).
	Limit  int
	Logger *slog.Logger
}

// Result counts what one pass did.
type Result struct {
	Requeued int `json:"requeued"` // stale claims returned to pending
	Expired  int `json:"expired"`  // stale claims made terminal
	Resent   int `json:"resent"`   // wake-ups re-sent for pending items
	Raced    int `json:"raced"`    // items another writer moved first (harmless)
	Resumed  int `json:"resumed"`  // stale checkpointed claims woken for takeover
}

// RunOnce runs one pass. Two passes may run at once: every move is a conditional
// write on what the pass read, so the loser of a race writes nothing (Raced), and a
// duplicate wake-up is harmless by the queue's contract. A kind whose pass fails
// (its store reads, its queue) does not stop the passes of the other kinds; the
// failures are returned together.
func (m *Maintainer) RunOnce(ctx context.Context) (Result, error) {
	return m.eachKind(ctx, "maintain", m.pass)
}

// eachKind runs pass for every kind's policy; one kind's failure does not stop
// the others'.
func (m *Maintainer) eachKind(ctx context.Context, what string, pass func(context.Context, Policy, *Result) error) (Result, error) {
	var res Result
	pols, err := m.Policies(ctx)
	if err != nil {
		return res, fmt.Errorf("read policies: %w", err)
	}
	var errs []error
	for _, pol := range pols {
		if err := pass(ctx, pol, &res); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, pol.Kind, err))
		}
	}
	return res, errors.Join(errs...)
}

func (m *Maintainer) limit() int {
	if m.Limit > 0 {
		return m.Limit
	}
	return 100
}

func (m *Maintainer) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}

// expire makes a stale item with its attempts spent terminal, with the policy's
// extra ops.
func (m *Maintainer) expire(ctx context.Context, pol Policy, it Item, staleBefore time.Time, to Status, res *Result) error {
	var also []Op
	if pol.OnExpire != nil {
		ops, err := pol.OnExpire(ctx, it)
		if err != nil {
			return fmt.Errorf("on expire %s: %w", it.ID, err)
		}
		also = ops
	}
	reason := "timeout: heartbeat stale and attempts spent"
	if pol.Expiry != nil {
		st, r := pol.Expiry(it)
		if st != "" {
			to = st
		}
		if r != "" {
			reason = r
		}
	}
	_, err := m.Protocol.Expire(ctx, it, staleBefore, to, reason, also...)
	switch {
	case molt.ErrorCode(err) == molt.ECONFLICT:
		res.Raced++
		return nil
	case err != nil:
		return err
	}
	m.logger().InfoContext(ctx, "stale claim expired", slog.String("kind", string(it.Kind)),
		slog.String("id", it.ID), slog.String("status", string(to)), slog.Int("attempts", it.Attempts))
	res.Expired++
	return nil
}

func (m *Maintainer) pass(ctx context.Context, pol Policy, res *Result) error {
	now := m.Protocol.now()
	claimed := pol.Claimed
	if len(claimed) == 0 {
		claimed = []Status{StatusRunning}
	}
	expired := pol.Expired
	if expired == "" {
		expired = StatusTimeout
	}
	staleBefore := now.Add(-pol.Timeout)
	for _, st := range claimed {
		if err := m.stale(ctx, pol, st, staleBefore, expired, res); err != nil {
			return err
		}
	}
	resendAfter := pol.ResendAfter
	if resendAfter <= 0 {
		resendAfter = time.Minute
	}
	pg, err := m.Protocol.Backend.ListItems(ctx, ListQuery{Kind: pol.Kind, Status: StatusPending, Oldest: true, Page: page.Query{Limit: min(m.limit(), page.MaxLimit)}})
	if err != nil {
		return err
	}
	for _, it := range pg.Items {
		if it.UpdatedAt.After(now.Add(-resendAfter)) {
			continue // its own wake-up is recent
		}
		if err := m.Queue.Send(ctx, queue.Message{Kind: string(it.Kind), ID: it.ID}); err != nil {
			return fmt.Errorf("resend %s: %w", it.ID, err)
		}
		res.Resent++
	}
	return nil
}

// stale handles the stale claims of pol's kind in status st: up to Limit of them,
// paging through the listing (oldest first) until that many are found or it ends.
func (m *Maintainer) stale(ctx context.Context, pol Policy, st Status, staleBefore time.Time, expired Status, res *Result) error {
	handled, cursor := 0, ""
	for {
		pg, err := m.Protocol.Backend.ListItems(ctx, ListQuery{Kind: pol.Kind, Status: st, Oldest: true,
			Page: page.Query{Cursor: cursor, Limit: min(m.limit(), page.MaxLimit)}})
		if err != nil {
			return err
		}
		for _, it := range pg.Items {
			if !it.Active || !it.HeartbeatAt.Before(staleBefore) {
				continue
			}
			if handled >= m.limit() {
				return nil // the next pass goes on
			}
			handled++
			if err := m.move(ctx, pol, it, staleBefore, expired, res); err != nil {
				return err
			}
		}
		if pg.Next == "" {
			return nil
		}
		cursor = pg.Next
	}
}

// move handles one stale claim: expired when its attempts are spent, woken for a
// takeover in a Resume status, returned to pending otherwise.
func (m *Maintainer) move(ctx context.Context, pol Policy, it Item, staleBefore time.Time, expired Status, res *Result) error {
	if it.Used() >= pol.MaxAttempts {
		return m.expire(ctx, pol, it, staleBefore, expired, res)
	}
	if hasStatus(pol.Resume, it.Status) {
		// Resumed in place by the worker's takeover; only wake it.
		if err := m.Queue.Send(ctx, queue.Message{Kind: string(it.Kind), ID: it.ID}); err != nil {
			m.logger().WarnContext(ctx, "wake-up not sent", slog.String("id", it.ID), slog.String("error", err.Error()))
		} else {
			res.Resumed++
			res.Resent++
		}
		return nil
	}
	got, err := m.Protocol.Requeue(ctx, it, staleBefore, pol.MaxAttempts, expired)
	switch {
	case molt.ErrorCode(err) == molt.ECONFLICT:
		res.Raced++
		return nil
	case err != nil:
		return err
	}
	m.logger().InfoContext(ctx, "stale claim", slog.String("kind", string(it.Kind)),
		slog.String("id", it.ID), slog.String("status", string(got.Status)), slog.Int("attempts", it.Attempts))
	if got.Status != StatusPending {
		res.Expired++
		return nil
	}
	res.Requeued++
	if err := m.Queue.Send(ctx, queue.Message{Kind: string(it.Kind), ID: it.ID}); err != nil {
		// The next pass re-sends; the item is safe in the store.
		m.logger().WarnContext(ctx, "wake-up not sent", slog.String("id", it.ID), slog.String("error", err.Error()))
	} else {
		res.Resent++
	}
	return nil
}

// Recover is the start-up pass of a process that owns its store exclusively
// (`molt serve` holds a lock on its data directory): every claim it finds was
// held by its previous incarnation, which is gone, so none waits out its
// timeout. A claim in a Resume status with attempts left is abandoned
// (Protocol.Abandon) and woken, so the executor takes it over at once; every
// other claim is requeued, or ended when its attempts are spent, as the tick
// would a stale one. Then the wake-up of every pending item is sent again (the
// in-process queue did not survive the restart). Never run it where another
// process may hold live claims on the same store (Lambda): there the tick's
// timeouts decide.
func (m *Maintainer) Recover(ctx context.Context) (Result, error) {
	return m.eachKind(ctx, "recover", m.recoverKind)
}

func (m *Maintainer) recoverKind(ctx context.Context, pol Policy, res *Result) error {
	claimed := pol.Claimed
	if len(claimed) == 0 {
		claimed = []Status{StatusRunning}
	}
	expired := pol.Expired
	if expired == "" {
		expired = StatusTimeout
	}
	// Every heartbeat so far is before this: each claim counts as stale.
	staleBefore := m.Protocol.now().Add(time.Second)
	for _, st := range claimed {
		err := m.each(ctx, pol.Kind, st, func(it Item) error {
			if !it.Active {
				return nil
			}
			if hasStatus(pol.Resume, it.Status) && it.Used() < pol.MaxAttempts {
				got, err := m.Protocol.Abandon(ctx, it)
				if molt.ErrorCode(err) == molt.ECONFLICT {
					res.Raced++
					return nil
				}
				if err != nil {
					return err
				}
				it = got
			}
			return m.move(ctx, pol, it, staleBefore, expired, res)
		})
		if err != nil {
			return err
		}
	}
	return m.each(ctx, pol.Kind, StatusPending, func(it Item) error {
		if err := m.Queue.Send(ctx, queue.Message{Kind: string(it.Kind), ID: it.ID}); err != nil {
			return fmt.Errorf("resend %s: %w", it.ID, err)
		}
		res.Resent++
		return nil
	})
}

// each calls fn for every item of kind in status st, oldest first.
func (m *Maintainer) each(ctx context.Context, kind Kind, st Status, fn func(Item) error) error {
	cursor := ""
	for {
		pg, err := m.Protocol.Backend.ListItems(ctx, ListQuery{Kind: kind, Status: st, Oldest: true,
			Page: page.Query{Cursor: cursor, Limit: page.MaxLimit}})
		if err != nil {
			return err
		}
		for _, it := range pg.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if pg.Next == "" {
			return nil
		}
		cursor = pg.Next
	}
}
