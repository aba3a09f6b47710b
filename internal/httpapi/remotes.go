package httpapi

import (
	"net/http"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/delegate"
)

// remoteRoutes are the delegation registry and the read-only resolver.
func (s *server) remoteRoutes() {
	s.handle("GET /api/workspaces/{ws}/remotes", s.listRemotes)
	s.handle("PUT /api/workspaces/{ws}/remotes/{name}", s.putRemote)
	s.handle("GET /api/workspaces/{ws}/remotes/{name}", s.getRemote)
	s.handle("DELETE /api/workspaces/{ws}/remotes/{name}", s.deleteRemote)
	s.handle("POST /api/workspaces/{ws}/resolve", s.resolve)
}

func (s *server) listRemotes(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	out, err := s.delegate.ListRemotes(r.Context(), c, ws)
	if err != nil {
		return err
	}
	if out == nil {
		out = []delegate.Remote{}
	}
	writeJSON(w, http.StatusOK, listResponse[delegate.Remote]{Items: out})
	return nil
}

func (s *server) getRemote(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	out, err := s.delegate.GetRemote(r.Context(), c, ws, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) putRemote(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	// Refused before the body is read.
	if _, err := s.delegate.ListRemotes(r.Context(), c, ws); err != nil {
		return err
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	var in delegate.RemoteInput
	if err := decodeStrict(body, &in); err != nil {
		return err
	}
	out, created, err := s.delegate.PutRemote(r.Context(), c, ws, r.PathValue("name"), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}

func (s *server) deleteRemote(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	if err := s.delegate.DeleteRemote(r.Context(), c, ws, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// resolve prints how a message would route, without dispatching it.
func (s *server) resolve(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	var in struct {
		Text string `json:"text"`
	}
	if err := decodeStrict(body, &in); err != nil {
		return err
	}
	out, err := s.delegate.Resolve(r.Context(), c, ws, in.Text)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
