package httpapi

import (
	"net/http"
	"time"

	"github.com/molt-dev/molt/internal/auth"
)

// tokenJSON is a token as the API shows it: never its secret or hash.
type tokenJSON struct {
	ID         string     `json:"id"`
	Level      auth.Level `json:"level"`
	Workspace  string     `json:"workspace,omitempty"`
	Name       string     `json:"name,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

func toTokenJSON(t auth.Token) tokenJSON {
	out := tokenJSON{ID: t.ID, Level: t.Level, Workspace: t.Workspace, Name: t.Name, CreatedAt: t.CreatedAt}
	if !t.LastUsedAt.IsZero() {
		out.LastUsedAt = &t.LastUsedAt
	}
	if t.Revoked() {
		out.RevokedAt = &t.RevokedAt
	}
	return out
}

func (s *server) listTokens(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if !c.IsFull() {
		return forbidden("tokens need a full token")
	}
	ts, err := s.tokens.List(r.Context(), c)
	if err != nil {
		return err
	}
	out := make([]tokenJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTokenJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
	return nil
}

// createToken answers 201 with the token and its secret, which is never shown
// again.
func (s *server) createToken(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if !c.IsFull() {
		return forbidden("tokens need a full token")
	}
	var in struct {
		Level     auth.Level `json:"level"`
		Workspace string     `json:"workspace"`
		Name      string     `json:"name"`
	}
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	secret, t, err := s.tokens.Create(r.Context(), c, in.Level, in.Workspace, in.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/tokens/"+t.ID)
	writeJSON(w, http.StatusCreated, struct {
		tokenJSON
		Secret string `json:"secret"`
	}{toTokenJSON(t), secret})
	return nil
}

// revokeToken answers 204; the token is refused from its next request on.
func (s *server) revokeToken(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if !c.IsFull() {
		return forbidden("tokens need a full token")
	}
	if _, err := s.tokens.Revoke(r.Context(), c, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
