package dynamo_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// conflicting is an HTTP client that, once armed, answers the next request for
// target as DynamoDB answers a single-item write to an item an ongoing
// transaction holds: 400 TransactionConflictException, nothing applied.
type conflicting struct {
	base   *http.Client
	target string
	armed  atomic.Bool
}

func (c *conflicting) Do(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+c.target) && c.armed.CompareAndSwap(true, false) {
		body := `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`
		return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"conflict"}},
			Body:    io.NopCloser(strings.NewReader(body)),
			Request: r}, nil
	}
	return c.base.Do(r)
}

// TestTransactionConflictRetried: DynamoDB refuses a single-item write (PutItem,
// UpdateItem, DeleteItem) to an item that an ongoing transaction holds with
// TransactionConflictException, which the SDK does not retry. Nothing was
// applied, so the adapter retries it like a transaction cancelled for a conflict.
// Items the adapter writes alone and in transactions: work items (a heartbeat
// alone, a claim in a transaction), workspace META (PutWorkspace alone, PutFile's
// condition check), session META (SetTitle alone, appends in transactions).
func TestTransactionConflictRetried(t *testing.T) {
	t.Parallel()
	_, table := newTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &conflicting{base: &http.Client{}}
	client := newClient(t, func(o *dynamodb.Options) { o.HTTPClient = c })
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	s := dynamo.New(client, table, dynamo.Options{Clock: clock, IDs: ids})
	p := &work.Protocol{Backend: s, Clock: clock, IDs: ids}
	arm := func(target string) { c.target = target; c.armed.Store(true) }
	used := func(t *testing.T) {
		t.Helper()
		if c.armed.Load() {
			t.Fatal("the conflict was not injected")
		}
	}

	it, err := p.Create(ctx, work.Item{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := p.Claim(ctx, kind, it.ID, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	arm("UpdateItem")
	err = s.Commit(ctx, work.UpdateItem{Kind: kind, ID: it.ID, If: work.Cond{Attempts: work.Ptr(1), Token: cl.Token, Active: work.Ptr(true)},
		Set: work.Set{HeartbeatAt: work.Ptr(clock.Now()), UpdatedAt: clock.Now(), OpID: "beat"}})
	used(t)
	if err != nil {
		t.Fatalf("heartbeat refused once for a conflicting transaction: %v", err)
	}

	arm("UpdateItem")
	_, _, err = s.PutWorkspace(ctx, workspace.Workspace{Name: "acme"})
	used(t)
	if err != nil {
		t.Fatalf("put workspace refused once for a conflicting transaction: %v", err)
	}
	ss, err := s.CreateSession(ctx, session.Session{Workspace: "acme", Agent: "main", Access: session.AccessFull})
	if err != nil {
		t.Fatal(err)
	}
	arm("UpdateItem")
	_, err = s.SetTitle(ctx, ss.ID, "hello", session.TitleManual, 0)
	used(t)
	if err != nil {
		t.Fatalf("set title refused once for a conflicting transaction: %v", err)
	}
	arm("DeleteItem")
	err = s.DeleteSession(ctx, ss.ID)
	used(t)
	if err != nil {
		t.Fatalf("delete session refused once for a conflicting transaction: %v", err)
	}
	arm("DeleteItem")
	err = s.DeleteWorkspace(ctx, "acme")
	used(t)
	if err != nil {
		t.Fatalf("delete workspace refused once for a conflicting transaction: %v", err)
	}
	if _, err := s.GetWorkspace(ctx, "acme"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("workspace after delete: %v", err)
	}
}
