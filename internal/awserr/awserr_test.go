package awserr_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/molt-dev/molt/internal/awserr"
	"github.com/molt-dev/molt/internal/molt"
)

func opErr(err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "GetItem", Err: err}
}

func respErr(status int, err error) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}}
}

func TestTransient(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", opErr(&retry.MaxAttemptsError{Attempt: 3, Err: refused}), true},
		{"bare net.OpError", refused, true},
		{"retry quota", opErr(fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{Available: 0, Requested: 5})), true},
		{"call deadline", opErr(fmt.Errorf("send: %w", context.DeadlineExceeded)), true},
		{"throttled", opErr(respErr(400, &types.ProvisionedThroughputExceededException{Message: new(string)})), true},
		{"throttling code", opErr(&smithy.GenericAPIError{Code: "ThrottlingException"}), true},
		{"server fault", opErr(respErr(500, &smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer})), true},
		{"cancelled", opErr(context.Canceled), false},
		{"condition failed", opErr(respErr(400, &types.ConditionalCheckFailedException{})), false},
		{"validation", opErr(respErr(400, &smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient})), false},
		{"plain", errors.New("boom"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := awserr.Transient(c.err); got != c.want {
				t.Fatalf("Transient(%v) = %v, want %v", c.err, got, c.want)
			}
			got := molt.ErrorCode(awserr.Classify(c.err, "get item"))
			want := molt.ErrorCode(c.err)
			if c.want {
				want = molt.EUNAVAILABLE
			}
			if got != want {
				t.Fatalf("code of Classify(%v) = %q, want %q", c.err, got, want)
			}
		})
	}
	// The cause stays reachable: a condition failure is still found under it.
	if err := awserr.Classify(opErr(refused), "x"); !errors.Is(err, refused) {
		t.Fatalf("Classify lost its cause: %v", err)
	}
}
