// Package awstest gives tests an SDK configuration for the LocalStack-compatible
// endpoint in AWS_ENDPOINT_URL. Without one the test is skipped, except under
// CI=true, where a missing endpoint fails the test: CI must exercise the adapters.
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/molt-dev/molt/internal/awsenv"
)

// Config returns the SDK configuration for the emulator, or skips/fails the test.
func Config(t testing.TB) aws.Config {
	t.Helper()
	if awsenv.Endpoint() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("AWS_ENDPOINT_URL is not set: CI needs the AWS emulator (make test starts it)")
		}
		t.Skip("AWS_ENDPOINT_URL is not set; run through `make test` to start the AWS emulator")
	}
	cfg, err := awsenv.Load(context.Background())
	if err != nil {
		t.Fatalf("aws config: %v", err)
	}
	return cfg
}

// Name returns a unique resource name with the given prefix, so tests sharing one
// emulator never collide.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
