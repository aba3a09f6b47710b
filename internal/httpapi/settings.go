package httpapi

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/settings"
)

// settingsETag is the entity tag of a settings revision.
func settingsETag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

func (s *server) getSettings(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	st, rev, err := s.settings.Get(r.Context(), c)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", settingsETag(rev))
	writeJSON(w, http.StatusOK, st)
	return nil
}

// putSettings applies a partial update (any subset of the keys) and answers the
// full result with its ETag. Out-of-range values are 400 naming the key. With
// If-Match the update applies only over one of the named revisions (409
// settings_changed otherwise); without it, concurrent updates are merged.
func (s *server) putSettings(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if err := s.settings.Authorize(c); err != nil {
		return err // before the body is read
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	if err := checkKeys(body, reflect.TypeOf(settings.Settings{})); err != nil {
		return err
	}
	var next settings.Settings
	var rev int64
	if revs, ok := ifMatchRevisions(r); ok {
		next, rev, err = s.settings.UpdateIf(r.Context(), c, body, revs)
	} else {
		next, rev, err = s.settings.Update(r.Context(), c, body)
	}
	if err != nil {
		return err
	}
	w.Header().Set("ETag", settingsETag(rev))
	writeJSON(w, http.StatusOK, next)
	return nil
}

// ifMatchRevisions returns the revisions an If-Match header names and whether
// it is a condition at all (absent or "*" is none: the settings always exist).
// A tag that is not a revision's ETag matches nothing.
func ifMatchRevisions(r *http.Request) ([]int64, bool) {
	vals := r.Header.Values("If-Match")
	if len(vals) == 0 {
		return nil, false
	}
	revs := []int64{}
	for _, v := range vals {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" {
				return nil, false
			}
			if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
				continue // a weak or malformed tag never matches strongly
			}
			if n, err := strconv.ParseInt(t[1:len(t)-1], 10, 64); err == nil && n >= 0 {
				revs = append(revs, n)
			}
		}
	}
	return revs, true
}

func (s *server) getWorkspaceSettings(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws, err := s.wsSettings.Get(r.Context(), c, r.PathValue("ws"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", settingsETag(ws.Revision))
	writeJSON(w, http.StatusOK, ws)
	return nil
}

// putWorkspaceSettings applies a partial update of a workspace's overrides (a
// key given as null inherits the global value again) and answers the result
// with its ETag. With If-Match the update applies only over one of the named
// revisions (409 settings_changed otherwise); without it, concurrent updates
// are merged.
func (s *server) putWorkspaceSettings(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	ws := r.PathValue("ws")
	if err := s.wsSettings.AuthorizeWorkspace(c, ws, true); err != nil {
		return err // before the body is read
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	if err := checkKeys(body, reflect.TypeOf(settings.Overrides{})); err != nil {
		return err
	}
	var next settings.WorkspaceSettings
	if revs, ok := ifMatchRevisions(r); ok {
		next, err = s.wsSettings.UpdateIf(r.Context(), c, ws, body, revs)
	} else {
		next, err = s.wsSettings.Update(r.Context(), c, ws, body)
	}
	if err != nil {
		return err
	}
	w.Header().Set("ETag", settingsETag(next.Revision))
	writeJSON(w, http.StatusOK, next)
	return nil
}
