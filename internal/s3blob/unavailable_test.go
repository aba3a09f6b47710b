package s3blob_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/s3blob"
)

// TestUnreachableIsUnavailable: a bucket whose endpoint refuses connections
// fails every call with EUNAVAILABLE, not as an internal error.
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	endpoint := "http://" + ln.Addr().String()
	_ = ln.Close()
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	st := s3blob.New(c, "molt")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = st.Get(ctx, "a/b")
	if got := molt.ErrorCode(err); got != molt.EUNAVAILABLE {
		t.Fatalf("Get: code %q (%v), want %q", got, err, molt.EUNAVAILABLE)
	}
	if err := st.Put(ctx, "a/b", []byte("x")); molt.ErrorCode(err) != molt.EUNAVAILABLE {
		t.Fatalf("Put: code %q (%v), want %q", molt.ErrorCode(err), err, molt.EUNAVAILABLE)
	}
	if _, err := st.List(ctx, "a/"); molt.ErrorCode(err) != molt.EUNAVAILABLE {
		t.Fatalf("List: code %q (%v), want %q", molt.ErrorCode(err), err, molt.EUNAVAILABLE)
	}
}
