package s3blob

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/molt-dev/molt/internal/awstest"
)

// TestListFollowsPages lists with a page size of 2 so the paginator must follow
// continuation tokens.
func TestListFollowsPages(t *testing.T) {
	t.Parallel()
	c := s3.NewFromConfig(awstest.Config(t), ClientOptions())
	ctx := t.Context()
	name := awstest.Name("molt-pages")
	if err := EnsureBucket(ctx, c, name); err != nil {
		t.Fatal(err)
	}
	s := New(c, name)
	s.pageSize = 2
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("p/%02d", i)
		want = append(want, k)
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, k := range want {
			_, _ = c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String(k)})
		}
		_, _ = c.DeleteBucket(t.Context(), &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	got, err := s.List(ctx, "p/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("list = %v, want %v", got, want)
	}
}
