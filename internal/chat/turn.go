package chat

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// Statuses of a turn (work.KindTurn) beyond the protocol's pending and running.
const (
	// StatusDone: the worker committed the reply (or the compaction) in the same
	// write that made the turn terminal.
	StatusDone work.Status = "done"
	// StatusFailed: the worker gave up (model refused or stayed unavailable, agent
	// misconfigured, session deleted); a system message says why in the same write
	// when the session still exists.
	StatusFailed work.Status = "failed"
	// StatusCanceled: a client cancelled the turn (an A2A CancelTask) while it
	// was pending or running (CancelTurn); a running attempt loses its claim
	// and writes nothing.
	StatusCanceled work.Status = "canceled"
	// work.StatusTimeout: the tick found the turn's heartbeat stale with its
	// attempts spent.
)

// Reasons: stable codes on errors and in a failed turn's Reason.
const (
	ReasonAgentNotFound  = "agent_not_found"  // the session's agent is not on the surface
	ReasonAgentConfig    = "agent_config"     // agent.yaml is malformed
	ReasonSessionDeleted = "session_deleted"  // the session went away before the reply
	ReasonModel          = "model"            // prefix: "model:<category>" (model.Reason*)
	ReasonStepLimit      = "tool_step_limit"  // the tool loop hit MaxSteps (the turn still replies)
	ReasonTooManyRetries = "seq_race_retries" // appends kept racing new messages
)

