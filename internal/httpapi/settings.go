package httpapi

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/settings"
)

func (s *server) getSettings(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if !c.IsFull() {
		return forbidden("settings need a full token")
	}
	st, err := s.store.GetSettings(r.Context())
	if err != nil {
		return fmt.Errorf("get settings: %w", err)
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// putSettings applies a partial update (any subset of the keys) and answers the
// full result. Out-of-range values are 400 naming the key.
func (s *server) putSettings(w http.ResponseWriter, r *http.Request, c auth.Caller) error {
	if !c.IsFull() {
		return forbidden("settings need a full token")
	}
	body, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	cur, err := s.store.GetSettings(ctx)
	if err != nil {
		return fmt.Errorf("get settings: %w", err)
	}
	if err := checkKeys(body, reflect.TypeOf(cur)); err != nil {
		return err
	}
	next, err := settings.Merge(cur, body)
	if err != nil {
		return err
	}
	if err := s.store.PutSettings(ctx, next); err != nil {
		return fmt.Errorf("put settings: %w", err)
	}
	writeJSON(w, http.StatusOK, next)
	return nil
}
