//go:build linux

package functest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/s3blob"
	"github.com/molt-dev/molt/internal/sqsqueue"
	"github.com/molt-dev/molt/internal/workspace"
)

// root is the repository root, seen from this package.
const root = "../.."

// The stamps the test builds with, and expects back from /health.
const (
	stampVersion = "v0.0.0-functest"
	stampSHA     = "f00dfee"
)

var (
	buildDir  string // set by TestMain
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "functest-build-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// need skips the test (or fails it under CI=true) with a reason.
func need(tb testing.TB, ok bool, why string) {
	tb.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal(why + " (CI must run the function tests; make test provides it)")
	}
	tb.Skip(why + "; run through `make test`")
}

// bootstrap returns the path of a function's bootstrap, building them all once
// with the Makefile's rule for this machine's architecture.
func bootstrap(tb testing.TB, fn string) string {
	tb.Helper()
	need(tb, runtime.GOOS == "linux", "the Runtime Interface Emulator runs on linux only")
	mk, err := exec.LookPath("make")
	need(tb, err == nil, "make is not installed")
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, mk, "-s", "--no-print-directory", "bootstraps",
			"ARCH="+runtime.GOARCH, "BUILD_DIR="+buildDir, "VERSION="+stampVersion, "SHA="+stampSHA)
		cmd.Dir = root
		cmd.Env = withoutMake(os.Environ())
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("make bootstraps: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	p := filepath.Join(buildDir, fn, "bootstrap")
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("make bootstraps built no %s: %v", p, err)
	}
	return p
}

// withoutMake drops the variables of a make above us (make test), whose jobserver
// the make we start could not reach.
func withoutMake(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" && k != "MAKEFILES" {
			out = append(out, kv)
		}
	}
	return out
}

// deployment is what a function runs against: a fresh table, bucket and queue
// (with its dead-letter queue) per kind of work on the emulator, as template.yaml
// declares them, with the events' full-access token stored.
type deployment struct {
	table, bucket string
	stack         string // the stack name the functions see (MOLT_DEPLOYMENT)
	store         *dynamo.Store
	sqs           *sqs.Client
	queues        map[string]string // kind → queue URL (MOLT_QUEUE_<KIND>)
	queueARNs     map[string]string // kind → queue ARN
	// names maps each physical name (table, bucket, queue URL) to its logical id
	// in template.yaml, for the recorders.
	names map[string]string
	env   []string // the functions' environment, as template.yaml sets it
}

func deploy(tb testing.TB) *deployment {
	tb.Helper()
	need(tb, os.Getenv("MOLT_RIE") != "", "MOLT_RIE (the Lambda Runtime Interface Emulator) is not set")
	cfg := awstest.Config(tb)
	ctx := context.Background()
	d := &deployment{table: awstest.Name("functest"), bucket: awstest.Name("functest"), stack: awstest.Name("functest"),
		queues: map[string]string{}, queueARNs: map[string]string{}, names: map[string]string{}}

	ddb := dynamodb.NewFromConfig(cfg, awsbackend.DynamoOptions())
	if err := dynamo.CreateTable(ctx, ddb, d.table); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(d.table)})
	})
	s3c := s3.NewFromConfig(cfg, s3blob.ClientOptions())
	if err := s3blob.EnsureBucket(ctx, s3c, d.bucket); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { emptyBucket(s3c, d.bucket) })
	d.store = dynamo.New(ddb, d.table, dynamo.Options{})
	d.names[d.table] = "Table"
	d.names[d.bucket] = "ArtifactsBucket"

	d.sqs = sqs.NewFromConfig(cfg)
	for _, kind := range app.Kinds() {
		// The visibility timeout only has to outlast a test: a message a worker
		// handled is deleted as the event source mapping would.
		url, dlq, err := sqsqueue.Ensure(ctx, d.sqs, d.table+"-"+kind, 10*time.Minute)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			for _, u := range []string{url, dlq} {
				_, _ = d.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
			}
		})
		attrs, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			tb.Fatal(err)
		}
		d.queues[kind] = url
		d.queueARNs[kind] = attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		d.names[url] = camel(kind) + "Queue"
		d.names[dlq] = camel(kind) + "DeadLetterQueue"
	}

	// The token of the events: stored, as always, by its hash only.
	var ev events.APIGatewayV2HTTPRequest
	readEvent(tb, "api-workspaces-authorized.json", &ev)
	secret := auth.ParseBearer(ev.Headers["authorization"])
	if secret == "" {
		tb.Fatal("events/api-workspaces-authorized.json has no bearer token")
	}
	h := auth.Hash(secret)
	err := d.store.PutToken(ctx, auth.Token{Hash: h, ID: h[:12], Level: auth.Full, Name: "functest", CreatedAt: time.Now().UTC()})
	if err != nil {
		tb.Fatal(err)
	}

	d.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_ENDPOINT_URL=" + os.Getenv("AWS_ENDPOINT_URL"),
		"AWS_REGION=" + cfg.Region,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"MOLT_TABLE=" + d.table,
		"MOLT_BUCKET=" + d.bucket,
		"MOLT_LOG_LEVEL=debug",
		"MOLT_DEPLOYMENT=" + d.stack,
		"MOLT_REMOTE_SECRET_PREFIX=molt/" + d.stack + "/remotes/",
	}
	for kind, url := range d.queues {
		d.env = append(d.env, app.EnvQueuePrefix+strings.ToUpper(kind)+"="+url)
	}
	return d
}

