package httpapi

import (
	"net/http"
	"strings"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/console"
	"github.com/molt-dev/molt/internal/molt"
)

// consoleRoutes registers the web console (internal/console): its page and its
// hashed assets, open to everyone (the page holds no data; every call it makes
// carries the token the user pastes in), plus the two routes only the console
// needs: who the token is, and the change feed.
func (s *server) consoleRoutes() {
	c := console.Default()
	s.route("GET /{$}", s.open(func(w http.ResponseWriter, r *http.Request) error {
		c.ServeIndex(w, r)
		return nil
	}))
	s.route("GET /assets/{name}", s.open(func(w http.ResponseWriter, r *http.Request) error {
		if !c.ServeAsset(w, r, r.PathValue("name")) {
			console.SetHeaders(w.Header())
			return molt.NotFound("no such asset")
		}
		return nil
	}))
	s.handle("GET /api/me", s.me)
	s.handle("GET /api/changes", s.changesFeed)
}

// meJSON is the caller's token as the console shows it (never the secret).
type meJSON struct {
	ID        string `json:"id"`
	Level     string `json:"level"`
	Workspace string `json:"workspace,omitempty"`
	Name      string `json:"name,omitempty"`
}

func (s *server) me(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	writeJSON(w, http.StatusOK, meJSON{ID: c.Token.ID, Level: string(c.Token.Level), Workspace: c.Token.Workspace, Name: c.Token.Name})
	return nil
}

// changesFeed answers GET /api/changes?after=<cursor>: the work items (turns,
// runs, applies, rollbacks) visible to the caller that changed since the cursor;
// see internal/changes.
func (s *server) changesFeed(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	after := strings.TrimSpace(r.URL.Query().Get("after"))
	f, err := s.changes.Poll(r.Context(), c, after)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}
