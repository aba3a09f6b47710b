package supervisor

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// Kinds of the supervisor's work items.
const (
	// KindCampaign: one per campaign. Pending between passes; running while a
	// pass (the executor's attempt) holds it; deleted by DELETE.
	KindCampaign work.Kind = "campaign"
	// KindEvent: one per material event (id EventID), created by the final
	// write of the pass that saw it; never claimed.
	KindEvent work.Kind = "campaign_event"
	// KindDecision: one per material event that wakes a decision (id
	// DecisionID, the event's), created by the same final write as its event;
	// run by the decision worker (Decider), one at a time per campaign, in
	// event order.
	KindDecision work.Kind = "decision"
)

// StatusRecorded is the status of an event item.
const StatusRecorded work.Status = "recorded"

// Statuses a decision ends in (the final write of its attempt). Pending and
// running are the protocol's; a decision whose attempts are spent by stale
// claims ends work.StatusTimeout (the tick).
const (
	// DecisionContinued: the supervising agent proposed to do nothing (or the
	// mission was already finished); nothing was relayed.
	DecisionContinued work.Status = "continued"
	// DecisionRelayed: the reviewer approved the proposal and it was queued on
	// the campaign as a Request carrying the decision's id, in the same write.
	DecisionRelayed work.Status = "relayed"
	// DecisionEscalated: a person must look (an escalate proposal, a second
	// rejection, the model budget spent, an unreadable answer, the model
	// failing for good); an escalate Request was queued on the campaign, whose
	// pass records a BLOCKED event with an "escalated: …" detail.
	DecisionEscalated work.Status = "escalated"
	// DecisionRefused: the campaign had already consumed (or queued) this
	// decision's id: a repeated relay, nothing queued again.
	DecisionRefused work.Status = "refused"
	// DecisionFailed: the campaign is gone or the decision unreadable.
	DecisionFailed work.Status = "failed"
)

// Modes of a campaign.
const (
	// ModeObserver: reads only. Every campaign starts here; a failure of
	// authority (renewal refused, epoch moved, readback disagrees, lease
	// expired) comes back here, with one CONTROL_CHANGED event.
	ModeObserver = "observer"
	// ModeController: the pass holds the remote's lease at Campaign.Epoch. Only
	// an explicit claim (POST …/control) moves a campaign here.
	ModeController = "controller"
)

// States of a campaign (Campaign.State), moved only by a pass.
const (
	StateNew       = "new"       // created, no pass yet
	StateIdle      = "idle"      // no task of the campaign is running
	StateSubmitted = "submitted" // a task was submitted (or its intent is unknown)
	StateWorking   = "working"   // the remote task is working
	StateBlocked   = "blocked"   // the remote task needs input or auth
	StateCompleted = "completed" // the remote task completed: the attempt is done, the mission not yet
	StateFailed    = "failed"    // the last task failed, was rejected or canceled
	// StateFinished: an approved finish was carried out while the remote task
	// was completed (one MISSION_COMPLETED). Only a decision moves it here.
	StateFinished = "finished"
)

// Material event types.
const (
	EventStateChanged      = "STATE_CHANGED"
	EventAttemptCompleted  = "ATTEMPT_COMPLETED"
	EventBlocked           = "BLOCKED"
	EventEvidenceReady     = "EVIDENCE_READY"
	EventControlChanged    = "CONTROL_CHANGED"
	EventMissionCompleted  = "MISSION_COMPLETED"
	EventRemoteUnavailable = "REMOTE_UNAVAILABLE"
)

// Intent statuses.
const (
	// IntentPending: saved before its network call; a pass that finds one
	// left by an earlier pass treats it as unknown.
	IntentPending = "pending"
	// IntentDone: the remote answered with a result.
	IntentDone = "done"
	// IntentRefused: the remote answered with an error (it changed nothing).
	IntentRefused = "refused"
	// IntentUnknown: the answer was lost (timeout, cancellation): writes are
	// blocked until campaign/getRequest reconciles it.
	IntentUnknown = "unknown"
	// IntentNotSeen: reconciled; the remote never saw it. It is not resent.
	IntentNotSeen = "not_seen"
)