// timeouts are the functions' timeouts under the emulator (AWS_LAMBDA_FUNCTION_TIMEOUT):
// template.yaml's for the API and the tick; the workers', 900 s there, are cut
// to bound a stuck test (the offline model answers at once).
var timeouts = map[string]int{"api": 29, "ticker": 60}

// function starts fn's bootstrap under the emulator with the deployment's
// environment, its AWS calls going through a recorder; when the test ends (after
// the emulator has stopped) every call is checked against the policy
// template.yaml gives the function.
func (d *deployment) function(tb testing.TB, fn string) (*emulator, *recorder) {
	tb.Helper()
	path := bootstrap(tb, fn)
	rec := newRecorder(tb, os.Getenv("AWS_ENDPOINT_URL"), d.names)
	rec.stack = d.stack
	id := camel(fn) + "Function"
	tb.Cleanup(func() { rec.checkGrants(tb, id) }) // runs after the emulator's stop
	timeout := timeouts[fn]
	if timeout == 0 {
		timeout = 120
	}
	env := []string{"AWS_ENDPOINT_URL=" + rec.url, "AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(timeout)}
	for _, kv := range d.env {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL=") {
			env = append(env, kv)
		}
	}
	return start(tb, fn, path, env), rec
}

// camel turns a folder name into its logical id's stem: run-worker → RunWorker.
func camel(dir string) string {
	var b strings.Builder
	for _, part := range strings.Split(dir, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// emptyBucket deletes a test bucket with whatever the functions left in it.
func emptyBucket(c *s3.Client, bucket string) {
	ctx := context.Background()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			break
		}
		for _, o := range page.Contents {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		}
	}
	_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
}

// readEvent reads events/<name> into v (nil: just the bytes).
func readEvent(tb testing.TB, name string, v any) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(root, "events", name))
	if err != nil {
		tb.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			tb.Fatalf("events/%s: %v", name, err)
		}
	}
	return data
}

// emulator is one running aws-lambda-rie with one bootstrap.
type emulator struct {
	url    string
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
	once   sync.Once
}

// start runs the bootstrap under the Runtime Interface Emulator and returns once
// the emulator accepts connections (the bootstrap itself starts on the first
// invoke, as in Lambda). The emulator and the bootstrap are stopped at cleanup.
func start(tb testing.TB, fn, bootstrapPath string, env []string) *emulator {
	tb.Helper()
	for try := 1; ; try++ {
		e, err := startOnce(tb, fn, bootstrapPath, env)
		if err == nil {
			return e
		}
		// A port seen free may be taken before the emulator binds it: try others.
		if try < 3 && strings.Contains(e.log.String(), "address already in use") {
			continue
		}
		tb.Fatalf("%v\n%s", err, e.log.String())
	}
}

