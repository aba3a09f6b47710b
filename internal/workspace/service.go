package workspace

import (
	"context"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
)

// Caller is what the Service needs to know of who calls it (auth.Caller has
// it): which workspace it may read, whether it has full access, and, for a
// scoped caller, its one workspace.
type Caller interface {
	CanRead(ws string) bool
	IsFull() bool
	// Scope is the one workspace of a scoped caller ("" for a full one).
	Scope() string
}

// Service is the application service of workspaces and their files: it checks
// the caller's access itself, so a transport (internal/httpapi) only parses and
// answers. A workspace the caller may not read is ENOTFOUND, exactly like one
// that does not exist; a change without full access is EFORBIDDEN.
type Service struct {
	Store    Store
	Surfaces *Surfaces
	Now      func() time.Time
}

// NotFound is the error for an absent workspace and for one the caller may not see.
func NotFound(ws string) error { return molt.NotFound("workspace %q not found", ws) }

// Authorize decides a caller's access to ws (Global, the shared surface, is
// readable by every caller): ENOTFOUND for a workspace it may not read,
// EFORBIDDEN for a change without full access. Every method checks it; a
// transport may call it first to refuse before reading a request's body.
func Authorize(c Caller, ws string, write bool) error { return authorize(c, ws, write) }

func authorize(c Caller, ws string, write bool) error {
	if err := ValidateName(ws); err != nil {
		return err
	}
	if ws != Global && !c.CanRead(ws) {
		return NotFound(ws)
	}
	if write && !c.IsFull() {
		return &molt.Error{Code: molt.EFORBIDDEN, Message: "only a full token can change workspaces or files"}
	}
	return nil
}

// exists returns ENOTFOUND unless ws is Global or an existing workspace.
func (s *Service) exists(ctx context.Context, ws string) error {
	if ws == Global {
		return nil
	}
	if _, err := s.Store.GetWorkspace(ctx, ws); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return NotFound(ws)
		}
		return fmt.Errorf("get workspace %s: %w", ws, err)
	}
	return nil
}

// List lists the workspaces the caller may see, newest first: every one for a
// full caller, its own (on one page) for a scoped one.
func (s *Service) List(ctx context.Context, c Caller, q page.Query) (page.Page[Workspace], error) {
	if !c.IsFull() {
		var out page.Page[Workspace]
		if q.Cursor != "" {
			return out, nil
		}
		ws, err := s.Store.GetWorkspace(ctx, c.Scope())
		switch {
		case err == nil:
			out.Items = append(out.Items, ws)
		case molt.ErrorCode(err) != molt.ENOTFOUND:
			return out, fmt.Errorf("get workspace %s: %w", c.Scope(), err)
		}
		return out, nil
	}
	p, err := s.Store.ListWorkspaces(ctx, q)
	if err != nil {
		return p, fmt.Errorf("list workspaces: %w", err)
	}
	return p, nil
}

// Get returns workspace name. ENOTFOUND when absent or not the caller's.
func (s *Service) Get(ctx context.Context, c Caller, name string) (Workspace, error) {
	if err := authorize(c, name, false); err != nil {
		return Workspace{}, err
	}
	if name == Global {
		return Workspace{}, molt.NotFound(`"global" is the shared surface, not a workspace; see /api/workspaces/global/files`)
	}
	ws, err := s.Store.GetWorkspace(ctx, name)
	if err != nil {
		return Workspace{}, fmt.Errorf("get workspace %s: %w", name, err)
	}
	return ws, nil
}

// Put creates or updates workspace name (full callers only); a nil
// description keeps the one it has. It reports whether it was created.
func (s *Service) Put(ctx context.Context, c Caller, name string, description *string) (Workspace, bool, error) {
	if err := authorize(c, name, true); err != nil {
		return Workspace{}, false, err
	}
	ws := Workspace{Name: name} // the store stamps the times
	if description != nil {
		if len(*description) > MaxDescLength {
			return Workspace{}, false, molt.Invalid("description", "description over %d characters", MaxDescLength)
		}
		ws.Description = *description
	} else {
		old, err := s.Store.GetWorkspace(ctx, name)
		switch {
		case err == nil:
			ws.Description = old.Description
		case molt.ErrorCode(err) != molt.ENOTFOUND:
			return Workspace{}, false, fmt.Errorf("get workspace %s: %w", name, err)
		}
	}
	saved, created, err := s.Store.PutWorkspace(ctx, ws)
	if err != nil {
		return Workspace{}, false, fmt.Errorf("put workspace %s: %w", name, err)
	}
	return saved, created, nil
}

// Delete removes workspace name and its files (full callers only).
func (s *Service) Delete(ctx context.Context, c Caller, name string) error {
	if err := authorize(c, name, true); err != nil {
		return err
	}
	if err := s.Store.DeleteWorkspace(ctx, name); err != nil {
		return fmt.Errorf("delete workspace %s: %w", name, err)
	}
	return nil
}

// Files returns the stored surface of ws (global files overridden by the
// workspace's), or the global surface itself for Global, in one read.
func (s *Service) Files(ctx context.Context, c Caller, ws string) ([]EffectiveFile, error) {
	if err := authorize(c, ws, false); err != nil {
		return nil, err
	}
	if err := s.exists(ctx, ws); err != nil {
		return nil, err
	}
	sf, err := s.Surfaces.Read(ctx, ws)
	if err != nil {
		return nil, err
	}
	return sf.Stored(), nil
}

// File returns the file p of ws's stored surface and its scope.
func (s *Service) File(ctx context.Context, c Caller, ws, p string) (File, string, error) {
	if err := authorize(c, ws, false); err != nil {
		return File{}, "", err
	}
	if err := s.exists(ctx, ws); err != nil {
		return File{}, "", err
	}
	return s.Surfaces.File(ctx, ws, p)
}

// PutFile writes p of ws with content when m holds for the workspace's own
// stored file (full callers only): ECONFLICT/ReasonPrecondition otherwise,
// nothing written. It reports whether the file was created.
func (s *Service) PutFile(ctx context.Context, c Caller, ws, p string, content []byte, m Match) (File, bool, error) {
	if err := authorize(c, ws, true); err != nil {
		return File{}, false, err
	}
	created := false
	switch _, err := s.Store.GetFile(ctx, ws, p); {
	case molt.ErrorCode(err) == molt.ENOTFOUND:
		created = true
	case err != nil:
		return File{}, false, fmt.Errorf("get file %s of %s: %w", p, ws, err)
	}
	f, err := s.Store.PutFileIf(ctx, NewFile(ws, p, content, s.Now()), m)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return File{}, false, NotFound(ws)
		}
		return File{}, false, fmt.Errorf("put file %s of %s: %w", p, ws, err)
	}
	return f, created, nil
}

// DeleteFile removes p of ws when m holds (full callers only).
func (s *Service) DeleteFile(ctx context.Context, c Caller, ws, p string, m Match) error {
	if err := authorize(c, ws, true); err != nil {
		return err
	}
	if err := s.exists(ctx, ws); err != nil {
		return err
	}
	if err := s.Store.DeleteFileIf(ctx, ws, p, m); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return molt.NotFound("file %q not found", p)
		}
		return fmt.Errorf("delete file %s of %s: %w", p, ws, err)
	}
	return nil
}
