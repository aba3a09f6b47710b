package httpapi

import (
	"net/http"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/search"
)

func (s *server) searchRoutes() {
	s.handle("GET /api/search", s.webSearch)
}

// webSearch runs a query through the search chain for a full or workspace
// token (readonly tokens cannot chat, so they cannot search either) and
// answers {backend, results, attempts}. When every backend failed it is 503
// search_unavailable with the attempts as the problem's details: never an
// empty success.
func (s *server) webSearch(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if c.Token.Level != auth.Full && c.Token.Level != auth.Workspace {
		return &molt.Error{Code: molt.EFORBIDDEN, Message: "searching needs a full or workspace token"}
	}
	q := r.URL.Query()
	resp, err := s.search.Search(r.Context(), search.Query{Text: q.Get("q"), Backend: q.Get("backend")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
