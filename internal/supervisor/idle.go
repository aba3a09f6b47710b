package supervisor

import (
	"context"
	"slices"
	"time"

	"github.com/molt-dev/molt/internal/a2astate"
)

// The idle heartbeat. A pass claims the campaign and ends with a write, so a
// heartbeat of a campaign where nothing happened would cost two store writes
// for nothing. Instead, a heartbeat that has nothing of its own to do first
// reads the remote once, without a claim (quiet): when the answer is the one
// the campaign last recorded, nothing is written and no pass runs. Anything
// new, and any due work of the campaign's own (requests, open intents, a
// renewal, the card, an outage), runs a full pass, which reads again under
// its claim: authority still comes only from a readback in the pass that
// writes.

// urgent reports whether campaign cp needs a full pass now, whatever the
// remote would say: it has work of its own, or something is due.
func (s *Service) urgent(cp Campaign, now time.Time) bool {
	switch {
	case len(cp.Requests) > 0, len(cp.OpenIntents()) > 0, len(cp.Outbox) > 0, cp.LastPass.IsZero(),
		cp.Unavailable != "", cp.Capabilities == nil, now.Sub(cp.Capabilities.ReadAt) >= s.cfg.CardEvery:
		return true
	case cp.Mode != ModeController:
		return false
	}
	// Renew in time whatever the heartbeat: under half the lease left (a
	// tick a little early counts); and a lease that ran out ends control.
	renew := cp.LeaseExpiresAt.Add(-time.Duration(cp.LeaseSeconds) * time.Second / 2)
	return !now.Add(s.cfg.Tick/2).Before(renew) || !now.Before(cp.LeaseExpiresAt)
}

// heartbeat reports whether a heartbeat of cp falls in this tick. Heartbeats
// are due every HeartbeatSeconds after the last written pass; a quiet one
// writes nothing, so the window is the tick's: of ticks at the tick's
// interval, one falls in each window (the cadence rounds up to the tick's). A
// tick late by more than its interval skips one heartbeat; the next one is
// read on time.
func (s *Service) heartbeat(cp Campaign, now time.Time) bool {
	h := time.Duration(cp.HeartbeatSeconds) * time.Second
	if h <= 0 {
		return true
	}
	at := now.Add(s.cfg.Tick / 2) // a tick a little early still counts
	since := at.Sub(cp.LastPass)
	if since < h {
		return false
	}
	last := cp.LastPass.Add(since / h * h) // the latest heartbeat at or before at
	return at.Sub(last) < s.cfg.Tick || h <= s.cfg.Tick
}

// quiet reads the remote once (campaign/get with the extension, the newest
// task without it) and reports whether the answer is what cp recorded: no
// change of control, lease or tasks. Any failure is not quiet (the full pass
// records it).
func (s *Service) quiet(ctx context.Context, cp Campaign) bool {
	tok, err := s.token(ctx, cp.Remote.TokenRef)
	if err != nil {
		return false
	}
	r := remote{http: s.http, token: tok, endpoint: cp.Capabilities.Endpoint}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if !cp.Capabilities.Control {
		var res struct {
			Tasks []struct {
				ID     string `json:"id"`
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"tasks"`
		}
		if r.call(ctx, "ListTasks", false, map[string]any{"pageSize": 1, "historyLength": 0}, &res) != nil {
			return false
		}
		if len(res.Tasks) == 0 {
			return cp.TaskID == ""
		}
		return res.Tasks[0].ID == cp.TaskID && res.Tasks[0].Status.State == cp.TaskState
	}
	rb := cp.Readback
	if rb == nil || !rb.Found {
		return false
	}
	var res struct {
		leaseResult
		Tasks []RemoteTask `json:"tasks"`
	}
	if r.call(ctx, "campaign/get", true, map[string]any{"campaignId": cp.ID}, &res) != nil {
		return false
	}
	exp, err := time.Parse(time.RFC3339Nano, res.LeaseExpiresAt)
	if err != nil || !exp.Equal(rb.LeaseExpiresAt) || res.Controller != rb.Controller || res.Epoch != rb.Epoch ||
		res.State != rb.State || !slices.Equal(res.Tasks, rb.Tasks) {
		return false
	}
	if cp.TaskID == "" {
		return len(res.Tasks) == 0
	}
	if a2astate.Terminal(cp.TaskState) && cp.TaskState != "" {
		return true // the task's end was recorded; the tasks did not change
	}
	for _, t := range res.Tasks {
		if t.ID == cp.TaskID {
			return t.State == cp.TaskState
		}
	}
	return false
}
