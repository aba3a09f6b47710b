// Package workspace holds workspaces and their prompt surface: the files that make an
// agent's behaviour (INSTRUCTIONS.md, INDEX.md, USER.md, agents/<id>/…, skills/<id>/…,
// prompts/{bootstrap,all,root}/*.md), path validation, and the effective surface
// (global files overridden by the workspace's).
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
)

// Global is the reserved name of the surface shared by every workspace.
const Global = "global"

// Limits.
const (
	MaxFileSize   = 256 << 10 // bytes of one file
	MaxPathLen    = 256
	MaxFiles      = 500 // files in one workspace surface
	MaxDescLength = 500
)

var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Workspace is a named prompt surface.
type Workspace struct {
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// File is one file of a surface.
type File struct {
	Workspace string    `json:"workspace"` // Global for the shared surface
	Path      string    `json:"path"`
	Content   []byte    `json:"-"`
	SHA256    string    `json:"sha256"`
	Size      int       `json:"size"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewFile returns a File with its hash and size computed.
func NewFile(ws, path string, content []byte, now time.Time) File {
	sum := sha256.Sum256(content)
	return File{Workspace: ws, Path: path, Content: content, SHA256: hex.EncodeToString(sum[:]), Size: len(content), UpdatedAt: now}
}

// ValidateName returns EINVALID (field "workspace") unless name is a valid workspace
// name. The reserved name Global is valid here; callers creating workspaces refuse it.
func ValidateName(name string) error {
	if name == "" {
		return molt.Invalid("workspace", "workspace name is empty")
	}
	if !nameRe.MatchString(name) {
		return molt.Invalid("workspace", "workspace name %q must match %s", name, nameRe.String())
	}
	return nil
}

// Store keeps workspaces and their files.
type Store interface {
	// PutWorkspace creates or updates a workspace (CreatedAt kept on update).
	// It reports whether it was created. EINVALID for a bad name; ECONFLICT with
	// reason "deleting" while an adapter that deletes in steps (DynamoDB) is still
	// removing a workspace of that name.
	PutWorkspace(ctx context.Context, w Workspace) (Workspace, bool, error)
	// GetWorkspace returns ENOTFOUND when absent.
	GetWorkspace(ctx context.Context, name string) (Workspace, error)
	// ListWorkspaces lists newest first.
	ListWorkspaces(ctx context.Context, q page.Query) (page.Page[Workspace], error)
	// DeleteWorkspace removes a workspace and its files; ENOTFOUND when absent.
	DeleteWorkspace(ctx context.Context, name string) error

	// PutFile writes one file of ws (Global allowed) after ValidatePath and the
	// size limit; EINVALID/ETOOLARGE write nothing. ENOTFOUND when ws does not
	// exist (Global always exists).
	PutFile(ctx context.Context, f File) (File, error)
	// GetFile returns ENOTFOUND when absent.
	GetFile(ctx context.Context, ws, path string) (File, error)
	// ListFiles returns every file of ws with content, sorted by path.
	ListFiles(ctx context.Context, ws string) ([]File, error)
	// ListSurface returns, in one request where the adapter can, every file of
	// the global surface and every file of ws (none when ws is Global), each
	// with content and sorted by path. EINVALID for a bad name.
	ListSurface(ctx context.Context, ws string) (global, own []File, err error)
	// DeleteFile returns ENOTFOUND when absent.
	DeleteFile(ctx context.Context, ws, path string) error
	// PutFileIf is PutFile conditional on the stored file: ECONFLICT with reason
	// ReasonPrecondition, writing nothing, unless m holds for it when written.
	// The zero Match makes it PutFile.
	PutFileIf(ctx context.Context, f File, m Match) (File, error)
	// DeleteFileIf is DeleteFile conditional on the stored file: ECONFLICT with
	// reason ReasonPrecondition, deleting nothing, unless m holds for it (a
	// Match that requires the file makes its absence a failed precondition, not
	// ENOTFOUND). The zero Match makes it DeleteFile.
	DeleteFileIf(ctx context.Context, ws, path string, m Match) error
}
