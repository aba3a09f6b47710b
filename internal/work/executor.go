package work

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/queue"
)

// The attempt executor: the one lifecycle of every kind of background work
// (River's job executor is the model). A kind supplies its Policy, a Prepare
// function that turns a claimable item into an attempt, and the attempt
// itself; the executor does the rest, the same way for every kind:
//
//  1. the wake-up: read the item (a wake-up is only a hint);
//  2. the claim (pending → running, budget and lock in one write) or the
//     takeover of a stale checkpointed claim (Policy.Resume);
//  3. the keep-alive: a heartbeat every Policy.Heartbeat; a lost claim
//     cancels the attempt's context with ErrClaimLost as its cause, and the
//     executor then writes nothing more;
//  4. the deadline: the attempt's context ends Policy.CommitMargin before the
//     handler's deadline (a Lambda's), or after Policy.AttemptTimeout;
//  5. the final write of the Outcome, with a context detached from the
//     handler's and bounded by the commit margin, so a result that is ready is
//     not lost because the invocation is ending;
//  6. the wake-ups: the item itself when given back, the items the outcome
//     names, and the next pending items of the kind (a slot was freed).

// Errors an attempt's context ends with (context.Cause).
var (
	// ErrClaimLost: a heartbeat found the claim no longer the attempt's.
	ErrClaimLost = errors.New("claim lost")
	// ErrAttemptDeadline: the attempt reached its own deadline.
	ErrAttemptDeadline = errors.New("attempt deadline reached")
)

// AttemptFunc runs one claimed attempt and says how it ended. It must write
// nothing that outlives a lost claim except under its own attempt's keys (the
// executor's final write is what makes an outcome visible).
type AttemptFunc func(ctx context.Context, a *Attempt) Outcome

// Executor runs the attempts of one kind. It is a queue.Handler. C is what
// the kind reads with its policy and hands to Prepare (e.g. the settings), so
// one read serves both.
type Executor[C any] struct {
	Protocol *Protocol
	Queue    queue.Sender
	Logger   *slog.Logger
	Kind     Kind
	// Policy returns the kind's policy for one wake-up (budget, heartbeat,
	// timeouts, attempts), e.g. read from the settings. Required.
	Policy func(ctx context.Context) (Policy, C, error)
	// Prepare is called with a claimable item (pending, or a stale
	// checkpointed claim to resume) before the claim. It returns the attempt
	// to run, or nil to leave the item as it is and drop the wake-up (a turn
	// waiting for its session's previous turn; an item Prepare has ended
	// itself because it can never run). An error is returned to the queue, so
	// the wake-up is delivered again. Required.
	Prepare func(ctx context.Context, it Item, pol Policy, cfg C) (AttemptFunc, error)
	// Next, when set, returns the items to wake after an item of the kind
	// ended or was given back (a slot and maybe a lock were freed). Unset: the
	// Policy.WakeNext oldest pending items of the kind.
	Next func(ctx context.Context, ended Item, pol Policy) ([]string, error)

	starved atomic.Bool   // a claim was refused for a full budget since the last wake of the next items
	freed   atomic.Uint64 // final writes that looked for the next items (wakeNext), ever
	fin     finisher      // final writes ready together, committed together
}

// maxFinishes bounds the final writes committed in one round trip.
const maxFinishes = 32

// finisher coalesces the final writes of an executor's attempts that are ready
// at the same time into one Protocol.TransitionEach, the way SQLite's group
// commit coalesces writes: the caller that finds no write in flight leads
// (commits what is queued, its own first, with its own context), then hands the
// lead to the first write still queued; a lone final write never waits for
// company.
type finisher struct {
	mu      sync.Mutex
	queue   []*finish
	leading bool
}

// finish is one final write waiting for its round trip.
type finish struct {
	ctx  context.Context
	move Move
	done chan Moved    // capacity 1
	lead chan struct{} // capacity 1
}

// transition is Protocol.Transition through the executor's finisher.
func (e *Executor[C]) transition(ctx context.Context, c Claim, t Transition, also ...Op) (Item, error) {
	f := &finish{ctx: ctx, move: Move{Claim: c, To: t, Also: also}, done: make(chan Moved, 1), lead: make(chan struct{}, 1)}
	fin := &e.fin
	fin.mu.Lock()
	fin.queue = append(fin.queue, f)
	lead := !fin.leading
	fin.leading = true
	fin.mu.Unlock()
	if !lead {
		select {
		case r := <-f.done:
			return r.Item, r.Err
		case <-f.lead:
		}
	}
	e.leadFinishes()
	r := <-f.done
	return r.Item, r.Err
}

