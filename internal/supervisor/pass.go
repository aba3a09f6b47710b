package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/molt-dev/molt/internal/a2a"
	"github.com/molt-dev/molt/internal/a2astate"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// eventRetention is how long an event item is kept.
const eventRetention = 90 * 24 * time.Hour

// Policy is the campaign kind's claim policy. A pass is short (its remote
// calls are bounded), so a stale one is requeued after two minutes; passes
// are not a retry budget, so attempts are unbounded. ResendAfter is the
// tick's interval: every tick wakes each idle campaign, and Prepare runs the
// ones that are due, so a heartbeat rounds up to the tick's.
func (s *Service) Policy() work.Policy {
	return work.Policy{Kind: KindCampaign, Budget: s.cfg.Budget, Timeout: 2 * time.Minute,
		MaxAttempts: math.MaxInt32, Expired: work.StatusTimeout, ResendAfter: s.cfg.Tick / 2,
		AttemptTimeout: time.Duration(s.cfg.MaxCalls+2) * s.cfg.CallTimeout}
}

func (s *Service) prepare(ctx context.Context, it work.Item, _ work.Policy, _ struct{}) (work.AttemptFunc, error) {
	cp, err := parse(it)
	if err != nil {
		s.log.WarnContext(ctx, "campaign data unreadable; left as it is", slog.String("campaign_id", it.ID))
		return nil, nil
	}
	switch now := s.clock.Now().UTC(); {
	case s.urgent(cp, now):
	case !s.heartbeat(cp, now):
		return nil, nil
	case s.quiet(ctx, cp):
		return nil, nil // nothing changed: no claim, no write
	}
	return func(ctx context.Context, a *work.Attempt) work.Outcome {
		// The claim's condition is the status and attempts, not the data: a
		// request queued (or a decision relayed) between the wake-up's read
		// and the claim is only in the item as it is now. No one else writes
		// it while the claim holds.
		cur, err := s.store.GetItem(ctx, KindCampaign, it.ID)
		if err != nil {
			return work.GiveBack("store_unavailable", false, nil)
		}
		if fresh, err := parse(cur); err == nil {
			cp = fresh
		}
		p := &pass{s: s, a: a, cp: cp, now: s.clock.Now().UTC(), calls: s.cfg.MaxCalls}
		return p.run(ctx)
	}, nil
}

// pass is one heartbeat of one campaign.
type pass struct {
	s     *Service
	a     *work.Attempt
	cp    Campaign
	now   time.Time
	calls int // remote calls left
	r     remote
	// authority: this pass read campaign/get and it agreed with the local
	// record (controller, epoch, held, unexpired).
	authority bool
}

var errNoCalls = errors.New("remote call budget of the pass spent")

func (p *pass) emit(typ, detail, task string) {
	p.cp.Events++
	p.cp.Outbox = append(p.cp.Outbox, Event{Seq: p.cp.Events, Type: typ, At: p.now, Detail: detail, TaskID: task})
}

// toObserver drops control with one CONTROL_CHANGED event.
func (p *pass) toObserver(why string) {
	if p.cp.Mode != ModeController {
		return
	}
	p.cp.Mode, p.authority = ModeObserver, false
	p.emit(EventControlChanged, "observer: "+why, "")
	p.s.log.Warn("campaign control lost", slog.String("campaign_id", p.cp.ID), slog.String("reason", why))
}

func (p *pass) call(ctx context.Context, method string, ext bool, params, result any) error {
	if p.calls <= 0 {
		return errNoCalls
	}
	p.calls--
	ctx, cancel := context.WithTimeout(ctx, p.s.cfg.CallTimeout)
	defer cancel()
	err := p.r.call(ctx, method, ext, params, result)
	if err != nil && ctx.Err() != nil {
		err = errors.Join(errUnknown, err)
	}
	return err
}

// policy is the execution policy every write carries: molt's own terms for
// remote-only work with no publication (no egress, no other workspaces, no
// auto-apply of what the campaign's runs propose).
var policy = map[string]any{"access": "workspace", "allowEgress": false, "allowCrossWorkspace": false, "autoApply": false}

