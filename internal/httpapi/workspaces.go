package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/workspace"
)

// listResponse is every listing's shape. NextCursor is "" on the last page.
type listResponse[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// workspaceJSON is a workspace as the API shows it.
type workspaceJSON struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func toWorkspaceJSON(w workspace.Workspace) workspaceJSON {
	return workspaceJSON{Name: w.Name, Description: w.Description, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}

// notFoundWS is the answer both for an absent workspace and for one the caller
// may not see.
func notFoundWS(ws string) error { return workspace.NotFound(ws) }

func forbidden(format string, args ...any) error {
	return &molt.Error{Code: molt.EFORBIDDEN, Message: fmt.Sprintf(format, args...)}
}

// workspaceName validates the {ws} path value of a workspace route; the reserved
// global name is refused unless allowGlobal.
func workspaceName(r *http.Request, allowGlobal bool) (string, error) {
	ws := r.PathValue("ws")
	if err := workspace.ValidateName(ws); err != nil {
		return "", err
	}
	if ws == workspace.Global && !allowGlobal {
		return "", &molt.Error{Code: molt.EINVALID, Reason: reasonReserved, Field: "workspace",
			Message: `"global" is the reserved name of the shared surface`}
	}
	return ws, nil
}

func (s *server) listWorkspaces(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	q := r.URL.Query()
	var pq page.Query
	pq.Cursor = q.Get("cursor")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > page.MaxLimit {
			return molt.Invalid("limit", "limit must be an integer between 1 and %d", page.MaxLimit)
		}
		pq.Limit = n
	}
	if _, _, err := pq.Normalize(); err != nil {
		return err
	}
	p, err := s.workspaces.List(r.Context(), c, pq)
	if err != nil {
		return err
	}
	out := listResponse[workspaceJSON]{Items: []workspaceJSON{}, NextCursor: p.Next}
	for _, ws := range p.Items {
		out.Items = append(out.Items, toWorkspaceJSON(ws))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getWorkspace(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	name, err := workspaceName(r, true)
	if err != nil {
		return err
	}
	ws, err := s.workspaces.Get(r.Context(), c, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toWorkspaceJSON(ws))
	return nil
}

func (s *server) putWorkspace(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	name, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	// Refused before the body is read.
	if err := workspace.Authorize(c, name, true); err != nil {
		return err
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	var in struct {
		Description *string `json:"description"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeStrict(body, &in); err != nil {
			return err
		}
	}
	saved, created, err := s.workspaces.Put(r.Context(), c, name, in.Description)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, toWorkspaceJSON(saved))
	return nil
}

func (s *server) deleteWorkspace(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	name, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	if err := s.workspaces.Delete(r.Context(), c, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
