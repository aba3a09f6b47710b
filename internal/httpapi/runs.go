package httpapi

import (
	"net/http"
	"strconv"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// runRoutes registers the evolution run administration. Every
// route needs a full token: workspace and readonly tokens get 403. A refusal of
// the run table is 409 with a stable code (run_not_reviewable, run_active,
// run_not_retryable, hint_required, apply_in_flight).
func (s *server) runRoutes() {
	s.handle("GET /api/evolution/runs", s.full(s.listRuns))
	s.handle("GET /api/evolution/runs/{id}", s.full(s.getRun))
	s.handle("POST /api/evolution/runs/{id}/approve", s.full(s.approveRun))
	s.handle("POST /api/evolution/runs/{id}/reject", s.full(s.rejectRun))
	s.handle("POST /api/evolution/runs/{id}/retry", s.full(s.retryRun))
	s.handle("DELETE /api/evolution/runs/{id}", s.full(s.deleteRun))
}

// full refuses callers without a full token before anything is read.
func (s *server) full(fn authedFunc) authedFunc {
	return func(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
		if !c.IsFull() {
			return forbidden("evolution administration needs a full token")
		}
		return fn(w, r, c)
	}
}

func (s *server) listRuns(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	q := r.URL.Query()
	lq := runs.ListQuery{Status: work.Status(q.Get("status")), Filter: q.Get("filter"),
		Page: page.Query{Cursor: q.Get("cursor")}}
	switch q.Get("view") {
	case "":
	case "archived":
		lq.Archived = true
	default:
		return molt.Invalid("view", "view must be archived or absent")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > page.MaxLimit {
			return molt.Invalid("limit", "limit must be an integer between 1 and %d", page.MaxLimit)
		}
		lq.Page.Limit = n
	}
	p, err := s.runs.List(r.Context(), lq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listResponse[runs.View]{Items: p.Items, NextCursor: p.Next})
	return nil
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	d, err := s.runs.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *server) approveRun(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	var in struct {
		ReviewerHint *string `json:"reviewer_hint"`
	}
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	hint := ""
	if in.ReviewerHint != nil {
		hint = *in.ReviewerHint
	}
	v, err := s.runs.Approve(r.Context(), r.PathValue("id"), hint)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *server) rejectRun(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	var in struct{}
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	v, err := s.runs.Reject(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *server) retryRun(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	var in struct {
		Hint *string `json:"hint"`
	}
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	hint := ""
	if in.Hint != nil {
		hint = *in.Hint
	}
	v, err := s.runs.Retry(r.Context(), r.PathValue("id"), hint)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *server) deleteRun(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	if err := s.runs.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
