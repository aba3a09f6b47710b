// Package awserr tells which AWS SDK errors mean "the service is unreachable or
// overloaded right now": the faults the store and queue adapters report as
// molt.EUNAVAILABLE (HTTP 503 with Retry-After), rather than as bugs.
package awserr

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/molt-dev/molt/internal/molt"
)

// Transient reports whether err is a fault of reaching the service that a
// later retry may clear: a refused, reset or timed-out connection (*net.OpError
// and every other net.Error), a passed context deadline (the call's own or its
// caller's), the SDK giving up after its retries (retry.MaxAttemptsError) or
// because its retry quota is spent (ratelimit.QuotaExceededError), throttling
// (ThrottlingException, ProvisionedThroughputExceededException, 429, …) and
// server faults (5xx). A cancelled context is not transient: the caller left.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var quota ratelimit.QuotaExceededError
	if errors.As(err, &quota) {
		return true
	}
	var quotaPtr *ratelimit.QuotaExceededError
	if errors.As(err, &quotaPtr) {
		return true
	}
	// The SDK retries only what it deems retryable: exhausting them is transient.
	var maxed *retry.MaxAttemptsError
	if errors.As(err, &maxed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		if s := re.HTTPStatusCode(); s == http.StatusTooManyRequests || s >= 500 {
			return true
		}
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorFault() == smithy.FaultServer {
		return true
	}
	return false
}

// Classify returns err as molt.EUNAVAILABLE (wrapping it, with message what)
// when Transient(err), and err unchanged otherwise (nil stays nil).
func Classify(err error, what string) error {
	if !Transient(err) {
		return err
	}
	return molt.Unavailable(err, "%s: service unavailable", what)
}
