package awsbackend_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/molt-dev/molt/internal/awsbackend"
)

// TestSearXNGTransport: the transport NewApp builds for MOLT_SEARXNG_FUNCTION
// invokes that function on the configured endpoint and returns its answer.
func TestSearXNGTransport(t *testing.T) {
	t.Parallel()
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"statusCode":200,"headers":{"content-type":"application/json"},"body":"{\"results\":[]}","isBase64Encoded":false}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "s", "")}
	tr := awsbackend.SearXNGTransport(cfg, "molt-searxng", nil)
	req, _ := http.NewRequest(http.MethodGet, "http://searxng.invalid/config", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if want := "/2015-03-31/functions/molt-searxng/invocations"; gotPath != want {
		t.Errorf("invoked %q, want %q", gotPath, want)
	}
	if resp.StatusCode != 200 || string(b) != `{"results":[]}` {
		t.Errorf("got %d %q", resp.StatusCode, b)
	}
}
