package s3blob_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/blobtest"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/s3blob"
)

func client(t *testing.T) *s3.Client {
	t.Helper()
	return s3.NewFromConfig(awstest.Config(t), s3blob.ClientOptions())
}

// bucket creates a bucket that is emptied and removed when the test ends.
func bucket(t *testing.T, c *s3.Client) string {
	t.Helper()
	name := awstest.Name("molt-blobs")
	if err := s3blob.EnsureBucket(t.Context(), c, name); err != nil {
		t.Fatalf("ensure bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := s3blob.New(c, name).List(ctx, "")
		for _, k := range keys {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String(k)})
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}

func TestConformance(t *testing.T) {
	c := client(t)
	blobtest.Run(t, func(t *testing.T) blob.Store {
		return s3blob.New(c, bucket(t, c))
	})
}

func TestEnsureBucketIsIdempotent(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := t.Context()
	name := bucket(t, c)
	s := s3blob.New(c, name)
	if err := s.Put(ctx, "keep", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s3blob.EnsureBucket(ctx, c, name); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	if got, err := s.Get(ctx, "keep"); err != nil || string(got) != "x" {
		t.Errorf("after second ensure: %q, %v; want the bucket kept as it was", got, err)
	}
}

func TestMissingBucketIsNotNotFound(t *testing.T) {
	t.Parallel()
	c := client(t)
	s := s3blob.New(c, awstest.Name("molt-nobucket"))
	_, err := s.Get(t.Context(), "k")
	if err == nil || molt.ErrorCode(err) == molt.ENOTFOUND {
		t.Errorf("get from a missing bucket: %v; want an error other than %s", err, molt.ENOTFOUND)
	}
}