func (p *pass) run(ctx context.Context) work.Outcome {
	p.cp.LastPass = p.now
	if p.cp.State == StateNew {
		p.cp.State = StateIdle
	}
	if err := p.connect(ctx); err != nil {
		p.escalations() // a person must hear of it, the remote down or not
		return p.end()
	}
	if p.cp.Capabilities.Control {
		p.readback(ctx)
		p.reconcile(ctx)
		p.actions(ctx)
		p.renew(ctx)
	} else {
		if p.cp.Mode == ModeController {
			p.toObserver("the remote no longer advertises campaign control")
		}
		p.actions(ctx) // a decision's finish or escalation writes nothing remote
	}
	p.observe(ctx)
	return p.end()
}

// end writes the campaign's new state, its events and the decisions they
// wake in one write.
func (p *pass) end() work.Outcome {
	ops := make([]work.Op, 0, 2*len(p.cp.Outbox))
	var wake []queue.Message
	for _, ev := range p.cp.Outbox {
		b, _ := json.Marshal(ev)
		ops = append(ops, work.CreateItem{Item: work.Item{Kind: KindEvent, ID: EventID(p.cp.ID, ev.Seq),
			Workspace: p.cp.Workspace, Status: StatusRecorded, Data: b, CreatedAt: p.now, UpdatedAt: p.now,
			OpID: p.s.ids.NewID(), ExpiresAt: p.now.Add(eventRetention)}})
		if op, ok := p.decisionOp(ev); ok {
			ops = append(ops, op)
			wake = append(wake, queue.Message{Kind: string(KindDecision), ID: DecisionID(p.cp.ID, ev.Seq)})
		}
	}
	p.cp.Outbox = nil
	return work.End(work.StatusPending, "", p.cp.encode()).With(ops...).Waking(wake...)
}

// connect reads the token and, when due, the card. A failure marks the
// remote unavailable (one REMOTE_UNAVAILABLE until it answers again).
func (p *pass) connect(ctx context.Context) error {
	tok, err := p.s.token(ctx, p.cp.Remote.TokenRef)
	if err != nil {
		p.unavailable(molt.ErrorReason(err))
		return err
	}
	p.r = remote{http: p.s.http, token: tok}
	caps := p.cp.Capabilities
	if caps == nil || p.cp.Unavailable != "" || p.now.Sub(caps.ReadAt) >= p.s.cfg.CardEvery {
		p.calls--
		cctx, cancel := context.WithTimeout(ctx, p.s.cfg.CallTimeout)
		got, err := discover(cctx, p.s.http, p.cp.Remote.CardURL)
		cancel()
		if err != nil {
			p.unavailable("card_" + reason(err))
			return err
		}
		got.ReadAt = p.now
		p.cp.Capabilities = &got
	}
	p.r.endpoint = p.cp.Capabilities.Endpoint
	p.cp.Unavailable = ""
	return nil
}

func (p *pass) unavailable(why string) {
	if why == "" {
		why = "unreachable"
	}
	if p.cp.Unavailable == "" {
		p.emit(EventRemoteUnavailable, why, "")
	}
	p.cp.Unavailable = why
}

type leaseResult struct {
	Controller     string `json:"controller"`
	Epoch          int    `json:"epoch"`
	LeaseExpiresAt string `json:"leaseExpiresAt"`
	State          string `json:"state"`
}

// readback reads campaign/get and checks the authority against it.
func (p *pass) readback(ctx context.Context) {
	var res struct {
		leaseResult
		Tasks []RemoteTask `json:"tasks"`
	}
	err := p.call(ctx, "campaign/get", true, map[string]any{"campaignId": p.cp.ID}, &res)
	var re *rpcError
	switch {
	case errors.As(err, &re) && re.Code == -32016:
		p.cp.Readback = &Readback{At: p.now}
	case err != nil:
		p.cp.Readback = nil
		if p.cp.Mode == ModeController {
			p.toObserver("readback failed: " + reason(err))
		}
		if !errors.As(err, &re) {
			p.unavailable(reason(err))
		}
		return
	default:
		exp, _ := time.Parse(time.RFC3339Nano, res.LeaseExpiresAt)
		p.cp.Readback = &Readback{At: p.now, Found: true, Controller: res.Controller, Epoch: res.Epoch,
			State: res.State, LeaseExpiresAt: exp, Tasks: res.Tasks}
	}
	if p.cp.Mode != ModeController {
		return
	}
	rb := p.cp.Readback
	switch {
	case !p.now.Before(p.cp.LeaseExpiresAt):
		p.toObserver("local lease expired")
	case !rb.Found:
		p.toObserver("the remote has no such campaign")
	case rb.Controller != p.cp.Controller:
		p.toObserver("another controller holds the lease")
	case rb.Epoch != p.cp.Epoch:
		p.toObserver("the epoch moved")
	case rb.State != "held":
		p.toObserver("the remote lease is " + rb.State)
	default:
		p.authority = true
	}
}

