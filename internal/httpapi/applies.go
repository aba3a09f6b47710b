package httpapi

import (
	"net/http"

	"github.com/molt-dev/molt/internal/auth"
)

// applyRoutes registers the evolution apply administration.
// Both routes need a full token. A refused rollback is 409 with a stable code:
// not_applied, apply_in_flight, no_snapshot, conflict (details.conflicts lists
// {rel, reason}) or backup_mismatch (details.files).
func (s *server) applyRoutes() {
	s.handle("GET /api/evolution/applies/{id}", s.full(s.getApply))
	s.handle("POST /api/evolution/applies/{id}/rollback", s.full(s.rollbackApply))
}

func (s *server) getApply(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	v, err := s.applies.View(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// rollbackReply is the rollback's answer: these fields and nothing else.
type rollbackReply struct {
	OK          bool     `json:"ok"`
	Restored    []string `json:"restored"`
	Removed     []string `json:"removed"`
	RemovedDirs []string `json:"removedDirs"`
	KeptDirs    []string `json:"keptDirs"`
}

func (s *server) rollbackApply(w http.ResponseWriter, r *http.Request, _ auth.Caller) error {
	var in struct {
		Force *bool `json:"force"`
	}
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	res, err := s.applies.Rollback(r.Context(), r.PathValue("id"), in.Force != nil && *in.Force)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rollbackReply{OK: res.OK, Restored: res.Restored, Removed: res.Removed,
		RemovedDirs: res.RemovedDirs, KeptDirs: res.KeptDirs})
	return nil
}