// leadFinishes commits the queued final writes (the leader's is the first),
// delivers their results, then hands the lead on.
func (e *Executor[C]) leadFinishes() {
	fin := &e.fin
	// Let the attempts that are ending too (a batch's, claimed together)
	// queue their final writes first: a yield, not a wait.
	runtime.Gosched()
	fin.mu.Lock()
	n := min(len(fin.queue), maxFinishes)
	batch := slices.Clone(fin.queue[:n])
	fin.queue = slices.Delete(fin.queue, 0, n)
	fin.mu.Unlock()
	ms := make([]Move, len(batch))
	for i, f := range batch {
		ms[i] = f.move
	}
	for i, r := range e.Protocol.TransitionEach(batch[0].ctx, ms) {
		batch[i].done <- r
	}
	fin.mu.Lock()
	if len(fin.queue) > 0 {
		fin.queue[0].lead <- struct{}{}
	} else {
		fin.leading = false
	}
	fin.mu.Unlock()
}

var _ queue.BatchHandler = (*Executor[struct{}])(nil)

// Attempt is one claimed attempt, as its AttemptFunc sees it.
type Attempt struct {
	Claim Claim
	// Item is the item as claimed (Checkpoint keeps it current).
	Item   Item
	Policy Policy
	// Resumed: a takeover of a stale checkpointed claim, not a fresh claim.
	Resumed bool
	Start   time.Time

	proto  *Protocol
	parent context.Context // the handler's
	ctx    context.Context // the attempt's
}

// Interrupted reports whether the handler's own context ended (the process is
// stopping, or the invocation ended): the attempt should give the item back.
func (a *Attempt) Interrupted() bool { return a.parent.Err() != nil }

// DeadlineHit reports whether the attempt reached its own deadline.
func (a *Attempt) DeadlineHit() bool {
	return a.parent.Err() == nil && errors.Is(context.Cause(a.ctx), ErrAttemptDeadline)
}

// AttemptsLeft reports whether the item may be claimed again after this
// attempt: its attempts since the last retry are under Policy.MaxAttempts.
func (a *Attempt) AttemptsLeft() bool { return a.Item.Used() < a.Policy.MaxAttempts }

// Checkpoint moves the claimed item to status to with data, keeping the claim
// (slot, lock, token): e.g. an apply's running → syncing, after which a crash
// resumes instead of starting over. ELOSTCLAIM when the claim is gone.
func (a *Attempt) Checkpoint(ctx context.Context, to Status, data []byte) error {
	it, err := a.proto.Transition(ctx, a.Claim, Transition{To: to, Keep: true, Data: data, Reason: Ptr("")})
	if err != nil {
		return err
	}
	a.Item.Status, a.Item.OpID, a.Item.Reason, a.Item.UpdatedAt = it.Status, it.OpID, "", it.UpdatedAt
	if data != nil {
		a.Item.Data = data
	}
	return nil
}

// Confirm checks, with one strongly consistent read and no write, that the
// claim is still the attempt's: ELOSTCLAIM when it is not (the attempt must
// then stop and write nothing more). An attempt calls it before side effects
// outside the store, such as artifacts, so a stale attempt stops at the first
// of them instead of at its final write.
func (a *Attempt) Confirm(ctx context.Context) error { return a.proto.Owns(ctx, a.Claim) }

type verb int

const (
	verbEnd      verb = iota // a transition that ends the claim
	verbGiveBack             // back to pending
	verbRelease              // keep the claim, let the tick resume it now
	verbLeave                // write nothing
)

// Outcome is how an attempt ended: End, GiveBack, Release or Leave.
type Outcome struct {
	verb   verb
	to     Status
	reason string
	data   []byte
	also   []Op
	wake   bool
	// Build, when set, builds the final transition and its extra ops in place
	// of To/Reason/Data. When an extra op's condition fails it is called again
	// with that op (FailedOp), up to Retries times, so it can read again what
	// moved (a session's next seq) or end differently (the session is gone).
	Build   func(ctx context.Context, failed Op) (Transition, []Op, error)
	Retries int
	// RacedReason is the reason the item is given back with when the extra
	// ops kept failing past Retries (default "final_write_raced").
	RacedReason string
	// After runs once the final write has landed, with the item as written.
	After func(ctx context.Context, it Item)
	// Wake names items to wake after the final write (an apply it created, the
	// session's next turn).
	Wake []queue.Message
	// Err is returned to the queue after the outcome is written, so the
	// wake-up is delivered again (or reaches a synchronous caller).
	Err error
}

