package model

import (
	"context"
	"errors"

	"github.com/molt-dev/molt/internal/molt"
)

// Safe error categories, set as molt.Error.Reason by every provider. They name what
// went wrong without quoting anything the provider sent back.
const (
	ReasonRateLimited       = "rate_limited"       // EUNAVAILABLE: 429 / throttling
	ReasonServerError       = "server_error"       // EUNAVAILABLE: 5xx / service fault
	ReasonTimeout           = "timeout"            // EUNAVAILABLE: the call's deadline passed
	ReasonNetwork           = "network"            // EUNAVAILABLE: connection failed
	ReasonMalformedResponse = "malformed_response" // EUNAVAILABLE: not JSON, too large, no answer
	ReasonCanceled          = "canceled"           // EUNAVAILABLE: the caller's ctx was cancelled
	ReasonBadRequest        = "bad_request"        // EINVALID: the provider refused the request
	ReasonAuth              = "auth"               // EINVALID: credentials missing, wrong or not allowed
)

// Fail returns a *molt.Error for reason, with the code that reason implies
// (EINVALID for ReasonBadRequest and ReasonAuth, EUNAVAILABLE otherwise). msg must
// be safe to log: no response body, no credential. cause, which may be nil, is
// wrapped; pass only errors whose text is equally safe.
func Fail(reason, msg string, cause error) *molt.Error {
	code := molt.EUNAVAILABLE
	if reason == ReasonBadRequest || reason == ReasonAuth {
		code = molt.EINVALID
	}
	return &molt.Error{Code: code, Reason: reason, Message: msg, Err: cause}
}

// ContextFailure reports why a call whose context is done failed: ReasonCanceled
// when parent was cancelled, ReasonTimeout when a deadline passed (the call's own
// or the parent's). It returns nil while call is not done.
func ContextFailure(parent, call context.Context, what string) *molt.Error {
	switch {
	case call.Err() == nil:
		return nil
	case errors.Is(parent.Err(), context.Canceled):
		return Fail(ReasonCanceled, what+": canceled", context.Canceled)
	default:
		return Fail(ReasonTimeout, what+": timed out", context.DeadlineExceeded)
	}
}