func startOnce(tb testing.TB, fn, bootstrapPath string, env []string) (*emulator, error) {
	tb.Helper()
	addr, apiAddr := freeAddr(tb), freeAddr(tb)
	e := &emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations", log: &syncBuffer{}, exited: make(chan struct{})}
	e.cmd = exec.Command(os.Getenv("MOLT_RIE"),
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", apiAddr, // not the default :9001, so emulators can run side by side
		bootstrapPath)
	e.cmd.Env = append(env, "AWS_LAMBDA_FUNCTION_NAME="+fn)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // one group: emulator and bootstrap
	if err := e.cmd.Start(); err != nil {
		return e, fmt.Errorf("start %s: %w", os.Getenv("MOLT_RIE"), err)
	}
	go func() { _ = e.cmd.Wait(); close(e.exited) }()
	tb.Cleanup(func() {
		e.stop()
		if tb.Failed() {
			tb.Logf("%s emulator output:\n%s", fn, e.log.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-e.exited:
			return e, fmt.Errorf("the emulator exited before listening on %s", addr)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			e.stop()
			return e, fmt.Errorf("the emulator did not listen on %s within 20s", addr)
		}
		select {
		case <-e.exited:
		case <-time.After(2 * time.Millisecond): // nothing signals readiness but the port
		}
	}
}

// stop ends the emulator and its bootstrap (once; later calls do nothing).
func (e *emulator) stop() {
	e.once.Do(func() {
		pgid := e.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-e.exited
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // a bootstrap left behind
	})
}

// invoke sends one event and returns the function's response payload. A function
// error (the emulator answers 200 with errorType) fails the test.
func (e *emulator) invoke(tb testing.TB, payload []byte) []byte {
	tb.Helper()
	out, err := e.try(payload)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func (e *emulator) try(payload []byte) ([]byte, error) {
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(e.url, "application/json", bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, fmt.Errorf("read invoke response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke: emulator status %d: %s", resp.StatusCode, buf.Bytes())
	}
	var fnErr struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(buf.Bytes(), &fnErr) == nil && fnErr.ErrorType != "" {
		return nil, fmt.Errorf("function error %s: %s", fnErr.ErrorType, fnErr.ErrorMessage)
	}
	return buf.Bytes(), nil
}

// httpResponse decodes an API Gateway payload 2.0 response.
func httpResponse(tb testing.TB, payload []byte) (events.APIGatewayV2HTTPResponse, []byte) {
	tb.Helper()
	var r events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(payload, &r); err != nil {
		tb.Fatalf("not an HTTP API response: %v: %s", err, payload)
	}
	body := []byte(r.Body)
	if r.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(r.Body)
		if err != nil {
			tb.Fatalf("base64 body: %v", err)
		}
		body = b
	}
	return r, body
}

// header returns a response header, whatever its case.
func header(r events.APIGatewayV2HTTPResponse, k string) string {
	for hk, v := range r.Headers {
		if strings.EqualFold(hk, k) {
			return v
		}
	}
	for hk, v := range r.MultiValueHeaders {
		if strings.EqualFold(hk, k) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

type problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func TestAPIFunction(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	ws := workspace.Workspace{Name: "functest", Description: "seen through the function", CreatedAt: time.Now().UTC()}
	ws.UpdatedAt = ws.CreatedAt
	if _, _, err := d.store.PutWorkspace(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	e, _ := d.function(t, "api")

	// One emulator, invoked in turn, as Lambda reuses a warm environment.
	t.Run("health", func(t *testing.T) {
		r, body := httpResponse(t, e.invoke(t, readEvent(t, "api-health.json", nil)))
		if r.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", r.StatusCode, body)
		}
		var got map[string]string
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("health body %s: %v", body, err)
		}
		want := map[string]string{"status": "ok", "version": stampVersion, "sha": stampSHA}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("health %s = %q, want %q (stamped by make)", k, got[k], v)
			}
		}
	})
	t.Run("workspaces with a token", func(t *testing.T) {
		r, body := httpResponse(t, e.invoke(t, readEvent(t, "api-workspaces-authorized.json", nil)))
		if r.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", r.StatusCode, body)
		}
		if ct := header(r, "Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type = %q, want application/json", ct)
		}
		var list struct {
			Items []workspace.Workspace `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("list body %s: %v", body, err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != ws.Name || list.Items[0].Description != ws.Description {
			t.Errorf("items = %+v, want the one workspace %q stored in the table", list.Items, ws.Name)
		}
	})
	t.Run("workspaces without a token", func(t *testing.T) {
		r, body := httpResponse(t, e.invoke(t, readEvent(t, "api-unauthorized.json", nil)))
		p := wantProblem(t, r, body, http.StatusUnauthorized)
		if p.Code != "unauthorized" {
			t.Errorf("code = %q, want unauthorized", p.Code)
		}
	})
	t.Run("settings with a malformed body", func(t *testing.T) {
		r, body := httpResponse(t, e.invoke(t, readEvent(t, "api-bad-body.json", nil)))
		p := wantProblem(t, r, body, http.StatusBadRequest)
		if p.Code != "invalid" || !strings.Contains(p.Detail, "malformed JSON") {
			t.Errorf("problem %+v, want code invalid naming the malformed JSON", p)
		}
	})
}

func wantProblem(t *testing.T, r events.APIGatewayV2HTTPResponse, body []byte, status int) problem {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", r.StatusCode, status, body)
	}
	if ct := header(r, "Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %s: %v", body, err)
	}
	if p.Status != status || p.Code == "" {
		t.Errorf("problem %+v: want status %d and a code", p, status)
	}
	return p
}

func TestTickerFunction(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	e, _ := d.function(t, "ticker")
	out := e.invoke(t, readEvent(t, "ticker-scheduled.json", nil))
	var counts map[string]any
	if err := json.Unmarshal(out, &counts); err != nil {
		t.Fatalf("ticker result %s: %v", out, err)
	}
	for _, k := range []string{"requeued", "expired", "resent", "raced"} {
		n, ok := counts[k].(float64)
		if !ok || n < 0 {
			t.Errorf("ticker result %s: %q = %v, want a count", out, k, counts[k])
		}
	}
}

// BenchmarkColdStart reports, per function, the bootstrap's size and the time from
// starting the emulator to the first answer (process start, runtime init, one
// invoke), median over the runs.
func BenchmarkColdStart(b *testing.B) {
	d := deploy(b)
	cases := []struct{ fn, event string }{
		{"api", "api-health.json"},
		{"ticker", "ticker-scheduled.json"},
		{"a2a-stream", "a2a-stream-card.json"},
	}
	for _, kind := range app.Kinds() {
		cases = append(cases, struct{ fn, event string }{kind + "-worker", kind + "-worker-wake.json"})
	}
	env := append([]string{"AWS_LAMBDA_FUNCTION_TIMEOUT=60"}, d.env...)
	for _, c := range cases {
		b.Run(c.fn, func(b *testing.B) {
			path := bootstrap(b, c.fn)
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			payload := readEvent(b, c.event, nil)
			var runs []time.Duration
			for b.Loop() {
				t0 := time.Now()
				e := start(b, c.fn, path, env)
				if _, err := e.try(payload); err != nil {
					b.Fatalf("%v\n%s", err, e.log.String())
				}
				runs = append(runs, time.Since(t0))
				e.stop()
			}
			sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
			b.ReportMetric(float64(runs[len(runs)/2].Microseconds())/1000, "ms-median-cold-start")
			b.ReportMetric(float64(st.Size()), "bootstrap-bytes")
		})
	}
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for the emulator's two output streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
