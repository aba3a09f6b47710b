package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// statusOf maps molt error codes to HTTP statuses: the one table of the API.
var statusOf = map[string]int{
	molt.EINVALID:      http.StatusBadRequest,
	molt.EUNAUTHORIZED: http.StatusUnauthorized,
	molt.EFORBIDDEN:    http.StatusForbidden,
	molt.ENOTFOUND:     http.StatusNotFound,
	molt.ECONFLICT:     http.StatusConflict,
	molt.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	molt.EUNAVAILABLE:  http.StatusServiceUnavailable,
	molt.EINTERNAL:     http.StatusInternalServerError,
	molt.ELOSTCLAIM:    http.StatusInternalServerError,
}

// Reasons that only HTTP has, and the status each refines its code to.
const (
	reasonMethodNotAllowed = "method_not_allowed" // EINVALID → 405
	reasonMediaType        = "unsupported_media_type"
	reasonInvalidPath      = "invalid_path"
	reasonReserved         = "reserved"
)

var statusOfReason = map[string]int{
	reasonMethodNotAllowed:       http.StatusMethodNotAllowed,
	reasonMediaType:              http.StatusUnsupportedMediaType,
	workspace.ReasonPrecondition: http.StatusPreconditionFailed,
}

// problem is an RFC 9457 problem document with molt's stable code.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Detail    string `json:"detail,omitempty"`
	Field     string `json:"field,omitempty"`
	Details   any    `json:"details,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// problemFor turns err into the problem to send. internal reports whether err is
// unexpected (its detail must be logged, never sent).
func problemFor(err error) (p problem, internal bool) {
	var me *molt.Error
	if !errors.As(err, &me) {
		me = &molt.Error{Code: molt.EINTERNAL}
	}
	status, ok := statusOf[me.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if s, ok := statusOfReason[me.Reason]; ok {
		status = s
	}
	code := me.Reason
	if code == "" {
		code = me.Code
	}
	p = problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code}
	if status >= 500 && status != http.StatusServiceUnavailable {
		// Nothing of an unexpected failure reaches the client.
		p.Code = molt.EINTERNAL
		p.Detail = "internal error; see the server log for the request id"
		return p, true
	}
	p.Detail = clip(me.Message, maxDetail)
	p.Field = clip(me.Field, maxField)
	p.Details = me.Details
	return p, status >= 500
}

// Bounds of what a problem echoes: messages quote ids, names, paths and
// parameter names as the caller sent them, of any length.
const (
	maxDetail = 500
	maxField  = 100
)

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// writeError sends err as a problem and logs it when it is the server's fault.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if molt.ErrorCode(err) == molt.EINTERNAL &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(r.Context().Err(), context.DeadlineExceeded)) {
		// The request's deadline cut a store call short (a hung or slow store):
		// retrying later may work, unlike a bug.
		err = molt.Unavailable(err, "the request's deadline passed; try again")
	}
	p, internal := problemFor(err)
	if internal {
		level := slog.LevelError
		if p.Status == http.StatusServiceUnavailable {
			level = slog.LevelWarn // a dependency's fault, not ours
		}
		s.log.LogAttrs(r.Context(), level, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("code", molt.ErrorCode(err)), slog.String("error", err.Error()))
	}
	if p.Status == http.StatusUnauthorized {
		v := `Bearer realm="molt"`
		if r.Header.Get("Authorization") != "" {
			v += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeProblem(w, r, p)
}

// writeProblem writes p with its status.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem) {
	p.RequestID = requestID(r.Context())
	b, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}