// reconcile asks campaign/getRequest about every open intent. Nothing is
// ever sent again: an intent the remote never saw ends not_seen.
func (p *pass) reconcile(ctx context.Context) {
	for _, in := range p.cp.OpenIntents() {
		var res struct {
			Seen   bool            `json:"seen"`
			State  string          `json:"state"`
			TaskID string          `json:"taskId"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		err := p.call(ctx, "campaign/getRequest", true, map[string]any{"requestId": in.RequestID}, &res)
		if err != nil {
			p.cp.setIntent(in.RequestID, func(i *Intent) { i.Status = IntentUnknown })
			continue
		}
		switch {
		case !res.Seen:
			p.cp.setIntent(in.RequestID, func(i *Intent) { i.Status, i.Error = IntentNotSeen, "" })
			if in.Method == "SendMessage" {
				p.cp.AttemptsUsed-- // it never reached the remote: the attempt was not made
				if p.cp.TaskID == "" && p.cp.State == StateSubmitted {
					p.cp.State = StateIdle
				}
			}
		case res.State == "pending":
			p.cp.setIntent(in.RequestID, func(i *Intent) { i.Status = IntentUnknown })
		case res.Error != nil:
			p.cp.setIntent(in.RequestID, func(i *Intent) { i.Status, i.Error = IntentRefused, (&rpcError{Code: res.Error.Code}).Error() })
		default:
			p.cp.setIntent(in.RequestID, func(i *Intent) { i.Status, i.TaskID = IntentDone, res.TaskID })
			switch in.Method {
			case "SendMessage":
				p.cp.TaskID, p.cp.TaskState = res.TaskID, a2astate.Submitted
			case "campaign/claim", "campaign/renew":
				// A lease call that landed: its result is the lease, but
				// authority comes only from an explicit claim's answer and a
				// readback; a landed claim is seen as held by us in the
				// next readback, so take it from there.
				var lr leaseResult
				if json.Unmarshal(res.Result, &lr) == nil && lr.Controller == p.cp.Controller {
					if exp, err := time.Parse(time.RFC3339Nano, lr.LeaseExpiresAt); err == nil && in.Method == "campaign/renew" &&
						p.cp.Mode == ModeController && lr.Epoch == p.cp.Epoch {
						p.cp.LeaseExpiresAt = exp
					}
				}
			}
		}
	}
}

// blocked reports whether an open intent blocks writes.
func (p *pass) blocked() bool { return len(p.cp.OpenIntents()) > 0 }

// write saves an intent (a conditional write on the pass's claim) and then
// makes the call. It reports the outcome; an unknown one leaves the intent
// unknown.
func (p *pass) write(ctx context.Context, method string, params map[string]any, text string, result any) (Intent, error) {
	in := Intent{RequestID: p.cp.ID + "." + p.s.ids.NewID(), Method: method, Status: IntentPending, At: p.now, Text: clip(text, 200)}
	p.cp.addIntent(in)
	if method == "SendMessage" {
		p.cp.AttemptsUsed++ // reserved before the call: an unknown send counts until reconciled
	}
	if err := p.a.Checkpoint(ctx, work.StatusRunning, p.cp.encode()); err != nil {
		return in, err // the claim is lost or the store failed: nothing was sent
	}
	switch method {
	case "SendMessage", "CancelTask":
		meta := map[string]any{"campaignId": p.cp.ID, "controller": p.cp.Controller, "epoch": p.cp.Epoch,
			"requestId": in.RequestID, "policy": policy}
		params["metadata"] = map[string]any{a2a.ExtCampaign: meta}
	default:
		params["requestId"] = in.RequestID
	}
	err := p.call(ctx, method, true, params, result)
	var re *rpcError
	switch {
	case err == nil:
		in.Status = IntentDone
	case errors.As(err, &re), errors.Is(err, errNoCalls):
		in.Status, in.Error = IntentRefused, reason(err)
		if method == "SendMessage" {
			p.cp.AttemptsUsed--
		}
	default:
		in.Status, in.Error = IntentUnknown, reason(err)
	}
	p.cp.setIntent(in.RequestID, func(i *Intent) { i.Status, i.Error = in.Status, in.Error })
	return in, err
}

// actions carries out the queued requests, oldest first, while no intent is
// open (a decision's finish or escalation makes no remote call). A request
// that cannot be carried out now is dropped with its reason in the log (its
// refusal is not an event); a decision's id is consumed once.
// escalations carries out the queued escalations only (they make no remote
// call), keeping every other request queued in its order: for a pass that
// cannot reach the remote.
func (p *pass) escalations() {
	kept := p.cp.Requests[:0:0]
	for _, r := range p.cp.Requests {
		if r.Action != ActionEscalate {
			kept = append(kept, r)
			continue
		}
		if p.take(r) {
			p.escalate(r)
		}
	}
	p.cp.Requests = kept
}

func (p *pass) actions(ctx context.Context) {
	for len(p.cp.Requests) > 0 {
		r := p.cp.Requests[0]
		local := r.Action == ActionFinish || r.Action == ActionEscalate
		if !local && (p.blocked() || p.calls <= 0) {
			break
		}
		p.cp.Requests = p.cp.Requests[1:]
		if !p.take(r) {
			continue
		}
		if !local && !p.cp.Capabilities.Control {
			p.drop(r, ReasonControlUnsupported)
			continue
		}
		switch r.Action {
		case ActionFinish:
			p.finish(r)
		case ActionEscalate:
			p.escalate(r)
		case ActionClaim:
			p.claim(ctx)
		case ActionRelease:
			if !p.authority {
				p.drop(r, "no authority")
				continue
			}
			var res leaseResult
			in, err := p.write(ctx, "campaign/release", map[string]any{"campaignId": p.cp.ID, "controller": p.cp.Controller,
				"epoch": p.cp.Epoch}, "", &res)
			if err == nil && in.Status == IntentDone {
				p.cp.Mode, p.authority = ModeObserver, false
				p.emit(EventControlChanged, "observer: released", "")
			}
		case ActionSubmit:
			switch {
			case !p.authority:
				p.drop(r, "no authority")
			case p.cp.TaskID != "" && !a2astate.Terminal(p.cp.TaskState):
				p.drop(r, ReasonTaskActive)
			case p.cp.AttemptsUsed >= p.cp.MaxAttempts:
				p.drop(r, ReasonAttemptsSpent)
			default:
				p.submit(ctx, r.Text)
			}
		case ActionCancel:
			if !p.authority || p.cp.TaskID == "" || a2astate.Terminal(p.cp.TaskState) {
				p.drop(r, "nothing to cancel under authority")
				continue
			}
			var res struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			}
			p.write(ctx, "CancelTask", map[string]any{"id": p.cp.TaskID}, "", &res)
		}
	}
}

func (p *pass) drop(r Request, why string) {
	p.s.log.Warn("campaign action dropped", slog.String("campaign_id", p.cp.ID), slog.String("action", r.Action),
		slog.String("reason", why))
}

func (p *pass) claim(ctx context.Context) {
	var res leaseResult
	in, err := p.write(ctx, "campaign/claim", map[string]any{"campaignId": p.cp.ID, "controller": p.cp.Controller,
		"leaseSeconds": p.cp.LeaseSeconds, "policy": policy}, "", &res)
	if err != nil || in.Status != IntentDone {
		return
	}
	exp, perr := time.Parse(time.RFC3339Nano, res.LeaseExpiresAt)
	if perr != nil || res.Controller != p.cp.Controller {
		return
	}
	// The local lease is counted from before the call, never past the remote's.
	local := p.now.Add(time.Duration(p.cp.LeaseSeconds) * time.Second)
	if exp.Before(local) {
		local = exp
	}
	was := p.cp.Mode
	p.cp.Mode, p.cp.Epoch, p.cp.LeaseExpiresAt = ModeController, res.Epoch, local
	p.cp.Readback = &Readback{At: p.now, Found: true, Controller: res.Controller, Epoch: res.Epoch, State: res.State, LeaseExpiresAt: exp}
	p.authority = res.State == "held"
	if was != ModeController {
		p.emit(EventControlChanged, "controller: claimed", "")
	}
}

func (p *pass) submit(ctx context.Context, text string) {
	params := map[string]any{
		"message": map[string]any{"messageId": p.cp.ID + "." + p.s.ids.NewID(), "role": "ROLE_USER",
			"parts": []any{map[string]any{"text": text}}},
		"configuration": map[string]any{"returnImmediately": true},
	}
	var res struct {
		Task *struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	in, err := p.write(ctx, "SendMessage", params, text, &res)
	switch {
	case in.Status == IntentUnknown:
		p.cp.State = StateSubmitted
	case err != nil:
	case res.Task != nil:
		p.cp.TaskID, p.cp.TaskState = res.Task.ID, a2astate.Submitted
		p.cp.setIntent(in.RequestID, func(i *Intent) { i.TaskID = res.Task.ID })
		p.setState(StateSubmitted, res.Task.ID)
	}
}

// renew renews the lease when less than half of it is left.
func (p *pass) renew(ctx context.Context) {
	if !p.authority || p.blocked() || p.cp.LeaseExpiresAt.Sub(p.now) >= time.Duration(p.cp.LeaseSeconds)*time.Second/2 {
		return
	}
	var res leaseResult
	start := p.now
	in, err := p.write(ctx, "campaign/renew", map[string]any{"campaignId": p.cp.ID, "controller": p.cp.Controller,
		"epoch": p.cp.Epoch, "leaseSeconds": p.cp.LeaseSeconds, "policy": policy}, "", &res)
	var re *rpcError
	switch {
	case err == nil && in.Status == IntentDone && res.Epoch == p.cp.Epoch && res.Controller == p.cp.Controller:
		exp, perr := time.Parse(time.RFC3339Nano, res.LeaseExpiresAt)
		if perr == nil {
			p.cp.LeaseExpiresAt = min64(exp, start.Add(time.Duration(p.cp.LeaseSeconds)*time.Second))
		}
	case err == nil, errors.As(err, &re):
		p.toObserver("renewal refused: " + reason(err))
	}
}

func min64(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (p *pass) setState(st, task string) {
	if p.cp.State == st {
		return
	}
	p.cp.State = st
	p.emit(EventStateChanged, st, task)
}

// observe reads the campaign's task (standard GetTask) and records what is
// material: a new state, an attempt's end, a block, the mission's end.
func (p *pass) observe(ctx context.Context) {
	switch {
	case p.cp.Capabilities != nil && !p.cp.Capabilities.Control:
		// No extension: the standard reads only. The newest task is watched.
		var res struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		err := p.call(ctx, "ListTasks", false, map[string]any{"pageSize": 1, "historyLength": 0}, &res)
		if err != nil {
			var re *rpcError
			if !errors.As(err, &re) && !errors.Is(err, errNoCalls) {
				p.unavailable(reason(err))
			}
			return
		}
		if len(res.Tasks) > 0 && res.Tasks[0].ID != p.cp.TaskID {
			p.cp.TaskID, p.cp.TaskState = res.Tasks[0].ID, ""
		}
	case p.cp.TaskID == "" && p.cp.Readback != nil && len(p.cp.Readback.Tasks) > 0:
		// An observer with the extension learns the campaign's task from the
		// readback (a controller's own send set it already).
		p.cp.TaskID = p.cp.Readback.Tasks[len(p.cp.Readback.Tasks)-1].ID
	}
	if p.cp.TaskID == "" || (a2astate.Terminal(p.cp.TaskState) && p.cp.TaskState != "") {
		return
	}
	var res struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []json.RawMessage `json:"artifacts"`
	}
	err := p.call(ctx, "GetTask", false, map[string]any{"id": p.cp.TaskID, "historyLength": 0}, &res)
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) && !errors.Is(err, errNoCalls) {
			p.unavailable(reason(err))
		}
		return
	}
	st := res.Status.State
	if st == p.cp.TaskState {
		return
	}
	p.cp.TaskState = st
	task := p.cp.TaskID
	switch st {
	case a2astate.Submitted:
		p.setState(StateSubmitted, task)
	case a2astate.Working:
		p.setState(StateWorking, task)
	case "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED":
		if p.cp.State != StateBlocked {
			p.cp.State = StateBlocked
			p.emit(EventBlocked, st, task)
		}
	case a2astate.Completed:
		p.cp.State = StateCompleted
		if len(res.Artifacts) > 0 {
			p.emit(EventEvidenceReady, "artifacts", task)
		}
		p.emit(EventAttemptCompleted, "completed", task) // the mission: an approved finish (decision.go)
	default:
		if a2astate.Terminal(st) {
			p.cp.State = StateFailed
			p.emit(EventAttemptCompleted, st, task)
		}
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func parseEvent(it work.Item) (Event, error) {
	var ev Event
	if err := json.Unmarshal(it.Data, &ev); err != nil || ev.Type == "" {
		return Event{}, molt.Invalid("data", "not an event")
	}
	return ev, nil
}
