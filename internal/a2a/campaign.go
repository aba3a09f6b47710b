package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// ExtCampaign is the URI of the campaign-control extension (the contract is
// docs/a2a/campaign-control.md). A client activates it by listing the URI in
// the A2A-Extensions header.
const ExtCampaign = "https://github.com/molt-dev/molt/a2a/ext/campaign-control/v1"

// Campaign records are work items that are never claimed: every change is a
// Create or an UpdateSeen conditional on the record as read, so the lease and
// the epoch are enforced by the store's conditional writes on both adapters.
const (
	// KindCampaign: one per campaign of an agent (id campaignKey).
	KindCampaign work.Kind = "a2a_campaign"
	// KindCampaignRequest: one per requestId of an agent (id requestKey),
	// expiring RequestRetention after it was written.
	KindCampaignRequest work.Kind = "a2a_campaign_request"
	// KindCampaignContext: one per campaign context (id: the session id),
	// naming its campaign, for the tool gate of the context's turns.
	KindCampaignContext work.Kind = "a2a_campaign_context"
)

// Campaign statuses (the lease's expiry is read from Data: a held campaign
// whose lease has passed is "expired" without any write).
const (
	// CampaignHeld: claimed by a controller (campaign/claim); renewed by it
	// (campaign/renew); left by its release or another's claim after expiry.
	CampaignHeld work.Status = "held"
	// CampaignReleased: released by its controller (campaign/release); left
	// by the next claim.
	CampaignReleased work.Status = "released"
)

// Request record statuses.
const (
	// RequestPending: a control write was reserved and is being carried out
	// (its outcome is unknown if it stays so).
	RequestPending work.Status = "pending"
	// RequestDone: the request's outcome is recorded.
	RequestDone work.Status = "done"
	// contextOpen is a campaign context's only status.
	contextOpen work.Status = "open"
)

// Lease and record bounds.
const (
	DefaultLease     = 60 * time.Second
	MaxLease         = 24 * time.Hour
	RequestRetention = 8 * 24 * time.Hour // at least the contract's 7 days
	maxCampaignTasks = 200                // tasks a campaign record lists (the newest)
	pendingFor       = 2 * time.Minute    // a reservation older than this no longer blocks a send
)

// Extension error codes (in JSON-RPC's server range, after A2A's own).
const (
	codeStaleEpoch    = -32010
	codeLeaseExpired  = -32011
	codeNotController = -32012
	codePolicy        = -32013
	codeCampaignBusy  = -32014
	codeLeaseHeld     = -32015
	codeNoCampaign    = -32016
	codeRequestReused = -32017
)

var campaignIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// Policy is a campaign's execution policy. molt enforces exactly these
// terms; any other term, or a value molt cannot honour, is refused (-32013).
type Policy struct {
	// Access is the most the campaign's tasks may do: "workspace" (the
	// default and the most molt grants a campaign).
	Access string `json:"access,omitempty"`
	// AllowEgress lets the tasks use tools that reach hosts outside molt
	// (web search and fetch). Default false.
	AllowEgress bool `json:"allowEgress,omitempty"`
	// AllowCrossWorkspace lets the tasks use tools that act on other
	// workspaces. Default false.
	AllowCrossWorkspace bool `json:"allowCrossWorkspace,omitempty"`
	// AutoApply must be false: a campaign never triggers evolution auto-apply.
	AutoApply bool `json:"autoApply,omitempty"`
}

// parsePolicy reads a policy; nil raw is the default policy.
func parsePolicy(raw json.RawMessage) (*Policy, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, &rpcError{Code: codePolicy, Message: "policy molt cannot enforce: " + err.Error()}
	}
	switch {
	case p.Access != "" && p.Access != session.AccessWorkspace:
		return nil, &rpcError{Code: codePolicy, Message: fmt.Sprintf("policy access %q: a campaign runs with workspace access at most", p.Access)}
	case p.AutoApply:
		return nil, &rpcError{Code: codePolicy, Message: "policy autoApply: a campaign never triggers evolution auto-apply"}
	}
	p.Access = session.AccessWorkspace
	return &p, nil
}

