package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/store"
)

// sickTable is a DynamoDB that knows one token and fails every other call as a
// dropped connection does.
type sickTable struct {
	dynamo.API
	hash  string
	reads atomic.Int32
}

func (s *sickTable) down() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
}

func (s *sickTable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.reads.Add(1)
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok && pk.Value == "TOKEN#"+s.hash {
		return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{
			"pk": pk, "id": &types.AttributeValueMemberS{Value: s.hash[:12]},
			"level":      &types.AttributeValueMemberS{Value: string(auth.Full)},
			"created_at": &types.AttributeValueMemberN{Value: "1"},
		}}, nil
	}
	return nil, s.down()
}

func (s *sickTable) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, s.down()
}

func (s *sickTable) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, s.down()
}

func (s *sickTable) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, s.down()
}

func (s *sickTable) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	s.reads.Add(1)
	return nil, s.down()
}

func (s *sickTable) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, s.down()
}

func (s *sickTable) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, s.down()
}

// sickApp is the whole API on st with local blobs and queues.
func sickApp(t *testing.T, st store.Store, timeout time.Duration) (http.Handler, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	blobs, err := dirblob.New(dir)
	if err != nil {
		t.Fatalf("blobs: %v", err)
	}
	t.Cleanup(func() { _ = blobs.Close() })
	q := memqueue.New()
	logs := &syncBuffer{}
	cfg := app.Config{Backend: app.BackendLocal, DataDir: dir, RequestTimeout: timeout}
	a := app.New(cfg, app.Deps{Store: st, Blobs: blobs, Queue: q, Local: q}, slog.New(slog.NewJSONHandler(logs, nil)))
	return a.HTTPHandler(), logs
}

// TestSickStoreIs503 sends every route, with a valid full token, to an API whose
// store refuses connections: each answers 503 problem+json with Retry-After,
// never 500, and nothing is logged at ERROR.
func TestSickStoreIs503(t *testing.T) {
	t.Parallel()
	secret := auth.NewSecret()
	table := &sickTable{hash: auth.Hash(secret)}
	h, logs := sickApp(t, dynamo.New(table, "molt", dynamo.Options{}), 0)
	id := (&molt.SortableIDs{}).NewID()
	params := strings.NewReplacer("{ws}", "acme", "{id}", id, "{path...}", "INSTRUCTIONS.md")
	bodies := map[string]string{
		"POST /api/sessions/{id}/messages":         `{"text":"hello"}`,
		"PATCH /api/sessions/{id}":                 `{"title":"t"}`,
		"PUT /api/settings":                        `{"general":{"language":"en-US"}}`,
		"PUT /api/workspaces/{ws}/files/{path...}": "# x\n",
		"POST /api/tokens":                         `{"level":"workspace","workspace":"acme"}`,
		"POST /api/campaigns":                      `{"name":"c","workspace":"acme","mission":"m","remote":{"card_url":"http://127.0.0.1:9/c","token_ref":"env:T"}}`,
	}
	for _, pattern := range httpapi.Routes(h) {
		method, path, _ := strings.Cut(pattern, " ")
		switch path {
		case "/health", "/api/search", "/{$}", "/assets/{name}", "/api/me":
			// These read no store past the token: the console's files are
			// embedded, /api/me is the token itself, and /api/search's
			// dependencies are the search backends (internal/search).
			continue
		}
		body, ok := bodies[pattern]
		if !ok && method != "GET" && method != "DELETE" {
			body = `{}`
		}
		if strings.HasPrefix(path, "/api/tokens/") {
			path = "/api/tokens/0123456789ab"
		}
		e := &env{t: t, h: h, logs: logs}
		resp := e.do(req{method: method, path: params.Replace(path), token: secret, body: body})
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want 503", pattern, resp.StatusCode)
			continue
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", pattern)
		}
		if p := decode[problemDoc](t, []byte(readAll(resp))); p.Code != molt.EUNAVAILABLE {
			t.Errorf("%s: code %q, want %q", pattern, p.Code, molt.EUNAVAILABLE)
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("a store outage was logged at ERROR:\n%s", logs.String())
	}
}

// TestHungStoreAnswersWithinDeadline uses as DynamoDB endpoint a listener that
// accepts and never answers: a request answers 503 within its deadline.
func TestHungStoreAnswersWithinDeadline(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	conns := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for c := range conns {
			_ = c.Close()
		}
	})
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + ln.Addr().String()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	// The store's own call deadline is longer than the request's: the request
	// deadline must cut it.
	h, logs := sickApp(t, dynamo.New(client, "molt", dynamo.Options{CallTimeout: time.Minute}), 500*time.Millisecond)
	e := &env{t: t, h: h, logs: logs}
	start := time.Now()
	resp := e.do(req{method: "GET", path: "/api/workspaces", token: auth.NewSecret()})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v, want about the 500ms deadline", d)
	}
	wantStatus(t, resp, http.StatusServiceUnavailable)
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
}

// TestJunkTokenNoStoreRead: a bearer credential that is not the shape of any
// token is refused 401 without reading the store, so a sick store cannot turn
// it into a 5xx.
func TestJunkTokenNoStoreRead(t *testing.T) {
	t.Parallel()
	table := &sickTable{hash: auth.Hash(auth.NewSecret())}
	h, logs := sickApp(t, dynamo.New(table, "molt", dynamo.Options{}), 0)
	e := &env{t: t, h: h, logs: logs}
	for _, junk := range []string{"not-a-real-token", "short", "molt_\x7f" + strings.Repeat("a", 30)} {
		resp := e.do(req{method: "GET", path: "/api/workspaces", token: junk})
		wantStatus(t, resp, http.StatusUnauthorized)
	}
	if n := table.reads.Load(); n != 0 {
		t.Fatalf("junk tokens made %d store reads, want 0", n)
	}
}

// TestDeepHealth: /health stays cheap (no store read) while /health?deep=1
// reads the store and names what failed.
func TestDeepHealth(t *testing.T) {
	t.Parallel()
	table := &sickTable{hash: auth.Hash(auth.NewSecret())}
	h, logs := sickApp(t, dynamo.New(table, "molt", dynamo.Options{}), 0)
	e := &env{t: t, h: h, logs: logs}
	wantStatus(t, e.do(req{method: "GET", path: "/health"}), http.StatusOK)
	if n := table.reads.Load(); n != 0 {
		t.Fatalf("/health made %d store reads, want 0", n)
	}
	resp := e.do(req{method: "GET", path: "/health?deep=1"})
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	p := decode[map[string]any](t, wantStatus(t, resp, http.StatusServiceUnavailable))
	if p["code"] != molt.EUNAVAILABLE {
		t.Fatalf("deep health problem %v, want code unavailable", p)
	}
	out, _ := p["details"].(map[string]any)
	failed, _ := out["failed"].([]any)
	if len(failed) != 1 || failed[0] != "store" {
		t.Fatalf("deep health failed = %v, want [store]; body %v", out["failed"], out)
	}
	checks, _ := out["checks"].(map[string]any)
	if q, _ := checks["queue"].(map[string]any); q["status"] != "ok" {
		t.Fatalf("queue check = %v, want ok; body %v", checks["queue"], out)
	}

	ok := setup(t)
	body := decode[map[string]any](t, wantStatus(t, ok.do(req{method: "GET", path: "/health?deep=1"}), http.StatusOK))
	if body["status"] != "ok" {
		t.Fatalf("deep health of a sound store = %v", body)
	}
	if !regexp.MustCompile(`^v9`).MatchString(body["version"].(string)) {
		t.Fatalf("deep health version = %v", body["version"])
	}
}
