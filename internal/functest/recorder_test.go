//go:build linux

package functest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/deploytest"
)

// awsCall is one permission a request to AWS needs: an IAM action on a resource
// of the deployment, named by its logical id in template.yaml, and the rest of
// the resource's ARN ("" for the resource itself, "/index/gsi2" for an index,
// "/runs/<id>/snapshot/meta.json" for an object).
type awsCall struct {
	Action   string
	Resource string // "" when the request names nothing of the deployment
	Path     string
}

func (c awsCall) String() string {
	r := c.Resource
	if r == "" {
		r = "(not a resource of the deployment)"
	}
	return c.Action + " on " + r + c.Path
}

// recorder stands between a function and the AWS emulator: it forwards every
// request and records the IAM permissions each needs, so a test can check them
// against what template.yaml grants the function. It knows the services molt
// uses (DynamoDB, S3 path-style, SQS JSON, Secrets Manager); a request to any
// other service is recorded as an action no policy grants.
type recorder struct {
	url   string
	names map[string]string // table, bucket or queue URL → logical id
	stack string            // the stack name the secrets' prefix is read with
	mu    sync.Mutex
	calls []awsCall
}

// newRecorder starts a recorder in front of target (AWS_ENDPOINT_URL).
func newRecorder(tb testing.TB, target string, names map[string]string) *recorder {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatalf("AWS_ENDPOINT_URL %q: %v", target, err)
	}
	r := &recorder{names: names}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // what the client signed
		},
		ModifyResponse: func(resp *http.Response) error {
			r.responded(resp)
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := r.request(req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	tb.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

var scopeRE = regexp.MustCompile(`Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request`)

// request records what req needs. DynamoDB and SQS bodies are read (and put
// back); S3 bodies are left alone.
func (r *recorder) request(req *http.Request) error {
	m := scopeRE.FindStringSubmatch(req.Header.Get("Authorization"))
	if m == nil {
		r.add(awsCall{Action: "unsigned:" + req.Method + " " + req.URL.Path})
		return nil
	}
	service := m[1]
	target := req.Header.Get("X-Amz-Target")
	var body []byte
	if service == "dynamodb" || service == "sqs" || service == "secretsmanager" {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
		body = b
	}
	switch service {
	case "dynamodb":
		return r.dynamodb(strings.TrimPrefix(target, "DynamoDB_20120810."), body)
	case "sqs":
		return r.sqs(strings.TrimPrefix(target, "AmazonSQS."), body)
	case "s3":
		r.s3(req)
		return nil
	case "secretsmanager":
		var in struct{ SecretId string }
		if err := json.Unmarshal(body, &in); err != nil {
			return fmt.Errorf("secretsmanager %s: %w", target, err)
		}
		r.add(awsCall{Action: "secretsmanager:" + strings.TrimPrefix(target, "secretsmanager."), Resource: secretResource, Path: in.SecretId})
		return nil
	}
	r.add(awsCall{Action: service + ":" + target})
	return nil
}

func (r *recorder) dynamodb(op string, body []byte) error {
	type table struct{ TableName string }
	var in struct {
		TableName     string
		IndexName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []struct {
			Put, Update, Delete, ConditionCheck, Get *table
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return fmt.Errorf("dynamodb %s: %w", op, err)
	}
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		// IAM authorises each part as the single-item action it is.
		for _, ti := range in.TransactItems {
			for action, t := range map[string]*table{"PutItem": ti.Put, "UpdateItem": ti.Update,
				"DeleteItem": ti.Delete, "ConditionCheckItem": ti.ConditionCheck, "GetItem": ti.Get} {
				if t != nil {
					r.add(awsCall{Action: "dynamodb:" + action, Resource: r.names[t.TableName]})
				}
			}
		}
	case "BatchWriteItem", "BatchGetItem":
		for name := range in.RequestItems {
			r.add(awsCall{Action: "dynamodb:" + op, Resource: r.names[name]})
		}
	default:
		c := awsCall{Action: "dynamodb:" + op, Resource: r.names[in.TableName]}
		if in.IndexName != "" {
			c.Path = "/index/" + in.IndexName
		}
		r.add(c)
	}
	return nil
}

func (r *recorder) sqs(op string, body []byte) error {
	var in struct{ QueueUrl string }
	if err := json.Unmarshal(body, &in); err != nil {
		return fmt.Errorf("sqs %s: %w", op, err)
	}
	if op == "SendMessageBatch" {
		op = "SendMessage"
	}
	r.add(awsCall{Action: "sqs:" + op, Resource: r.names[in.QueueUrl]})
	return nil
}

// s3 records a path-style request: /<bucket>/<key>.
func (r *recorder) s3(req *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	c := awsCall{Resource: r.names[bucket]}
	switch {
	case key == "" && (req.Method == http.MethodGet || req.Method == http.MethodHead):
		c.Action = "s3:ListBucket"
	case key == "" && req.Method == http.MethodPost && req.URL.Query().Has("delete"):
		c.Action, c.Path = "s3:DeleteObject", "/*"
	case key == "":
		c.Action = "s3:" + req.Method + "Bucket"
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		c.Action, c.Path = "s3:GetObject", "/"+key
	case req.Method == http.MethodPut || req.Method == http.MethodPost:
		c.Action, c.Path = "s3:PutObject", "/"+key
	case req.Method == http.MethodDelete:
		c.Action, c.Path = "s3:DeleteObject", "/"+key
	default:
		c.Action = "s3:" + req.Method
	}
	r.add(c)
}

// responded: S3 answers a GetObject of a missing key with 404 only to a caller
// allowed s3:ListBucket on the bucket (403 otherwise), and molt's code relies on
// the 404.
func (r *recorder) responded(resp *http.Response) {
	req := resp.Request
	if resp.StatusCode != http.StatusNotFound || req.Header.Get("X-Amz-Target") != "" ||
		(req.Method != http.MethodGet && req.Method != http.MethodHead) {
		return
	}
	m := scopeRE.FindStringSubmatch(req.Header.Get("Authorization"))
	if m == nil || m[1] != "s3" {
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if key != "" {
		r.add(awsCall{Action: "s3:ListBucket", Resource: r.names[bucket]})
	}
}

// secretResource stands for a Secrets Manager secret (not a template
// resource): its Path is the secret id, checked with deploytest.AllowsSecret.
const secretResource = "(secret)"

func (r *recorder) add(c awsCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// actions returns the distinct actions recorded so far, sorted.
func (r *recorder) actions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, c := range r.calls {
		if !seen[c.Action] {
			seen[c.Action] = true
			out = append(out, c.Action)
		}
	}
	sort.Strings(out)
	return out
}

// checkGrants fails tb for every recorded permission that the policies of the
// function logicalID in template.yaml do not grant: the deployed function would
// be refused there.
func (r *recorder) checkGrants(tb testing.TB, logicalID string) {
	tb.Helper()
	grants, err := deploytest.Grants(root, logicalID)
	if err != nil {
		tb.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[awsCall]bool{}
	for _, c := range r.calls {
		if seen[c] {
			continue
		}
		seen[c] = true
		if c.Resource == secretResource {
			if c.Action != deploytest.SecretAction || !deploytest.AllowsSecret(grants, c.Path, r.stack) {
				tb.Errorf("%s made a call needing %s on secret %s (stack %s), which template.yaml does not grant it",
					logicalID, c.Action, c.Path, r.stack)
			}
			continue
		}
		if c.Resource == "" || !deploytest.Allows(grants, c.Action, c.Resource, c.Path) {
			tb.Errorf("%s made a call needing %s, which template.yaml does not grant it", logicalID, c)
		}
	}
	if testing.Verbose() && os.Getenv("FUNCTEST_SHOW_CALLS") != "" {
		var all []string
		for c := range seen {
			all = append(all, c.String())
		}
		sort.Strings(all)
		tb.Logf("%s needed:\n  %s", logicalID, strings.Join(all, "\n  "))
	}
}