// campaignData is a campaign record's Data.
type campaignData struct {
	CampaignID      string    `json:"campaignId"`
	Workspace       string    `json:"workspace"`
	Agent           string    `json:"agent"`
	Controller      string    `json:"controller"`
	ControllerToken string    `json:"controllerToken"` // the claimer's token id
	Epoch           int       `json:"epoch"`
	LeaseExpiresAt  time.Time `json:"leaseExpiresAt"`
	Policy          Policy    `json:"policy"`
	ContextID       string    `json:"contextId,omitempty"`
	Tasks           []string  `json:"tasks,omitempty"` // oldest first
	// Pending is the requestId of a send reserved and not yet recorded, and
	// when it was reserved.
	Pending   string    `json:"pending,omitempty"`
	PendingAt time.Time `json:"pendingAt,omitzero"`
}

// requestData is a request record's Data.
type requestData struct {
	RequestID  string          `json:"requestId"`
	Method     string          `json:"method"`
	CampaignID string          `json:"campaignId"`
	TaskID     string          `json:"taskId,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *rpcError       `json:"error,omitempty"`
}

func hashKey(prefix string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + hex.EncodeToString(sum[:20])
}

func campaignKey(ref agentRef, id string) string { return hashKey("c-", ref.ws, ref.agent, id) }
func requestKey(ref agentRef, id string) string  { return hashKey("r-", ref.ws, ref.agent, id) }

// extensionActive reports whether the request lists ExtCampaign in
// A2A-Extensions.
func extensionActive(hdr []string) bool {
	for _, h := range hdr {
		for _, u := range strings.Split(h, ",") {
			if strings.TrimSpace(u) == ExtCampaign {
				return true
			}
		}
	}
	return false
}

func errExtension(what string) error {
	return &rpcError{Code: codeExtension, Message: what + " needs the extension " + ExtCampaign + ": list it in the A2A-Extensions header"}
}

func (h *Handler) now() time.Time { return h.clock.Now().UTC() }

// readCampaign reads ref's campaign id; -32016 when molt has none.
func (h *Handler) readCampaign(ctx context.Context, ref agentRef, id string) (work.Item, campaignData, error) {
	it, err := h.store.GetItem(ctx, KindCampaign, campaignKey(ref, id))
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return it, campaignData{}, &rpcError{Code: codeNoCampaign, Message: "no campaign " + id + " on this agent"}
	}
	if err != nil {
		return it, campaignData{}, err
	}
	var d campaignData
	if err := json.Unmarshal(it.Data, &d); err != nil {
		return it, d, fmt.Errorf("campaign %s: %w", id, err)
	}
	return it, d, nil
}

// readRequest reads the record of requestId; ok false when molt has none.
func (h *Handler) readRequest(ctx context.Context, ref agentRef, id string) (work.Item, requestData, bool, error) {
	it, err := h.store.GetItem(ctx, KindCampaignRequest, requestKey(ref, id))
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return it, requestData{}, false, nil
	}
	if err != nil {
		return it, requestData{}, false, err
	}
	var d requestData
	if err := json.Unmarshal(it.Data, &d); err != nil {
		return it, d, false, fmt.Errorf("request %s: %w", id, err)
	}
	return it, d, true, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs are marshalled
	}
	return b
}

// newRecord is a request record to create (Protocol.Create fills in the rest).
func (h *Handler) newRecord(ref agentRef, st work.Status, d requestData) work.Item {
	return work.Item{Kind: KindCampaignRequest, ID: requestKey(ref, d.RequestID), Workspace: ref.ws, Status: st,
		Data: mustJSON(d), ExpiresAt: h.now().Add(RequestRetention)}
}

// refuse records the refusal of requestId (an extension error: not the
// controller, a stale epoch, the lease held or expired, the campaign busy)
// and returns it: campaign/getRequest then reports the request seen and
// refused with its code, and a repeat of requestId gets the same refusal.
// Other errors (bad params, the store) are returned as they are, unrecorded.
// A failure to record is logged and the refusal still returned: the caller
// learns the outcome, and a readback then finds the request not seen, which
// is as true (nothing was changed).
func (h *Handler) refuse(ctx context.Context, ref agentRef, method, campaignID, requestID string, err error) error {
	var re *rpcError
	if !errors.As(err, &re) || re.Code == codeNoCampaign {
		return err
	}
	rec := h.newRecord(ref, RequestDone, requestData{RequestID: requestID, Method: method, CampaignID: campaignID, Error: re})
	if _, cerr := h.proto.Create(ctx, rec); cerr != nil && molt.ErrorCode(cerr) != molt.ECONFLICT {
		h.log.WarnContext(ctx, "campaign request refusal not recorded", slog.String("request_id", requestID),
			slog.String("error", cerr.Error()))
	}
	return err
}

// replay answers a request already recorded: its result, or its error; -32017
// when the requestId was used for another method or campaign.
func replay(d requestData, method, campaignID string) (json.RawMessage, error) {
	if d.Method != method || d.CampaignID != campaignID {
		return nil, &rpcError{Code: codeRequestReused, Message: fmt.Sprintf("requestId %s was used for %s of campaign %s", d.RequestID, d.Method, d.CampaignID)}
	}
	if d.Error != nil {
		return nil, d.Error
	}
	return d.Result, nil
}

// leaseParams are the params of campaign/claim, renew and release.
type leaseParams struct {
	CampaignID   string          `json:"campaignId"`
	Controller   string          `json:"controller"`
	Epoch        *int            `json:"epoch"`
	LeaseSeconds *int            `json:"leaseSeconds"`
	RequestID    string          `json:"requestId"`
	Policy       json.RawMessage `json:"policy"`
}

func (p leaseParams) check(method string) (time.Duration, error) {
	switch {
	case !campaignIDRe.MatchString(p.CampaignID):
		return 0, invalidParams("campaignId is required (letters, digits, _.:-, at most 128)")
	case p.Controller == "" || len(p.Controller) > 200:
		return 0, invalidParams("controller is required (at most 200 characters)")
	case !campaignIDRe.MatchString(p.RequestID):
		return 0, invalidParams("requestId is required (letters, digits, _.:-, at most 128)")
	case method != "campaign/claim" && p.Epoch == nil:
		return 0, invalidParams("epoch is required")
	}
	lease := DefaultLease
	if p.LeaseSeconds != nil {
		lease = time.Duration(*p.LeaseSeconds) * time.Second
		if lease < time.Second || lease > MaxLease {
			return 0, invalidParams("leaseSeconds must be between 1 and %d", int(MaxLease/time.Second))
		}
	}
	return lease, nil
}

// leaseResult is what claim, renew and release answer.
type leaseResult struct {
	CampaignID     string `json:"campaignId"`
	Controller     string `json:"controller"`
	Epoch          int    `json:"epoch"`
	LeaseExpiresAt string `json:"leaseExpiresAt"`
	State          string `json:"state"`
}

// campaignState is a campaign's state as the extension names it.
func campaignState(it work.Item, d campaignData, now time.Time) string {
	switch {
	case it.Status == CampaignReleased:
		return "released"
	case !now.Before(d.LeaseExpiresAt):
		return "expired"
	}
	return "held"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// lease serves campaign/claim, renew and release: one write of the campaign
// record conditional on it as read, together with the request record (so a
// repeated requestId finds the outcome and does nothing twice).
func (h *Handler) lease(ctx context.Context, c auth.Caller, ref agentRef, method string, raw json.RawMessage) (json.RawMessage, error) {
	var p leaseParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	lease, err := p.check(method)
	if err != nil {
		return nil, err
	}
	pol, err := parsePolicy(p.Policy)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		if _, rd, ok, err := h.readRequest(ctx, ref, p.RequestID); err != nil || ok {
			if err != nil {
				return nil, err
			}
			return replay(rd, method, p.CampaignID)
		}
		now := h.now()
		seen, d, err := h.readCampaign(ctx, ref, p.CampaignID)
		exists := err == nil
		if err != nil && (method != "campaign/claim" || rpcCode(err) != codeNoCampaign) {
			return nil, err
		}
		state := ""
		if exists {
			state = campaignState(seen, d, now)
		}
		to := CampaignHeld
		switch method {
		case "campaign/claim":
			switch {
			case !exists:
				d = campaignData{CampaignID: p.CampaignID, Workspace: ref.ws, Agent: ref.agent, Epoch: 1,
					Policy: Policy{Access: session.AccessWorkspace}}
			case state == "held" && (d.Controller != p.Controller || d.ControllerToken != c.Token.ID):
				return nil, h.refuse(ctx, ref, method, p.CampaignID, p.RequestID,
					&rpcError{Code: codeLeaseHeld, Message: fmt.Sprintf("campaign %s is held by another controller until %s", p.CampaignID, stamp(d.LeaseExpiresAt))})
			case state == "held":
				// The controller claims again while it holds the lease: the
				// same epoch, the lease extended.
			default:
				d.Epoch++
			}
			d.Controller, d.ControllerToken = p.Controller, c.Token.ID
			d.LeaseExpiresAt = now.Add(lease)
			if pol != nil {
				d.Policy = *pol
			}
		default:
			if err := d.control(c, p.Controller, *p.Epoch, state); err != nil {
				return nil, h.refuse(ctx, ref, method, p.CampaignID, p.RequestID, err)
			}
			if method == "campaign/renew" {
				d.LeaseExpiresAt = now.Add(lease)
				if pol != nil {
					d.Policy = *pol
				}
			} else {
				to, d.LeaseExpiresAt = CampaignReleased, now
			}
		}
		res := leaseResult{CampaignID: p.CampaignID, Controller: d.Controller, Epoch: d.Epoch,
			LeaseExpiresAt: stamp(d.LeaseExpiresAt), State: map[work.Status]string{CampaignHeld: "held", CampaignReleased: "released"}[to]}
		out := mustJSON(res)
		rec := h.newRecord(ref, RequestDone, requestData{RequestID: p.RequestID, Method: method, CampaignID: p.CampaignID, Result: out})
		if exists {
			_, err = h.proto.Create(ctx, rec, h.proto.UpdateSeenOp(seen, work.Edit{To: to, Data: mustJSON(d)}))
		} else {
			camp := work.Item{Kind: KindCampaign, ID: campaignKey(ref, p.CampaignID), Workspace: ref.ws, Status: to,
				Data: mustJSON(d), CreatedAt: now, UpdatedAt: now, OpID: h.proto.IDs.NewID()}
			_, err = h.proto.Create(ctx, rec, work.CreateItem{Item: camp})
		}
		if molt.ErrorCode(err) == molt.ECONFLICT && try < 4 {
			continue // the request was recorded meanwhile, or the campaign changed: read again
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

func rpcCode(err error) int {
	var re *rpcError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

// control checks that caller (as controller at epoch) controls the campaign
// now: -32012 not the controller, -32010 stale epoch, -32011 lease expired
// (or released).
func (d campaignData) control(c auth.Caller, controller string, epoch int, state string) error {
	switch {
	case controller != d.Controller || c.Token.ID != d.ControllerToken:
		return &rpcError{Code: codeNotController, Message: fmt.Sprintf("campaign %s is controlled by another controller", d.CampaignID)}
	case epoch != d.Epoch:
		return &rpcError{Code: codeStaleEpoch, Message: fmt.Sprintf("epoch %d is stale: campaign %s is at epoch %d", epoch, d.CampaignID, d.Epoch)}
	case state != "held":
		return &rpcError{Code: codeLeaseExpired, Message: fmt.Sprintf("the lease of campaign %s has %s: claim it again", d.CampaignID, state)}
	}
	return nil
}

// campaignGet serves campaign/get: the record as stored, with its tasks'
// states read now.
func (h *Handler) campaignGet(ctx context.Context, c auth.Caller, ref agentRef, raw json.RawMessage) (any, error) {
	var p struct {
		CampaignID string `json:"campaignId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if !campaignIDRe.MatchString(p.CampaignID) {
		return nil, invalidParams("campaignId is required")
	}
	it, d, err := h.readCampaign(ctx, ref, p.CampaignID)
	if err != nil {
		return nil, err
	}
	tasks := []any{}
	for _, id := range d.Tasks {
		st := "unknown"
		if t, _, err := h.loadTask(ctx, c, ref, id); err == nil {
			st = t.State
		}
		tasks = append(tasks, map[string]any{"id": id, "state": st})
	}
	return map[string]any{"campaignId": d.CampaignID, "controller": d.Controller, "epoch": d.Epoch,
		"leaseExpiresAt": stamp(d.LeaseExpiresAt), "state": campaignState(it, d, h.now()), "policy": d.Policy,
		"contextId": d.ContextID, "tasks": tasks}, nil
}

