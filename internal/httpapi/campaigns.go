package httpapi

import (
	"net/http"
	"strconv"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/supervisor"
)

// campaignRoutes are the supervisor's campaigns (full tokens only; the
// service checks).
func (s *server) campaignRoutes() {
	s.handle("POST /api/campaigns", s.createCampaign)
	s.handle("GET /api/campaigns", s.listCampaigns)
	s.handle("GET /api/campaigns/{id}", s.getCampaign)
	s.handle("DELETE /api/campaigns/{id}", s.deleteCampaign)
	s.handle("GET /api/campaigns/{id}/events", s.campaignEvents)
	s.handle("GET /api/campaigns/{id}/decisions", s.campaignDecisions)
	s.handle("POST /api/campaigns/{id}/control", s.controlCampaign)
	s.handle("POST /api/campaigns/{id}/submit", s.submitCampaign)
	s.handle("POST /api/campaigns/{id}/cancel", s.cancelCampaign)
}

// campaignView is a campaign as the API shows it: its record and its open
// intents.
type campaignView struct {
	supervisor.Campaign
	OpenIntents []supervisor.Intent `json:"open_intents"`
}

func view(c supervisor.Campaign) campaignView {
	v := campaignView{Campaign: c, OpenIntents: c.OpenIntents()}
	if v.OpenIntents == nil {
		v.OpenIntents = []supervisor.Intent{}
	}
	v.Outbox = nil
	return v
}

func (s *server) createCampaign(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if !c.IsFull() {
		_, err := s.supervisor.List(r.Context(), c) // the service's refusal
		return err
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	var in supervisor.Input
	if err := decodeStrict(body, &in); err != nil {
		return err
	}
	out, err := s.supervisor.Create(r.Context(), c, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, view(out))
	return nil
}

func (s *server) listCampaigns(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	out, err := s.supervisor.List(r.Context(), c)
	if err != nil {
		return err
	}
	items := make([]campaignView, 0, len(out))
	for _, cp := range out {
		items = append(items, view(cp))
	}
	writeJSON(w, http.StatusOK, listResponse[campaignView]{Items: items})
	return nil
}

func (s *server) getCampaign(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	out, err := s.supervisor.Get(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(out))
	return nil
}

func (s *server) deleteCampaign(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if err := s.supervisor.Delete(r.Context(), c, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) campaignEvents(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	after := 0
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return molt.Invalid("after", "after must be an event seq (a number >= 0)")
		}
		after = n
	}
	out, next, err := s.supervisor.EventPage(r.Context(), c, r.PathValue("id"), after, 100)
	if err != nil {
		return err
	}
	// next_cursor is the after= of the next page ("" on the last one).
	page := listResponse[supervisor.Event]{Items: out}
	if next > 0 {
		page.NextCursor = strconv.Itoa(next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// campaignDecisions lists the campaign's decisions, newest first: each
// event's proposals, verdicts, rounds and outcome.
func (s *server) campaignDecisions(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			return molt.Invalid("limit", "limit must be 1..50")
		}
		limit = n
	}
	out, err := s.supervisor.Decisions(r.Context(), c, r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listResponse[supervisor.Decision]{Items: out})
	return nil
}

// campaignBody reads a small body into v once the caller may act (full).
func (s *server) campaignBody(w http.ResponseWriter, r *http.Request, c auth.Caller, v any) error {
	if !c.IsFull() {
		_, err := s.supervisor.List(r.Context(), c)
		return err
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

func (s *server) controlCampaign(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	var in struct {
		Action string `json:"action"`
	}
	if err := s.campaignBody(w, r, c, &in); err != nil {
		return err
	}
	out, err := s.supervisor.Control(r.Context(), c, r.PathValue("id"), in.Action)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, view(out))
	return nil
}

func (s *server) submitCampaign(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	var in struct {
		Text string `json:"text"`
	}
	if err := s.campaignBody(w, r, c, &in); err != nil {
		return err
	}
	out, err := s.supervisor.Submit(r.Context(), c, r.PathValue("id"), in.Text)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, view(out))
	return nil
}

func (s *server) cancelCampaign(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	out, err := s.supervisor.Cancel(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, view(out))
	return nil
}