// Actions a person asks for (queued on the campaign, carried out by a pass).
const (
	ActionClaim   = "claim"
	ActionRelease = "release"
	ActionSubmit  = "submit"
	ActionCancel  = "cancel"
	// Actions only a decision relays (Request.Decision set).
	ActionFinish   = "finish"   // the mission is done: needs a completed remote task
	ActionEscalate = "escalate" // a person must look: a BLOCKED "escalated: …" event
)

// Reasons of refused requests (ECONFLICT, HTTP 409).
const (
	ReasonControlUnsupported = "control_unsupported" // the remote's card lacks the campaign-control extension (or part of it)
	ReasonNotController      = "not_controller"      // the campaign is an observer: claim first
	ReasonBusy               = "campaign_busy"       // a pass kept holding the campaign
	ReasonAttemptsSpent      = "attempts_spent"      // max_attempts submissions were made
	ReasonTaskActive         = "task_active"         // the remote task is still running: cancel it first
	ReasonNoTask             = "no_task"             // nothing to cancel
	ReasonReleaseFirst       = "release_first"       // delete of a campaign that holds the remote's lease
)

// Remote names the remote agent: its card and where its token lives. The
// token itself is never stored.
type Remote struct {
	CardURL  string `json:"card_url"`
	TokenRef string `json:"token_ref"`
}

// Capabilities is what the remote's card advertises, as last read.
type Capabilities struct {
	Endpoint string `json:"endpoint"`
	// Control: the card lists the campaign-control extension with its lease
	// methods, request-id readback and policy enforcement.
	Control bool `json:"control"`
	// Missing names what the card lacks for control ("" when Control).
	Missing []string  `json:"missing,omitempty"`
	CardSum string    `json:"card_sum"` // a digest of the card, to see it change
	ReadAt  time.Time `json:"read_at"`
}

// Intent is one remote write, saved before its call.
type Intent struct {
	RequestID string    `json:"request_id"`
	Method    string    `json:"method"`
	Status    string    `json:"status"`
	At        time.Time `json:"at"`
	Text      string    `json:"text,omitempty"` // a submission's text
	TaskID    string    `json:"task_id,omitempty"`
	Error     string    `json:"error,omitempty"` // a safe reason
}

// Open reports whether i still blocks writes.
func (i Intent) Open() bool { return i.Status == IntentPending || i.Status == IntentUnknown }

// Request is an action a person asked for, or a decision relayed, waiting
// for the next pass.
type Request struct {
	Action string    `json:"action"`
	Text   string    `json:"text,omitempty"`
	At     time.Time `json:"at"`
	// Decision is the id of the decision that relayed it ("" for a person's).
	// A decision id is consumed once (Campaign.Consumed).
	Decision string `json:"decision,omitempty"`
}

// Readback is the last campaign/get answer.
type Readback struct {
	At             time.Time    `json:"at"`
	Found          bool         `json:"found"`
	Controller     string       `json:"controller,omitempty"`
	Epoch          int          `json:"epoch,omitempty"`
	State          string       `json:"state,omitempty"` // held, expired, released
	LeaseExpiresAt time.Time    `json:"lease_expires_at,omitzero"`
	Tasks          []RemoteTask `json:"tasks,omitempty"`
}