// End ends the claim with a move to status to (a terminal status, or any the
// kind allows), its reason and data (nil keeps it).
func End(to Status, reason string, data []byte) Outcome {
	return Outcome{verb: verbEnd, to: to, reason: reason, data: data}
}

// With returns o (an End) with extra ops committed in its final write, all or
// nothing (e.g. the pending apply an auto approval creates).
func (o Outcome) With(ops ...Op) Outcome { o.also = append(o.also, ops...); return o }

// EndWith ends the claim with the transition and extra ops build returns
// (called again with the failed op when one of them failed, up to retries).
func EndWith(build func(ctx context.Context, failed Op) (Transition, []Op, error), retries int) Outcome {
	return Outcome{verb: verbEnd, Build: build, Retries: retries}
}

// GiveBack returns the item to pending with reason (the attempt counts); wake
// sends its wake-up at once, otherwise the tick re-sends it (a natural
// backoff). data, when not nil, is written too.
func GiveBack(reason string, wake bool, data []byte) Outcome {
	return Outcome{verb: verbGiveBack, to: StatusPending, reason: reason, wake: wake, data: data}
}

// Release keeps the claim (status, slot, lock) but clears its heartbeat, so
// the tick resumes it (Policy.Resume) or ends it at its next pass: for a
// checkpointed item that must not let go of its lock.
func Release(reason string, data []byte) Outcome {
	return Outcome{verb: verbRelease, reason: reason, data: data}
}

// Leave writes nothing: the claim goes stale and the tick requeues it (the
// store could not be written; err goes back to the queue).
func Leave(err error) Outcome { return Outcome{verb: verbLeave, Err: err} }

// WithErr returns o with err returned to the queue after o is written.
func (o Outcome) WithErr(err error) Outcome { o.Err = err; return o }

// Then returns o with after run once its write has landed.
func (o Outcome) Then(after func(ctx context.Context, it Item)) Outcome { o.After = after; return o }

// Waking returns o with wake-ups sent after its write.
func (o Outcome) Waking(ms ...queue.Message) Outcome { o.Wake = append(o.Wake, ms...); return o }

func (e *Executor[C]) log() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

// Handle is the kind's queue handler: it reads the item the wake-up names and,
// when it is claimable, claims (or takes over) and runs it. A wake-up for an
// item that is gone, done or held by a live claim is dropped; so is one that
// meets a full budget, a held lock or a lost race (the item holding the slot or
// lock wakes the next ones when it ends, and the tick re-sends wake-ups of
// pending items). It returns an error only when the store could not be read or
// the attempt asked for it: the wake-up is then delivered again.
func (e *Executor[C]) Handle(ctx context.Context, m queue.Message) error {
	var err error
	e.HandleBatch(ctx, []queue.Message{m}, queue.Report{Done: func(_ int, got error) { err = got }})
	return err
}