// TurnData is a turn's Data: which session and message it answers and what it did.
type TurnData struct {
	SessionID string `json:"session_id"`
	// UserSeq is the seq of the user message the turn answers (for a command, the
	// command's message). The turn sees the conversation up to it.
	UserSeq int `json:"user_seq"`
	// CompactOnly: a /compact turn, which compacts and calls no reply model.
	CompactOnly bool `json:"compact_only,omitempty"`
	// Compacted is set by the terminal write of a turn that compacted the session:
	// exactly once per compacting turn (the evolution issue enqueues one
	// pre-compact run per such turn).
	Compacted bool `json:"compacted,omitempty"`
	// SummarySeq is the session's SummarySeq after the compaction.
	SummarySeq int `json:"summary_seq,omitempty"`
	// ReplySeq is the seq of the turn's last message (its reply or failure notice).
	ReplySeq int `json:"reply_seq,omitempty"`
	// Steps counts model calls of the reply (compaction not included).
	Steps int `json:"steps,omitempty"`
	// Usage totals the tokens the model reported, compaction included.
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`

	// Delegation (an agent with delegation: true, root sessions): what the
	// resolver decided on the message and why (delegate.Resolution), after
	// the gate (a dispatch the gate refused is recorded as an abstain).
	Decision       string `json:"decision,omitempty"`
	Target         string `json:"target,omitempty"`
	TargetKind     string `json:"target_kind,omitempty"`
	Method         string `json:"method,omitempty"`
	DecisionReason string `json:"decision_reason,omitempty"`
	// SubSession and SubTurn: a dispatch to a workspace agent, the sub-session
	// and its turn the final write created.
	SubSession string `json:"sub_session,omitempty"`
	SubTurn    string `json:"sub_turn,omitempty"`
	// RemoteTask and RemoteURL: a dispatch to a remote, the task it created
	// and the JSON-RPC URL it is read at (checkpointed after the send, so a
	// later attempt reads the task instead of sending again).
	RemoteTask string `json:"remote_task,omitempty"`
	RemoteURL  string `json:"remote_url,omitempty"`
	// ReportTo is set on a sub-session's delegated turn: the parent session
	// its answer is appended to (as ReportAs answered: …) in its final write.
	ReportTo string `json:"report_to,omitempty"`
	ReportAs string `json:"report_as,omitempty"`
}

// ParseTurnData decodes a turn's Data; EINVALID when it is not a turn's.
func ParseTurnData(b []byte) (TurnData, error) {
	var d TurnData
	if err := json.Unmarshal(b, &d); err != nil || d.SessionID == "" || d.UserSeq < 1 {
		return TurnData{}, molt.Invalid("data", "not a turn's data")
	}
	return d, nil
}

func (d TurnData) encode() []byte {
	b, _ := json.Marshal(d)
	return b
}

// LockKey is the lock every turn of a session holds while claimed: one running
// turn per session.
func LockKey(sessionID string) string { return "turn/" + sessionID }

// Config tunes the runtime. Zero fields take the defaults.
type Config struct {
	// Budget is how many turns may run at once across all sessions (default 32).
	Budget int
	// Timeout: a running turn whose heartbeat is older than this is stale and the
	// tick takes it back (default 3 minutes). Heartbeats go every Timeout/4.
	Timeout time.Duration
	// HeartbeatEvery is the heartbeat interval (default Timeout/4).
	HeartbeatEvery time.Duration
	// MaxAttempts bounds the claims of one turn (default 3): crashes and retryable
	// model failures both spend them.
	MaxAttempts int
	// MaxSteps bounds the model calls of one reply's tool loop (default 8).
	MaxSteps int
	// CompactTokens: a transcript estimated (model.EstimateTokens, system prompt
	// included) above this is compacted before the reply (default 24000).
	CompactTokens int
	// KeepTail is the minimum number of recent messages kept out of a summary
	// (default 6).
	KeepTail int
	// MaxTokens bounds each reply when agent.yaml does not (default 4096).
	MaxTokens int
	// ModelTimeout bounds each model call (default 2 minutes).
	ModelTimeout time.Duration
	// CommitMargin is kept free before the handler's deadline (a Lambda's) for the
	// final write: model calls are cut that long before it (default 10 s).
	CommitMargin time.Duration
	// BeforeFinish, when set, is called after the model has answered and before
	// the reply is committed; a non-nil error abandons the turn without writing,
	// exactly as if the worker had been killed there. It exists for fault
	// injection in tests.
	BeforeFinish func(ctx TurnContext) error
	// RemotePoll is how often a dispatch to a remote reads its task (default
	// 1 s); RemoteWait bounds one attempt's reading (default 2 minutes): past
	// it the turn is given back and a later attempt reads on, until its
	// attempts are spent.
	RemotePoll time.Duration
	RemoteWait time.Duration
}

// TurnContext is what BeforeFinish sees.
type TurnContext struct {
	Turn  work.Item
	Claim work.Claim
	Reply string
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Budget, 32)
	defDur(&c.Timeout, 3*time.Minute)
	defDur(&c.HeartbeatEvery, c.Timeout/4)
	def(&c.MaxAttempts, 3)
	def(&c.MaxSteps, 8)
	def(&c.CompactTokens, 24000)
	def(&c.KeepTail, 6)
	def(&c.MaxTokens, 4096)
	defDur(&c.ModelTimeout, 2*time.Minute)
	defDur(&c.CommitMargin, 10*time.Second)
	defDur(&c.RemotePoll, time.Second)
	defDur(&c.RemoteWait, 2*time.Minute)
	return c
}

// Validate returns EINVALID naming a setting out of range.
func (c Config) Validate() error {
	switch {
	case c.Budget < 0 || c.Budget > 10000:
		return molt.Invalid("MOLT_TURN_BUDGET", "turn budget must be between 1 and 10000")
	case c.Timeout != 0 && (c.Timeout < 10*time.Second || c.Timeout > time.Hour):
		return molt.Invalid("MOLT_TURN_TIMEOUT", "turn timeout must be between 10s and 1h")
	case c.CompactTokens < 0:
		return molt.Invalid("MOLT_COMPACT_TOKENS", "compact tokens must not be negative")
	case c.MaxAttempts < 0 || c.MaxAttempts > 20:
		return molt.Invalid("max_attempts", "max attempts must be between 1 and 20")
	}
	return nil
}

// Policy is the turn kind's claim policy for the tick.
func (c Config) Policy() work.Policy {
	c = c.withDefaults()
	return work.Policy{Kind: work.KindTurn, Budget: c.Budget, Timeout: c.Timeout,
		MaxAttempts: c.MaxAttempts, Expired: work.StatusTimeout}
}

// modelReason is a failed turn's Reason for a model error: "model:<category>".
func modelReason(err error) string {
	r := molt.ErrorReason(err)
	if r == "" {
		r = "error"
	}
	return ReasonModel + ":" + r
}

// modelNotice is the system message of a turn the model could not answer. It
// names the category only: nothing the provider sent reaches the conversation.
func modelNotice(err error) string {
	switch molt.ErrorReason(err) {
	case model.ReasonRateLimited:
		return "The model is rate limited and could not answer this message. Please try again later."
	case model.ReasonAuth:
		return "The model refused the credentials it was called with. An operator needs to fix the model configuration."
	case model.ReasonBadRequest:
		return "The model refused this request. The conversation or the agent's configuration may be too large or malformed."
	case model.ReasonTimeout:
		return "The model did not answer in time. Please try again."
	}
	return fmt.Sprintf("The model could not answer this message (%s). Please try again later.", modelReason(err))
}
