package workspace

import (
	"context"
	"fmt"
	"sort"

	"github.com/molt-dev/molt/internal/molt"
)

// Layered returns the effective surface over a lowest layer of built-in files:
// built-in files, replaced by global ones, replaced by the workspace's
// (Effective's rules apply at each layer: a file replaces the file of its path,
// a folder agents/<id>/, skills/<id>/ or prompts/<kind>/ replaces the lower
// folder of that name as a whole). Sorted by path.
func Layered(builtin, global, ws []File) []EffectiveFile {
	eff := Effective(global, ws)
	paths := map[string]bool{}
	folders := map[string]bool{}
	for _, f := range eff {
		paths[f.Path] = true
		if d := Folder(f.Path); d != "" {
			folders[d] = true
		}
	}
	for _, f := range builtin {
		if paths[f.Path] {
			continue
		}
		if d := Folder(f.Path); d != "" && folders[d] {
			continue
		}
		eff = append(eff, EffectiveFile{File: f, Scope: ScopeBuiltin})
	}
	sort.Slice(eff, func(i, j int) bool { return eff[i].Path < eff[j].Path })
	return eff
}

// SurfaceStore is what Surfaces reads (Store has it all).
type SurfaceStore interface {
	// ListSurface returns both stored layers of ws's surface in one request.
	ListSurface(ctx context.Context, ws string) (global, own []File, err error)
	// ListFiles returns every file of ws with content, sorted by path.
	ListFiles(ctx context.Context, ws string) ([]File, error)
	// GetFile returns ENOTFOUND when absent.
	GetFile(ctx context.Context, ws, path string) (File, error)
}

// Surfaces is the one reader of prompt surfaces: the API, the chat runtime and
// evolution runs read a workspace's surface through it, one store request per
// read.
type Surfaces struct {
	Store SurfaceStore
	// Builtin is the lowest layer of every surface (the runtime's built-in
	// files); nil for none.
	Builtin []File
}

// Surface is one read of a workspace's surface: its stored layers and the
// built-in one under them.
type Surface struct {
	Workspace string
	Builtin   []File
	Global    []File // sorted by path
	Own       []File // the workspace's own files, sorted by path; none for Global
}

// Stored is the surface as stored: global files overridden by the workspace's
// (Effective), without built-ins. For Global it is the global files.
func (s Surface) Stored() []EffectiveFile { return Effective(s.Global, s.Own) }

// Effective is the surface an agent of the workspace sees: Layered over the
// built-in files.
func (s Surface) Effective() []EffectiveFile { return Layered(s.Builtin, s.Global, s.Own) }

// Read reads ws's surface (ws may be Global) in one store request. EINVALID for
// a bad name; a workspace that does not exist reads as one without files.
func (s *Surfaces) Read(ctx context.Context, ws string) (Surface, error) {
	global, own, err := s.Store.ListSurface(ctx, ws)
	if err != nil {
		return Surface{}, fmt.Errorf("read surface of %s: %w", ws, err)
	}
	return Surface{Workspace: ws, Builtin: s.Builtin, Global: global, Own: own}, nil
}

// File returns the stored file an agent of ws sees at p, with its scope: the
// workspace's own, else the global one unless the workspace overrides its
// folder. ENOTFOUND when there is none (built-ins are not looked at).
func (s *Surfaces) File(ctx context.Context, ws, p string) (File, string, error) {
	f, err := s.Store.GetFile(ctx, ws, p)
	if err == nil {
		if ws == Global {
			return f, ScopeGlobal, nil
		}
		return f, ScopeWorkspace, nil
	}
	if molt.ErrorCode(err) != molt.ENOTFOUND {
		return File{}, "", fmt.Errorf("get file %s of %s: %w", p, ws, err)
	}
	missing := molt.NotFound("file %q not found", p)
	if ws == Global {
		return File{}, "", missing
	}
	g, err := s.Store.GetFile(ctx, Global, p)
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return File{}, "", missing
		}
		return File{}, "", fmt.Errorf("get global file %s: %w", p, err)
	}
	if Folder(p) != "" {
		// A workspace folder of the same name hides the global one as a whole.
		own, err := s.Store.ListFiles(ctx, ws)
		if err != nil {
			return File{}, "", fmt.Errorf("list files of %s: %w", ws, err)
		}
		for _, e := range Effective([]File{g}, own) {
			if e.Path == p && e.Scope == ScopeGlobal {
				return g, ScopeGlobal, nil
			}
		}
		return File{}, "", missing
	}
	return g, ScopeGlobal, nil
}