// HandleBatch is Handle for several wake-ups at once (queue.BatchHandler): it
// reads their items (in one round trip with a BatchReader, else in parallel),
// reads the policy once, and claims the pending
// ones in one store round trip (Protocol.ClaimEach: each claim on its own
// conditions, the budget exact); the attempts then run at once, each with its
// own keep-alive and deadline, and their final writes that are ready together
// share a round trip (Protocol.TransitionEach). r.Done(i, err) reports ms[i]'s
// result, Handle's, as soon as it is known, and r.Ended(i) (when set) that its
// attempt has returned and its final write is under way. A second wake-up of
// one item in a batch is dropped.
func (e *Executor[C]) HandleBatch(ctx context.Context, ms []queue.Message, r queue.Report) {
	done := r.Done
	ended := func(int) {}
	if r.Ended != nil {
		ended = r.Ended
	}
	type job struct {
		i      int
		ctx    context.Context
		it     Item
		err    error
		fn     AttemptFunc
		resume bool
		c      Claim
	}
	var jobs []*job
	ids := map[string]bool{}
	for i, m := range ms {
		if m.Kind != string(e.Kind) || ValidateKey(e.Kind, m.ID) != nil {
			e.log().WarnContext(ctx, "not a "+string(e.Kind)+" wake-up; dropped", slog.String("kind", m.Kind))
			done(i, nil)
			continue
		}
		if ids[m.ID] {
			done(i, nil)
			continue
		}
		ids[m.ID] = true
		jobs = append(jobs, &job{i: i, ctx: obs.With(ctx, slog.String(string(e.Kind)+"_id", m.ID))})
	}
	read := func(j *job) { j.it, j.err = e.Protocol.Backend.GetItem(j.ctx, e.Kind, ms[j.i].ID) }
	br, batchRead := e.Protocol.Backend.(BatchReader)
	switch {
	case len(jobs) == 1:
		read(jobs[0])
	case batchRead:
		ids := make([]string, len(jobs))
		for k, j := range jobs {
			ids[k] = ms[j.i].ID
		}
		items, errs := br.GetItems(ctx, e.Kind, ids)
		for k, j := range jobs {
			j.it, j.err = items[k], errs[k]
		}
	default:
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() { read(j) })
		}
		wg.Wait()
	}
	jobs = slices.DeleteFunc(jobs, func(j *job) bool {
		switch {
		case molt.ErrorCode(j.err) == molt.ENOTFOUND:
			done(j.i, nil)
		case j.err != nil:
			done(j.i, fmt.Errorf("read %s %s: %w", e.Kind, ms[j.i].ID, j.err))
		default:
			return false
		}
		return true
	})
	if len(jobs) == 0 {
		return
	}
	pol, cfg, err := e.Policy(ctx)
	if err != nil {
		for _, j := range jobs {
			done(j.i, fmt.Errorf("%s policy: %w", e.Kind, err))
		}
		return
	}
	var fresh []*job
	var seen []Item
	jobs = slices.DeleteFunc(jobs, func(j *job) bool {
		it := j.it
		switch {
		case it.Status == StatusPending && !it.Active:
		case it.Active && hasStatus(pol.Resume, it.Status):
			if !it.HeartbeatAt.Before(e.staleBefore(pol)) || it.Used() >= pol.MaxAttempts {
				done(j.i, nil) // its owner is alive, or the tick ends it
				return true
			}
			j.resume = true
		default:
			done(j.i, nil)
			return true
		}
		fn, err := e.Prepare(j.ctx, it, pol, cfg)
		if err != nil || fn == nil {
			done(j.i, err)
			return true
		}
		j.fn = fn
		if j.resume {
			freed := e.freed.Load()
			if j.c, j.it, err = e.Protocol.Takeover(j.ctx, it, e.staleBefore(pol)); err != nil {
				done(j.i, e.notClaimed(j.ctx, it, pol, freed, err))
				return true
			}
			return false
		}
		fresh, seen = append(fresh, j), append(seen, it)
		return false
	})
	if len(fresh) > 0 {
		freed := e.freed.Load()
		for k, r := range e.Protocol.ClaimEach(ctx, seen, pol.Budget) {
			j := fresh[k]
			if j.c, j.err = r.Claim, r.Err; r.Err == nil {
				j.it = r.Item
			}
		}
		jobs = slices.DeleteFunc(jobs, func(j *job) bool {
			if j.resume || j.err == nil {
				return false
			}
			done(j.i, e.notClaimed(j.ctx, j.it, pol, freed, j.err))
			return true
		})
	}
	if len(jobs) == 1 {
		j := jobs[0]
		done(j.i, e.run(j.ctx, j.c, j.it, pol, j.fn, j.resume, func() { ended(j.i) }))
		return
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { done(j.i, e.run(j.ctx, j.c, j.it, pol, j.fn, j.resume, func() { ended(j.i) })) })
	}
	wg.Wait()
}

// notClaimed is a wake-up's result when its claim (or takeover) of it failed:
// nil for a refusal (a full budget, a held lock, a lost race), which drops the
// wake-up, the error otherwise.
func (e *Executor[C]) notClaimed(ctx context.Context, it Item, pol Policy, freed uint64, err error) error {
	if molt.ErrorReason(err) == ReasonBudgetFull {
		e.starved.Store(true)
		// An attempt that ended while this claim was under way (freed moved:
		// its final write may have landed just after the claim was refused,
		// a group commit returns both at once) and looked for refused claims
		// before starved was set woke nobody: if a slot is free now, wake the
		// item again rather than leave it to the tick. No end meanwhile, no
		// read.
		if e.freed.Load() != freed {
			if n, cerr := e.Protocol.Backend.ActiveCount(ctx, e.Kind); cerr == nil && n < pol.Budget {
				e.wake(ctx, queue.Message{Kind: string(e.Kind), ID: it.ID})
			}
		}
	}
	if molt.ErrorCode(err) == molt.ECONFLICT {
		e.log().DebugContext(ctx, string(e.Kind)+" not claimed", slog.String("id", it.ID),
			slog.String("reason", molt.ErrorReason(err)))
		return nil
	}
	return fmt.Errorf("claim %s %s: %w", e.Kind, it.ID, err)
}