// RemoteTask is a task of the campaign as the remote reports it.
type RemoteTask struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// Campaign is a campaign's record: the KindCampaign item's data.
type Campaign struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Workspace        string `json:"workspace"`
	Remote           Remote `json:"remote"`
	Mission          string `json:"mission"`
	Controller       string `json:"controller"`
	LeaseSeconds     int    `json:"lease_seconds"`
	HeartbeatSeconds int    `json:"heartbeat_seconds"`
	MaxAttempts      int    `json:"max_attempts"`

	Mode           string        `json:"mode"`
	Epoch          int           `json:"epoch"`
	LeaseExpiresAt time.Time     `json:"lease_expires_at,omitzero"`
	Capabilities   *Capabilities `json:"capabilities,omitempty"`
	State          string        `json:"state"`
	AttemptsUsed   int           `json:"attempts_used"`
	TaskID         string        `json:"task_id,omitempty"`
	TaskState      string        `json:"task_state,omitempty"`
	Intents        []Intent      `json:"intents,omitempty"`
	Requests       []Request     `json:"requests,omitempty"`
	Readback       *Readback     `json:"last_readback,omitempty"`
	Unavailable    string        `json:"unavailable,omitempty"` // the safe reason the remote is unreachable
	LastPass       time.Time     `json:"last_pass,omitzero"`
	Events         int           `json:"events"` // events recorded so far (the last event's seq)
	// Outbox holds the events of a pass whose intent checkpoint was written
	// before its final write: the final write (this pass's or, after a crash,
	// the next one's) creates them, so none is dropped or repeated.
	Outbox []Event `json:"outbox,omitempty"`
	// Supervisor is the workspace agent that proposes the campaign's decisions
	// ("": the built-in AgentSupervisor).
	Supervisor string `json:"supervisor,omitempty"`
	// ModelBudget bounds the model calls of the campaign's decisions;
	// ModelCalls counts them (added by each decision's final write).
	ModelBudget int `json:"model_budget"`
	ModelCalls  int `json:"model_calls"`
	// LastDecision is the seq of the newest decision created (0: none); each
	// decision names the one before it (Decision.Prev).
	LastDecision int `json:"last_decision,omitempty"`
	// Consumed holds the ids of the last decisions whose requests a pass took
	// (bounded): a decision id is carried out once.
	Consumed  []string  `json:"consumed_decisions,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// OpenIntents returns the intents that block writes.
func (c Campaign) OpenIntents() []Intent {
	var out []Intent
	for _, i := range c.Intents {
		if i.Open() {
			out = append(out, i)
		}
	}
	return out
}

// maxIntents bounds the intents a campaign keeps (open ones are never dropped).
const maxIntents = 20

func (c *Campaign) addIntent(i Intent) {
	c.Intents = append(c.Intents, i)
	for len(c.Intents) > maxIntents && !c.Intents[0].Open() {
		c.Intents = c.Intents[1:]
	}
}

func (c *Campaign) setIntent(id string, f func(*Intent)) {
	for k := range c.Intents {
		if c.Intents[k].RequestID == id {
			f(&c.Intents[k])
		}
	}
}

func (c Campaign) encode() []byte {
	c.ID, c.UpdatedAt = "", time.Time{} // from the item
	b, _ := json.Marshal(c)
	return b
}

// parse decodes a campaign item.
func parse(it work.Item) (Campaign, error) {
	var c Campaign
	if err := json.Unmarshal(it.Data, &c); err != nil || c.Remote.CardURL == "" {
		return Campaign{}, molt.Invalid("data", "not a campaign's data")
	}
	c.ID, c.UpdatedAt = it.ID, it.UpdatedAt
	if c.ModelBudget == 0 {
		c.ModelBudget = DefaultModelBudget // a campaign created before decisions
	}
	return c, nil
}

// Event is one material event.
type Event struct {
	Seq    int       `json:"seq"`
	Type   string    `json:"type"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"` // safe words: a state, a reason, a task id
	TaskID string    `json:"task_id,omitempty"`
}

// EventID is the item id of campaign id's event seq: the create's condition
// makes an event's identity unique, so a pass repeated after a lost answer
// cannot record it twice.
func EventID(campaign string, seq int) string { return fmt.Sprintf("%s.%08d", campaign, seq) }