// campaignGetRequest serves campaign/getRequest: whether molt saw requestId
// and what came of it.
func (h *Handler) campaignGetRequest(ctx context.Context, ref agentRef, raw json.RawMessage) (any, error) {
	var p struct {
		RequestID string `json:"requestId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if !campaignIDRe.MatchString(p.RequestID) {
		return nil, invalidParams("requestId is required")
	}
	it, d, ok, err := h.readRequest(ctx, ref, p.RequestID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return map[string]any{"requestId": p.RequestID, "seen": false}, nil
	}
	out := map[string]any{"requestId": p.RequestID, "seen": true, "method": d.Method, "campaignId": d.CampaignID,
		"state": string(it.Status), "at": stamp(it.CreatedAt)}
	if d.TaskID != "" {
		out["taskId"] = d.TaskID
	}
	if d.Result != nil {
		out["result"] = d.Result
	}
	if d.Error != nil {
		out["error"] = d.Error
	}
	return out, nil
}

// controlMeta is the extension's metadata on SendMessage and CancelTask.
type controlMeta struct {
	CampaignID string          `json:"campaignId"`
	Controller string          `json:"controller"`
	Epoch      *int            `json:"epoch"`
	RequestID  string          `json:"requestId"`
	Policy     json.RawMessage `json:"policy"`
}

// controlOf reads the extension's metadata from params.metadata; nil when
// the request carries none.
func controlOf(meta map[string]json.RawMessage, active bool) (*controlMeta, error) {
	raw, ok := meta[ExtCampaign]
	if !ok || !isSet(raw) {
		return nil, nil
	}
	if !active {
		return nil, errExtension("metadata of " + ExtCampaign)
	}
	var m controlMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalidParams("metadata[%s]: %v", ExtCampaign, err)
	}
	switch {
	case !campaignIDRe.MatchString(m.CampaignID):
		return nil, invalidParams("metadata campaignId is required")
	case m.Controller == "":
		return nil, invalidParams("metadata controller is required")
	case m.Epoch == nil:
		return nil, invalidParams("metadata epoch is required")
	case !campaignIDRe.MatchString(m.RequestID):
		return nil, invalidParams("metadata requestId is required")
	}
	return &m, nil
}

// reserve checks a control write against the campaign and records its
// request as pending in one write with the campaign (conditional on it as
// read: a claim, a renewal or another control write in between makes it
// fail and the checks run again). edit changes the campaign's data for the
// write; it may refuse. replayed is the original answer of a repeated
// requestId.
func (h *Handler) reserve(ctx context.Context, c auth.Caller, ref agentRef, method string, m *controlMeta,
	edit func(d *campaignData) error) (seen work.Item, rec work.Item, replayed json.RawMessage, err error) {
	pol, err := parsePolicy(m.Policy)
	if err != nil {
		return work.Item{}, work.Item{}, nil, err
	}
	for try := 0; ; try++ {
		if ri, rd, ok, err := h.readRequest(ctx, ref, m.RequestID); err != nil || ok {
			if err != nil {
				return work.Item{}, work.Item{}, nil, err
			}
			if ri.Status == RequestPending {
				if rd.Method != method || rd.CampaignID != m.CampaignID {
					_, err := replay(rd, method, m.CampaignID)
					return work.Item{}, work.Item{}, nil, err
				}
				return work.Item{}, work.Item{}, nil, &rpcError{Code: codeCampaignBusy,
					Message: "request " + m.RequestID + " is still being carried out: ask campaign/getRequest"}
			}
			res, err := replay(rd, method, m.CampaignID)
			return work.Item{}, work.Item{}, res, err
		}
		it, d, err := h.readCampaign(ctx, ref, m.CampaignID)
		if err != nil {
			return work.Item{}, work.Item{}, nil, err
		}
		if err := d.control(c, m.Controller, *m.Epoch, campaignState(it, d, h.now())); err != nil {
			return work.Item{}, work.Item{}, nil, h.refuse(ctx, ref, method, m.CampaignID, m.RequestID, err)
		}
		if pol != nil {
			d.Policy = *pol
		}
		if err := edit(&d); err != nil {
			return work.Item{}, work.Item{}, nil, h.refuse(ctx, ref, method, m.CampaignID, m.RequestID, err)
		}
		r := h.newRecord(ref, RequestPending, requestData{RequestID: m.RequestID, Method: method, CampaignID: m.CampaignID})
		op := h.proto.UpdateSeenOp(it, work.Edit{Data: mustJSON(d)})
		r, err = h.proto.Create(ctx, r, op)
		if molt.ErrorCode(err) == molt.ECONFLICT && try < 4 {
			continue
		}
		if err != nil {
			return work.Item{}, work.Item{}, nil, err
		}
		it.Data, it.OpID, it.UpdatedAt = op.Set.Data, op.Set.OpID, op.Set.UpdatedAt
		return it, r, nil, nil
	}
}

// finish records a reserved request's outcome, and applies done to the
// campaign's data in the same write (re-read and retried when the campaign
// changed meanwhile, e.g. a renewal).
func (h *Handler) finish(ctx context.Context, ref agentRef, seen, rec work.Item, taskID string, result json.RawMessage, failure error,
	done func(d *campaignData)) error {
	var rd requestData
	_ = json.Unmarshal(rec.Data, &rd)
	rd.TaskID, rd.Result = taskID, result
	if failure != nil {
		re := h.rpcErr(failure)
		rd.Error = re
	}
	for try := 0; ; try++ {
		var d campaignData
		if err := json.Unmarshal(seen.Data, &d); err != nil {
			return err
		}
		done(&d)
		_, err := h.proto.UpdateSeen(ctx, seen, work.Edit{Data: mustJSON(d)},
			h.proto.UpdateSeenOp(rec, work.Edit{To: RequestDone, Data: mustJSON(rd)}))
		if molt.ErrorCode(err) == molt.ECONFLICT && molt.ErrorReason(err) == work.ReasonChanged && try < 8 {
			if seen, _, err = h.readCampaign(ctx, ref, rd.CampaignID); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// campaignSend carries out a SendMessage under the extension: refused while
// the campaign's last task is active; the task runs in the campaign's
// context (opened with workspace access at most, external, gated by the
// policy's tools).
func (h *Handler) campaignSend(ctx context.Context, c auth.Caller, ref agentRef, p sendParams, m *controlMeta) (task, error) {
	if p.Message.TaskID != "" {
		return task{}, &rpcError{Code: codeUnsupported, Message: "a campaign's message starts a new task: send it without taskId"}
	}
	text, err := p.Message.text()
	if err != nil {
		return task{}, err
	}
	now := h.now()
	seen, rec, replayed, err := h.reserve(ctx, c, ref, "SendMessage", m, func(d *campaignData) error {
		if p.Message.ContextID != "" && p.Message.ContextID != d.ContextID {
			return invalidParams("contextId %q is not the context of campaign %s", p.Message.ContextID, d.CampaignID)
		}
		if d.Pending != "" && now.Sub(d.PendingAt) < pendingFor {
			return &rpcError{Code: codeCampaignBusy, Message: fmt.Sprintf("campaign %s is starting a task (request %s)", d.CampaignID, d.Pending)}
		}
		if n := len(d.Tasks); n > 0 {
			last := d.Tasks[n-1]
			if t, _, err := h.loadTask(ctx, c, ref, last); err == nil && !terminal(t.State) {
				return &rpcError{Code: codeCampaignBusy, Message: fmt.Sprintf("campaign %s has task %s %s: cancel it or wait for it to end", d.CampaignID, last, t.State)}
			}
		}
		d.Pending, d.PendingAt = m.RequestID, now
		return nil
	})
	if err != nil {
		return task{}, err
	}
	if replayed != nil {
		var r struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(replayed, &r)
		t, _, err := h.loadTask(ctx, c, ref, r.TaskID)
		return t, err
	}
	var d campaignData
	_ = json.Unmarshal(seen.Data, &d)
	t, err := h.startCampaignTask(ctx, c, ref, &d, text)
	clear := func(cd *campaignData) {
		if cd.Pending == m.RequestID {
			cd.Pending, cd.PendingAt = "", time.Time{}
		}
		if d.ContextID != "" {
			cd.ContextID = d.ContextID
		}
		if t.ID != "" {
			cd.Tasks = append(cd.Tasks, t.ID)
			if len(cd.Tasks) > maxCampaignTasks {
				cd.Tasks = cd.Tasks[len(cd.Tasks)-maxCampaignTasks:]
			}
		}
	}
	var result json.RawMessage
	if err == nil {
		result = mustJSON(map[string]string{"taskId": t.ID})
	}
	if ferr := h.finish(ctx, ref, seen, rec, t.ID, result, err, clear); ferr != nil && err == nil {
		err = ferr
	}
	return t, err
}

// startCampaignTask opens the campaign's context when it has none (with
// workspace access, external, registered for the tool gate) and posts text
// as its next task.
func (h *Handler) startCampaignTask(ctx context.Context, c auth.Caller, ref agentRef, d *campaignData, text string) (task, error) {
	if d.ContextID == "" {
		// The session records the access it was opened with: workspace,
		// whatever the caller's token, so the campaign's turns never run
		// with more.
		wc := auth.Caller{Token: auth.Token{ID: c.Token.ID, Level: auth.Workspace, Workspace: ref.ws, Name: c.Token.Name}}
		sess, err := h.chat.CreateSession(ctx, wc, chat.NewSession{Workspace: ref.ws, Agent: ref.agent, External: true})
		if err != nil {
			return task{}, err
		}
		if _, err := h.proto.Create(ctx, work.Item{Kind: KindCampaignContext, ID: sess.ID, Workspace: ref.ws,
			Status: contextOpen, Data: mustJSON(map[string]string{"campaign": campaignKey(ref, d.CampaignID)})}); err != nil {
			return task{}, err
		}
		d.ContextID = sess.ID
	}
	// No message-id turn: a control send is made once by its request id.
	it, err := h.chat.PostExternal(ctx, c, d.ContextID, text, "")
	if err != nil {
		return task{}, err
	}
	td, _ := chat.ParseTurnData(it.Data)
	return h.taskOf(ctx, c, it, td)
}

// campaignCancel carries out a CancelTask under the extension: the task must
// be one of the campaign's.
func (h *Handler) campaignCancel(ctx context.Context, c auth.Caller, ref agentRef, id string, m *controlMeta) (task, error) {
	seen, rec, replayed, err := h.reserve(ctx, c, ref, "CancelTask", m, func(d *campaignData) error {
		for _, t := range d.Tasks {
			if t == id {
				return nil
			}
		}
		return errTaskNotFound(id)
	})
	if err != nil {
		return task{}, err
	}
	if replayed != nil {
		t, _, err := h.loadTask(ctx, c, ref, id)
		return t, err
	}
	t, err := h.cancel(ctx, c, ref, id)
	var result json.RawMessage
	if err == nil {
		result = mustJSON(map[string]string{"taskId": id})
	}
	if ferr := h.finish(ctx, ref, seen, rec, id, result, err, func(*campaignData) {}); ferr != nil && err == nil {
		err = ferr
	}
	return t, err
}

// ToolGate returns the chat tool gate for campaigns: a turn of a campaign's
// context gets no egress or cross-workspace tools unless its policy allows
// them. When the policy cannot be read it allows neither (fails closed).
func ToolGate(r work.Reader) chat.ToolGate {
	return func(ctx context.Context, sess session.Session, tools []chat.Tool) []chat.Tool {
		if !sess.External {
			return tools
		}
		var pol Policy
		it, err := r.GetItem(ctx, KindCampaignContext, sess.ID)
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return tools
		}
		if err == nil {
			var cc struct{ Campaign string }
			if err = json.Unmarshal(it.Data, &cc); err == nil {
				var camp work.Item
				if camp, err = r.GetItem(ctx, KindCampaign, cc.Campaign); err == nil {
					var d campaignData
					if err = json.Unmarshal(camp.Data, &d); err == nil {
						pol = d.Policy
					}
				}
			}
		}
		if err != nil {
			pol = Policy{}
		}
		out := tools[:0:0]
		for _, t := range tools {
			if (t.Egress && !pol.AllowEgress) || (t.CrossWorkspace && !pol.AllowCrossWorkspace) {
				continue
			}
			out = append(out, t)
		}
		return out
	}
}

// ReasonCampaignContext: the chat API refused a post into a campaign's
// context (ECONFLICT).
const ReasonCampaignContext = "campaign_context"

// PostGuard is chat's post guard for campaigns: the chat API may read a
// campaign's context but not write to it (only the campaign's controller
// does, through the extension's control writes).
func PostGuard(r work.Reader) chat.PostGuard {
	return func(ctx context.Context, sess session.Session) error {
		if !sess.External {
			return nil
		}
		_, err := r.GetItem(ctx, KindCampaignContext, sess.ID)
		switch molt.ErrorCode(err) {
		case molt.ENOTFOUND:
			return nil
		case "":
			return molt.Conflict(ReasonCampaignContext, "session %s is the context of an A2A campaign: only its controller writes to it", sess.ID)
		}
		return err
	}
}

// guardContext refuses a write outside the extension to a campaign's context
// (-32008): only its controller, through control writes, adds or cancels the
// campaign's tasks.
func (h *Handler) guardContext(ctx context.Context, sessionID string) error {
	if h.proto == nil || sessionID == "" {
		return nil
	}
	_, err := h.store.GetItem(ctx, KindCampaignContext, sessionID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	return &rpcError{Code: codeExtension, Message: "context " + sessionID + " belongs to a campaign: write to it with the extension " +
		ExtCampaign + " (a control write of its controller)"}
}
