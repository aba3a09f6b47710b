package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// fileJSON is a file of a surface as the API shows it.
type fileJSON struct {
	Path      string    `json:"path"`
	SHA256    string    `json:"sha256"`
	Size      int       `json:"size"`
	Scope     string    `json:"scope"`
	UpdatedAt time.Time `json:"updated_at"`
}

func toFileJSON(f workspace.File, scope string) fileJSON {
	return fileJSON{Path: f.Path, SHA256: f.SHA256, Size: f.Size, Scope: scope, UpdatedAt: f.UpdatedAt}
}

func scopeOf(ws string) string {
	if ws == workspace.Global {
		return workspace.ScopeGlobal
	}
	return workspace.ScopeWorkspace
}

// surfacePath validates the {path...} path value; every failure is EINVALID with
// reason invalid_path.
func surfacePath(r *http.Request) (string, error) {
	p := r.PathValue("path")
	if err := workspace.ValidatePath(p); err != nil {
		var me *molt.Error
		if errors.As(err, &me) {
			return "", &molt.Error{Code: molt.EINVALID, Reason: reasonInvalidPath, Field: "path", Message: me.Message}
		}
		return "", err
	}
	return p, nil
}

// fileTarget parses the workspace and path of a file route.
func fileTarget(r *http.Request) (ws, p string, err error) {
	if ws, err = workspaceName(r, true); err != nil {
		return "", "", err
	}
	if p, err = surfacePath(r); err != nil {
		return "", "", err
	}
	return ws, p, nil
}

// requireWorkspace returns ENOTFOUND unless ws is Global or an existing workspace.
func (s *server) requireWorkspace(r *http.Request, ws string) error {
	if ws == workspace.Global {
		return nil
	}
	if _, err := s.store.GetWorkspace(r.Context(), ws); err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return notFoundWS(ws)
		}
		return fmt.Errorf("get workspace %s: %w", ws, err)
	}
	return nil
}

// listFiles lists the effective surface of ws (global files overridden by the
// workspace's), or the global surface itself for ws = global.
func (s *server) listFiles(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := workspaceName(r, true)
	if err != nil {
		return err
	}
	files, err := s.workspaces.Files(r.Context(), c, ws)
	if err != nil {
		return err
	}
	out := listResponse[fileJSON]{Items: []fileJSON{}}
	for _, f := range files {
		out.Items = append(out.Items, toFileJSON(f.File, f.Scope))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getFile(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, p, err := fileTarget(r)
	if err != nil {
		return err
	}
	f, scope, err := s.workspaces.File(r.Context(), c, ws, p)
	if err != nil {
		return err
	}
	etag := `"` + f.SHA256 + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("X-Molt-Scope", scope)
	if etagMatches(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h.Set("Content-Type", contentType(p))
	h.Set("Content-Length", strconv.Itoa(len(f.Content)))
	// Surface files are data: never let a browser run them.
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.Content)
	return nil
}

// etagMatches reports whether If-None-Match names etag (the Lambda proxy splits
// the header on commas, so every value is looked at).
func etagMatches(r *http.Request, etag string) bool {
	for _, v := range r.Header.Values("If-None-Match") {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == etag {
				return true
			}
		}
	}
	return false
}

// fileMatch is the condition a PUT or DELETE of a file puts on the workspace's
// own stored file: If-Match "<sha256>", … (one of those hashes) or * (it exists),
// If-None-Match: * (it does not exist). A weak or malformed If-Match tag never
// matches (strong comparison); other If-None-Match values are ignored.
func fileMatch(r *http.Request) workspace.Match {
	var m workspace.Match
	for _, v := range r.Header.Values("If-Match") {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			switch {
			case t == "":
			case t == "*":
				m.Exists = true
			case len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"':
				m.SHA256 = append(m.SHA256, t[1:len(t)-1])
			default:
				m.SHA256 = append(m.SHA256, "not a strong tag: "+t)
			}
		}
	}
	if len(m.SHA256) > 0 {
		m.Exists = false // the hashes already require the file
	}
	for _, v := range r.Header.Values("If-None-Match") {
		for _, t := range strings.Split(v, ",") {
			if strings.TrimSpace(t) == "*" {
				m.Absent = true
			}
		}
	}
	return m
}

// contentType of a surface file by its extension.
func contentType(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".md":
		return "text/markdown; charset=utf-8"
	case ".yaml", ".yml":
		return "application/yaml"
	}
	return "text/plain; charset=utf-8"
}

func (s *server) putFile(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, p, err := fileTarget(r)
	if err != nil {
		return err
	}
	// Refused before the body is read.
	if err := workspace.Authorize(c, ws, true); err != nil {
		return err
	}
	body, err := readBody(w, r, workspace.MaxFileSize)
	if err != nil {
		return err
	}
	f, created, err := s.workspaces.PutFile(r.Context(), c, ws, p, body, fileMatch(r))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", `"`+f.SHA256+`"`)
	writeJSON(w, status, toFileJSON(f, scopeOf(ws)))
	return nil
}

func (s *server) deleteFile(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, p, err := fileTarget(r)
	if err != nil {
		return err
	}
	if err := s.workspaces.DeleteFile(r.Context(), c, ws, p, fileMatch(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