// Run runs fn on a claim the caller already holds (Protocol.CreateClaimed: a
// rollback, which runs in the request that creates it), with the same
// keep-alive, deadline and final write as a claim Handle took. It returns the
// outcome's Err.
func (e *Executor[C]) Run(ctx context.Context, c Claim, it Item, fn AttemptFunc) error {
	ctx = obs.With(ctx, slog.String(string(e.Kind)+"_id", c.ID))
	pol, _, err := e.Policy(ctx)
	if err != nil {
		return fmt.Errorf("%s policy: %w", e.Kind, err)
	}
	return e.run(ctx, c, it, pol, fn, false, nil)
}

func (e *Executor[C]) staleBefore(pol Policy) time.Time { return e.Protocol.now().Add(-pol.Timeout) }

// run runs the attempt fn on the claim c; ended, when set, is called once fn
// has returned (the final write is still to come).
func (e *Executor[C]) run(ctx context.Context, c Claim, it Item, pol Policy, fn AttemptFunc, resumed bool, ended func()) error {
	pol = pol.withDefaults()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var deadline time.Time
	if pol.AttemptTimeout > 0 {
		deadline = time.Now().Add(pol.AttemptTimeout)
	}
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Add(-pol.CommitMargin).Before(deadline)) {
		deadline = dl.Add(-pol.CommitMargin)
	}
	if !deadline.IsZero() {
		var cancelDL context.CancelFunc
		actx, cancelDL = context.WithDeadlineCause(actx, deadline, ErrAttemptDeadline)
		defer cancelDL()
	}
	a := &Attempt{Claim: c, Item: it, Policy: pol, Resumed: resumed, Start: e.Protocol.now(), proto: e.Protocol, parent: ctx, ctx: actx}
	stop := e.Protocol.keepAlive(actx, c, pol.Heartbeat, func() { cancel(ErrClaimLost) }, e.log())
	out := fn(actx, a)
	stop()
	if ended != nil {
		ended()
	}
	if errors.Is(context.Cause(actx), ErrClaimLost) || molt.IsLostClaim(out.Err) {
		e.log().WarnContext(ctx, string(e.Kind)+" lost its claim; nothing more written",
			slog.String("id", c.ID), slog.Int("attempt", c.Attempts))
		return nil
	}
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), pol.CommitMargin)
	defer wcancel()
	return e.settle(wctx, a, out)
}

