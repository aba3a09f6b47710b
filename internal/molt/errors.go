package molt

import (
	"errors"
	"fmt"
)

// Error codes: the categories every caller can switch on. The HTTP layer maps each
// to one status (see internal/httpapi).
const (
	EINVALID      = "invalid"      // bad input; nothing was written
	EUNAUTHORIZED = "unauthorized" // missing or unknown credentials
	EFORBIDDEN    = "forbidden"    // known caller without the right
	ENOTFOUND     = "not_found"    // no such thing (or not visible to the caller)
	ECONFLICT     = "conflict"     // a condition on the current state failed
	ETOOLARGE     = "too_large"    // a body or value exceeds its size limit
	EUNAVAILABLE  = "unavailable"  // a dependency failed; the write may be retried
	EINTERNAL     = "internal"     // a bug or an unexpected failure
	ELOSTCLAIM    = "lost_claim"   // the writer no longer owns the work item: stop
)

// Error is molt's one error type. Code is a category (EINVALID, ECONFLICT, …);
// Reason is an optional stable machine code for API clients (e.g. "not_applied",
// "budget_full"); Field names the offending input for validation errors.
type Error struct {
	Code    string
	Reason  string
	Field   string
	Message string
	Details any
	Err     error // wrapped cause, never shown to API clients
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Code
	}
	if e.Reason != "" {
		msg = e.Reason + ": " + msg
	}
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error naming the offending field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Conflict returns an ECONFLICT error with a stable reason.
func Conflict(reason, format string, args ...any) *Error {
	return &Error{Code: ECONFLICT, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns an ENOTFOUND error.
func NotFound(format string, args ...any) *Error {
	return &Error{Code: ENOTFOUND, Message: fmt.Sprintf(format, args...)}
}

// Unavailable wraps a dependency failure whose outcome is known not to have
// happened (or was rolled back): the caller may retry.
func Unavailable(err error, format string, args ...any) *Error {
	return &Error{Code: EUNAVAILABLE, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any
// other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorReason returns the stable reason of the first *Error in err's chain, or "".
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// IsLostClaim reports whether err says the writer lost its claim.
func IsLostClaim(err error) bool { return ErrorCode(err) == ELOSTCLAIM }
