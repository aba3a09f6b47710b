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
func notFoundWS(ws string) error { return molt.NotFound("workspace %q not found", ws) }

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

// authorize decides a caller's access to workspace ws (Global: the shared
// surface, readable by every caller). A workspace the caller may not read is
// ENOTFOUND; a write without full access is EFORBIDDEN.
func authorize(c auth.Caller, ws string, write bool) error {
	if ws != workspace.Global && !c.CanRead(ws) {
		return notFoundWS(ws)
	}
	if write && !c.IsFull() {
		return forbidden("a %s token cannot change workspaces or files", c.Token.Level)
	}
	return nil
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
	out := listResponse[workspaceJSON]{Items: []workspaceJSON{}}
	if !c.IsFull() {
		// A scoped token sees only its own workspace, on one page.
		if pq.Cursor == "" {
			ws, err := s.store.GetWorkspace(r.Context(), c.Token.Workspace)
			switch {
			case err == nil:
				out.Items = append(out.Items, toWorkspaceJSON(ws))
			case molt.ErrorCode(err) != molt.ENOTFOUND:
				return fmt.Errorf("get workspace %s: %w", c.Token.Workspace, err)
			}
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	p, err := s.store.ListWorkspaces(r.Context(), pq)
	if err != nil {
		return fmt.Errorf("list workspaces: %w", err)
	}
	for _, ws := range p.Items {
		out.Items = append(out.Items, toWorkspaceJSON(ws))
	}
	out.NextCursor = p.Next
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getWorkspace(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	name, err := workspaceName(r, true)
	if err != nil {
		return err
	}
	if name == workspace.Global {
		return molt.NotFound(`"global" is the shared surface, not a workspace; see /api/workspaces/global/files`)
	}
	if err := authorize(c, name, false); err != nil {
		return err
	}
	ws, err := s.store.GetWorkspace(r.Context(), name)
	if err != nil {
		return fmt.Errorf("get workspace %s: %w", name, err)
	}
	writeJSON(w, http.StatusOK, toWorkspaceJSON(ws))
	return nil
}

func (s *server) putWorkspace(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	name, err := workspaceName(r, false)
	if err != nil {
		return err
	}
	if err := authorize(c, name, true); err != nil {
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
	ctx := r.Context()
	ws := workspace.Workspace{Name: name} // the store stamps the times
	if in.Description != nil {
		if len(*in.Description) > workspace.MaxDescLength {
			return molt.Invalid("description", "description over %d characters", workspace.MaxDescLength)
		}
		ws.Description = *in.Description
	} else {
		// Without a description, an update keeps the one it has.
		old, err := s.store.GetWorkspace(ctx, name)
		switch {
		case err == nil:
			ws.Description = old.Description
		case molt.ErrorCode(err) != molt.ENOTFOUND:
			return fmt.Errorf("get workspace %s: %w", name, err)
		}
	}
	saved, created, err := s.store.PutWorkspace(ctx, ws)
	if err != nil {
		return fmt.Errorf("put workspace %s: %w", name, err)
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
	if err := authorize(c, name, true); err != nil {
		return err
	}
	if err := s.store.DeleteWorkspace(r.Context(), name); err != nil {
		return fmt.Errorf("delete workspace %s: %w", name, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