// settle writes the outcome and sends the wake-ups that follow.
func (e *Executor[C]) settle(ctx context.Context, a *Attempt, out Outcome) error {
	c := a.Claim
	attrs := []any{slog.String("id", c.ID), slog.Int("attempt", c.Attempts)}
	switch out.verb {
	case verbLeave:
		return out.Err
	case verbRelease:
		_, err := e.Protocol.Patch(ctx, c, ClaimPatch{Data: out.data, Reason: Ptr(clipReason(out.reason)), Stale: true})
		if err != nil && !molt.IsLostClaim(err) {
			e.log().WarnContext(ctx, "could not release the "+string(e.Kind)+"; the tick resumes it when stale",
				append(attrs, slog.String("error", err.Error()))...)
		}
		return out.Err
	case verbGiveBack:
		got, err := e.transition(ctx, c, Transition{To: StatusPending, Data: out.data, Reason: Ptr(clipReason(out.reason))})
		if err != nil {
			if !molt.IsLostClaim(err) {
				e.log().WarnContext(ctx, "could not give the "+string(e.Kind)+" back; the tick will",
					append(attrs, slog.String("error", err.Error()))...)
			}
			return out.Err
		}
		e.log().InfoContext(ctx, string(e.Kind)+" given back", append(attrs, slog.String("reason", out.reason))...)
		if out.wake {
			e.wake(ctx, queue.Message{Kind: string(e.Kind), ID: c.ID})
		}
		e.wakeNext(ctx, a, got, out)
		return out.Err
	}
	build := out.Build
	if build == nil {
		build = func(context.Context, Op) (Transition, []Op, error) {
			return Transition{To: out.to, Data: out.data, Reason: Ptr(clipReason(out.reason))}, out.also, nil
		}
	}
	retries := out.Retries
	if retries <= 0 {
		retries = 3
	}
	var failed Op
	for try := 0; ; try++ {
		t, also, err := build(ctx, failed)
		if err != nil {
			return errors.Join(fmt.Errorf("%s %s: final write: %w", e.Kind, c.ID, err), out.Err)
		}
		got, err := e.transition(ctx, c, t, also...)
		switch {
		case err == nil:
			e.log().InfoContext(ctx, string(e.Kind)+" "+string(t.To), append(attrs, slog.String("reason", deref(t.Reason)),
				slog.Duration("elapsed", e.Protocol.now().Sub(a.Start)))...)
			if out.After != nil {
				out.After(ctx, got)
			}
			e.wakeNext(ctx, a, got, out)
			return out.Err
		case molt.IsLostClaim(err):
			e.log().WarnContext(ctx, string(e.Kind)+" lost its claim before its final write; nothing written", attrs...)
			return nil
		case molt.ErrorReason(err) == ReasonAlsoFailed && try < retries:
			failed = FailedOp(err)
			continue
		case molt.ErrorReason(err) == ReasonAlsoFailed:
			// What the extra ops depend on kept moving: give the item back for
			// a later attempt rather than hold the claim.
			reason := out.RacedReason
			if reason == "" {
				reason = "final_write_raced"
			}
			if _, gerr := e.transition(ctx, c, Transition{To: StatusPending, Reason: &reason}); gerr != nil {
				e.log().WarnContext(ctx, "could not give the "+string(e.Kind)+" back; the tick will",
					append(attrs, slog.String("error", gerr.Error()))...)
			}
			return molt.Unavailable(err, "%s %s: the final write kept racing", e.Kind, c.ID)
		default:
			return errors.Join(fmt.Errorf("finish %s %s: %w", e.Kind, c.ID, err), out.Err)
		}
	}
}

// wakeNext sends the outcome's wake-ups and those of the next pending items of
// the kind (the ended item's slot, and maybe its lock, are free).
func (e *Executor[C]) wakeNext(ctx context.Context, a *Attempt, ended Item, out Outcome) {
	e.freed.Add(1) // before starved is read: see notClaimed
	for _, m := range out.Wake {
		e.wake(ctx, m)
	}
	var ids []string
	if e.Next != nil {
		var err error
		if ids, err = e.Next(ctx, ended, a.Policy); err != nil {
			e.log().WarnContext(ctx, "could not look for the next "+string(e.Kind)+"; the tick wakes it",
				slog.String("error", err.Error()))
			return
		}
	} else {
		n := a.Policy.WakeNext
		if n <= 0 {
			if !e.starved.Swap(false) {
				return
			}
			n = min(max(a.Policy.Budget, 1), 4)
		}
		pg, err := e.Protocol.Backend.ListItems(ctx, ListQuery{Kind: e.Kind, Status: StatusPending, Oldest: true,
			Page: page.Query{Limit: min(n, page.MaxLimit)}})
		if err != nil {
			e.log().WarnContext(ctx, "could not look for the next "+string(e.Kind)+"; the tick wakes it",
				slog.String("error", err.Error()))
			return
		}
		for _, it := range pg.Items {
			ids = append(ids, it.ID)
		}
	}
	for _, id := range ids {
		if id == ended.ID || slices.ContainsFunc(out.Wake, func(m queue.Message) bool { return m.ID == id && m.Kind == string(e.Kind) }) {
			continue
		}
		e.wake(ctx, queue.Message{Kind: string(e.Kind), ID: id})
	}
}

// wake sends a wake-up; a lost one only delays the item until the tick.
func (e *Executor[C]) wake(ctx context.Context, m queue.Message) {
	if e.Queue == nil {
		return
	}
	if err := e.Queue.Send(ctx, m); err != nil {
		e.log().WarnContext(ctx, "wake-up not sent; the tick re-sends it", slog.String("kind", m.Kind),
			slog.String("id", m.ID), slog.String("error", err.Error()))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func clipReason(s string) string {
	if len(s) <= MaxReason {
		return s
	}
	return s[:MaxReason]
}
