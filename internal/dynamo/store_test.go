package dynamo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const kind work.Kind = "job"

// fixture is one test's store on a fresh table, with its raw client and a request
// counter in front of the store.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	client *dynamodb.Client
	table  string
	api    *counting
	clock  *molt.ManualClock
	ids    *molt.SortableIDs
	s      *dynamo.Store
	p      *work.Protocol
}

func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	client, table := newTable(t)
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	api := &counting{API: client}
	s := dynamo.New(api, table, dynamo.Options{Clock: clock, IDs: ids})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &fixture{t: t, ctx: ctx, client: client, table: table, api: api, clock: clock, ids: ids, s: s,
		p: &work.Protocol{Backend: s, Clock: clock, IDs: ids}}
}

func (f *fixture) item(id string) work.Item {
	now := f.clock.Now()
	return work.Item{Kind: kind, ID: id, Status: work.StatusPending, CreatedAt: now, UpdatedAt: now, OpID: "create-" + id}
}

func (f *fixture) create(id string) work.Item {
	f.t.Helper()
	it := f.item(id)
	if err := f.s.Commit(f.ctx, work.CreateItem{Item: it}); err != nil {
		f.t.Fatalf("create %s: %v", id, err)
	}
	return it
}

func (f *fixture) get(id string) work.Item {
	f.t.Helper()
	it, err := f.s.GetItem(f.ctx, kind, id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return it
}

// condIndex returns the index of a condition failure, or fails the test.
func condIndex(t *testing.T, err error) int {
	t.Helper()
	var cf *work.ConditionFailed
	if !errors.As(err, &cf) {
		t.Fatalf("err = %v, want a condition failure", err)
	}
	return cf.Index
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := molt.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func TestCreateTable(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	ctx := context.Background()
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("second create: %v", err)
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	if d.TableStatus != types.TableStatusActive {
		t.Fatalf("status %s", d.TableStatus)
	}
	keys := func(ks []types.KeySchemaElement) string {
		var s []string
		for _, k := range ks {
			s = append(s, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		return strings.Join(s, ",")
	}
	if got := keys(d.KeySchema); got != "pk:HASH,sk:RANGE" {
		t.Fatalf("key schema %s", got)
	}
	gsis := map[string]string{}
	for _, g := range d.GlobalSecondaryIndexes {
		gsis[aws.ToString(g.IndexName)] = keys(g.KeySchema) + "/" + string(g.Projection.ProjectionType)
	}
	if gsis["gsi1"] != "gsi1pk:HASH,gsi1sk:RANGE/ALL" || gsis["gsi2"] != "gsi2pk:HASH,gsi2sk:RANGE/ALL" ||
		gsis["gsi3"] != "gsi3pk:HASH,gsi3sk:RANGE/ALL" ||
		gsis["gsi4"] != "gsi2pk:HASH,gsi4sk:RANGE/ALL" || len(gsis) != 4 {
		t.Fatalf("indexes %v", gsis)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires_at" || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Fatalf("ttl %+v", ttl.TimeToLiveDescription)
	}
}

func TestCreateItem(t *testing.T) {
	f := setup(t)
	it := f.item("a1")
	it.Workspace, it.LockKey, it.Data, it.Reason = "acme", "apply/acme", []byte(`{"x":1}`), "why"
	if err := f.s.Commit(f.ctx, work.CreateItem{Item: it}); err != nil {
		t.Fatal(err)
	}
	got := f.get("a1")
	if got.Workspace != "acme" || got.LockKey != "apply/acme" || string(got.Data) != `{"x":1}` || got.Reason != "why" ||
		!got.CreatedAt.Equal(epoch) || got.OpID != "create-a1" || got.Status != work.StatusPending || got.Active {
		t.Fatalf("round trip = %+v", got)
	}
	if i := condIndex(t, f.s.Commit(f.ctx, work.CreateItem{Item: f.item("a1")})); i != 0 {
		t.Fatalf("duplicate create index %d", i)
	}
	_, err := f.s.GetItem(f.ctx, kind, "nope")
	wantCode(t, err, molt.ENOTFOUND)
}

func TestUpdateConditions(t *testing.T) {
	f := setup(t)
	f.create("u1")
	now := f.clock.Now()
	claim := work.UpdateItem{Kind: kind, ID: "u1",
		If: work.Cond{Statuses: []work.Status{work.StatusPending}, Attempts: work.Ptr(0), Active: work.Ptr(false)},
		Set: work.Set{Status: work.StatusRunning, Active: work.Ptr(true), Attempts: work.Ptr(1), Token: work.Ptr("tok"),
			HeartbeatAt: work.Ptr(now), Reason: work.Ptr(""), UpdatedAt: now, OpID: "op-claim"}}
	if err := f.s.Commit(f.ctx, claim); err != nil {
		t.Fatalf("claim: %v", err)
	}
	got := f.get("u1")
	if got.Status != work.StatusRunning || !got.Active || got.Attempts != 1 || got.Token != "tok" || !got.HeartbeatAt.Equal(now) || got.OpID != "op-claim" {
		t.Fatalf("after claim %+v", got)
	}
	set := func(op string) work.Set { return work.Set{UpdatedAt: now, OpID: op} }
	failing := []struct {
		name string
		op   work.UpdateItem
	}{
		{"missing item", work.UpdateItem{Kind: kind, ID: "ghost", Set: set("x")}},
		{"status", work.UpdateItem{Kind: kind, ID: "u1", If: work.Cond{Statuses: []work.Status{work.StatusPending, "done"}}, Set: set("x")}},
		{"attempts", work.UpdateItem{Kind: kind, ID: "u1", If: work.Cond{Attempts: work.Ptr(0)}, Set: set("x")}},
		{"token", work.UpdateItem{Kind: kind, ID: "u1", If: work.Cond{Token: "other"}, Set: set("x")}},
		{"active", work.UpdateItem{Kind: kind, ID: "u1", If: work.Cond{Active: work.Ptr(false)}, Set: set("x")}},
		{"not stale", work.UpdateItem{Kind: kind, ID: "u1", If: work.Cond{StaleBefore: now}, Set: set("x")}},
	}
	for _, c := range failing {
		if i := condIndex(t, f.s.Commit(f.ctx, c.op)); i != 0 {
			t.Fatalf("%s: index %d", c.name, i)
		}
	}
	if _, err := f.s.GetItem(f.ctx, kind, "ghost"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("failed update created the item: %v", err)
	}
	if got := f.get("u1"); got.OpID != "op-claim" {
		t.Fatalf("a failed condition wrote: %+v", got)
	}
	// Every condition holding at once; Set writes only what it names.
	hb := now.Add(time.Minute)
	f.clock.Advance(2 * time.Minute)
	ok := work.UpdateItem{Kind: kind, ID: "u1",
		If:  work.Cond{Statuses: []work.Status{"done", work.StatusRunning}, Attempts: work.Ptr(1), Token: "tok", Active: work.Ptr(true), StaleBefore: hb},
		Set: work.Set{HeartbeatAt: work.Ptr(hb), UpdatedAt: f.clock.Now(), OpID: "op-hb"}}
	if err := f.s.Commit(f.ctx, ok); err != nil {
		t.Fatalf("all conditions hold: %v", err)
	}
	got = f.get("u1")
	if !got.HeartbeatAt.Equal(hb) || got.OpID != "op-hb" || !got.UpdatedAt.Equal(f.clock.Now()) || got.Token != "tok" || got.Status != work.StatusRunning || got.Attempts != 1 {
		t.Fatalf("after heartbeat %+v", got)
	}
	// Emptying token and reason removes them; the status index follows the status.
	done := work.UpdateItem{Kind: kind, ID: "u1", If: work.Cond{Token: "tok"},
		Set: work.Set{Status: "done", Active: work.Ptr(false), Token: work.Ptr(""), Reason: work.Ptr("finished"),
			Data: []byte("d"), AttemptsBase: work.Ptr(1), UpdatedAt: f.clock.Now(), OpID: "op-done"}}
	if err := f.s.Commit(f.ctx, done); err != nil {
		t.Fatal(err)
	}
	got = f.get("u1")
	if got.Token != "" || got.Active || got.Status != "done" || got.Reason != "finished" || string(got.Data) != "d" || got.AttemptsBase != 1 {
		t.Fatalf("after done %+v", got)
	}
	for st, want := range map[work.Status]int{work.StatusRunning: 0, "done": 1, work.StatusPending: 0} {
		pg, err := f.s.ListItems(f.ctx, work.ListQuery{Kind: kind, Status: st})
		if err != nil || len(pg.Items) != want {
			t.Fatalf("list %s = %d items (%v), want %d", st, len(pg.Items), err, want)
		}
	}
}

func TestSlots(t *testing.T) {
	f := setup(t)
	adj := func(delta, max int) error {
		return f.s.Commit(f.ctx, work.AdjustSlots{Kind: kind, Delta: delta, Max: max})
	}
	if err := adj(3, 2); err == nil {
		t.Fatal("delta over max on an empty counter accepted")
	}
	for i := 0; i < 2; i++ {
		if err := adj(1, 2); err != nil {
			t.Fatalf("increment %d: %v", i, err)
		}
	}
	condIndex(t, adj(1, 2))
	if n, _ := f.s.ActiveCount(f.ctx, kind); n != 2 {
		t.Fatalf("active %d, want 2", n)
	}
	if err := adj(5, 0); err != nil { // unlimited
		t.Fatal(err)
	}
	if err := adj(-7, 0); err != nil {
		t.Fatal(err)
	}
	condIndex(t, adj(-1, 0))
	if n, _ := f.s.ActiveCount(f.ctx, kind); n != 0 {
		t.Fatalf("active %d, want 0", n)
	}
	if n, err := f.s.ActiveCount(f.ctx, "never"); n != 0 || err != nil {
		t.Fatalf("unused kind: %d %v", n, err)
	}
}

func TestLocks(t *testing.T) {
	f := setup(t)
	const k = "apply/acme"
	commit := func(op work.Op) error { return f.s.Commit(f.ctx, op) }
	if err := commit(work.AcquireLock{Key: k, Holder: "apply/1"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(work.AcquireLock{Key: k, Holder: "apply/1"}); err != nil {
		t.Fatalf("re-acquire by the holder: %v", err)
	}
	condIndex(t, commit(work.AcquireLock{Key: k, Holder: "apply/2"}))
	condIndex(t, commit(work.ReleaseLock{Key: k, Holder: "apply/2"}))
	if h, _ := f.s.LockHolder(f.ctx, k); h != "apply/1" {
		t.Fatalf("holder %q", h)
	}
	if err := commit(work.ReleaseLock{Key: k, Holder: "apply/1"}); err != nil {
		t.Fatal(err)
	}
	if h, err := f.s.LockHolder(f.ctx, k); h != "" || err != nil {
		t.Fatalf("holder after release %q %v", h, err)
	}
	condIndex(t, commit(work.ReleaseLock{Key: k, Holder: "apply/1"}))
	if _, err := f.s.LockHolder(f.ctx, "../x"); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("bad lock key: %v", err)
	}
}

func TestTransactionIndex(t *testing.T) {
	f := setup(t)
	f.create("t1")
	f.create("t2")
	now := f.clock.Now()
	okUpdate := func(id string) work.Op {
		return work.UpdateItem{Kind: kind, ID: id, If: work.Cond{Statuses: []work.Status{work.StatusPending}},
			Set: work.Set{Status: "approved", UpdatedAt: now, OpID: "tx"}}
	}
	cases := []struct {
		ops  []work.Op
		want int
	}{
		{[]work.Op{work.CreateItem{Item: f.item("t1")}, okUpdate("t2")}, 0},
		{[]work.Op{okUpdate("t1"), work.CreateItem{Item: f.item("t2")}}, 1},
		{[]work.Op{okUpdate("t1"), work.AdjustSlots{Kind: kind, Delta: 1, Max: 5}, work.ReleaseLock{Key: "apply/x", Holder: "h"}}, 2},
		// Two failing: the first is reported.
		{[]work.Op{okUpdate("t1"), work.AdjustSlots{Kind: kind, Delta: -1}, work.CreateItem{Item: f.item("t2")}}, 1},
	}
	for i, c := range cases {
		if got := condIndex(t, f.s.Commit(f.ctx, c.ops...)); got != c.want {
			t.Fatalf("case %d: index %d, want %d", i, got, c.want)
		}
	}
	for _, id := range []string{"t1", "t2"} {
		if got := f.get(id); got.Status != work.StatusPending || got.OpID != "create-"+id {
			t.Fatalf("failed transactions wrote %s: %+v", id, got)
		}
	}
	if n, _ := f.s.ActiveCount(f.ctx, kind); n != 0 {
		t.Fatalf("failed transaction moved the counter to %d", n)
	}
	if err := f.s.Commit(f.ctx, okUpdate("t1"), okUpdate("t2"), work.AcquireLock{Key: "apply/x", Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	if f.get("t1").Status != "approved" || f.get("t2").Status != "approved" {
		t.Fatal("transaction did not write both")
	}
}

// TestValidation: bad input is refused before any request.
func TestValidation(t *testing.T) {
	f := setup(t)
	f.create("v1")
	before := f.api.n.Load()
	now := f.clock.Now()
	big := f.item("big")
	big.Data = make([]byte, work.MaxData+1)
	many := make([]work.Op, 101)
	for i := range many {
		many[i] = work.AdjustSlots{Kind: work.Kind(fmt.Sprintf("k%d", i)), Delta: 1}
	}
	bad := []struct {
		name string
		ops  []work.Op
		code string
	}{
		{"bad kind", []work.Op{work.CreateItem{Item: work.Item{Kind: "Bad", ID: "x", Status: "pending"}}}, molt.EINVALID},
		{"empty id", []work.Op{work.UpdateItem{Kind: kind, Set: work.Set{OpID: "o"}}}, molt.EINVALID},
		{"no status", []work.Op{work.CreateItem{Item: work.Item{Kind: kind, ID: "x"}}}, molt.EINVALID},
		{"big data", []work.Op{work.CreateItem{Item: big}}, molt.ETOOLARGE},
		{"big set data", []work.Op{work.UpdateItem{Kind: kind, ID: "v1", Set: work.Set{Data: big.Data, OpID: "o"}}}, molt.ETOOLARGE},
		{"bad status", []work.Op{work.UpdateItem{Kind: kind, ID: "v1", Set: work.Set{Status: "Bad Status", OpID: "o"}}}, molt.EINVALID},
		{"bad lock", []work.Op{work.AcquireLock{Key: "nolock", Holder: "h"}}, molt.EINVALID},
		{"no holder", []work.Op{work.ReleaseLock{Key: "apply/x"}}, molt.EINVALID},
		{"same item twice", []work.Op{
			work.UpdateItem{Kind: kind, ID: "v1", Set: work.Set{UpdatedAt: now, OpID: "o"}},
			work.UpdateItem{Kind: kind, ID: "v1", Set: work.Set{UpdatedAt: now, OpID: "o"}}}, molt.EINVALID},
		{"too many ops", many, molt.EINVALID},
		{"valid then invalid", []work.Op{work.CreateItem{Item: f.item("v2")}, work.AcquireLock{Key: "x"}}, molt.EINVALID},
	}
	for _, c := range bad {
		if got := molt.ErrorCode(f.s.Commit(f.ctx, c.ops...)); got != c.code {
			t.Errorf("%s: code %q, want %q", c.name, got, c.code)
		}
	}
	_, err := f.s.ListItems(f.ctx, work.ListQuery{Kind: kind, Page: page.Query{Limit: 1000}})
	wantCode(t, err, molt.EINVALID)
	_, err = f.s.ListItems(f.ctx, work.ListQuery{Kind: "Bad"})
	wantCode(t, err, molt.EINVALID)
	_, err = f.s.GetItem(f.ctx, kind, "a b")
	wantCode(t, err, molt.EINVALID)
	if n := f.api.n.Load() - before; n != 0 {
		t.Fatalf("%d requests sent for invalid input, want 0", n)
	}
}

func TestWithFaults(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	inj := &faults.Injector{}
	clock := molt.NewManualClock(epoch)
	s := dynamo.New(dynamo.WithFaults(client, inj), table, dynamo.Options{Clock: clock})
	ctx := context.Background()
	it := work.Item{Kind: kind, ID: "f1", Status: work.StatusPending, OpID: "o1"}

	inj.Next(faults.Before)
	err := s.Commit(ctx, work.CreateItem{Item: it})
	if !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("before: %v, want injected", err)
	}
	var cf *work.ConditionFailed
	if errors.As(err, &cf) {
		t.Fatal("an injected fault reported as a condition failure")
	}
	if _, err := s.GetItem(ctx, kind, "f1"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("before-fault wrote the item: %v", err)
	}

	inj.Next(faults.After)
	if err := s.Commit(ctx, work.CreateItem{Item: it}); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("after: %v, want injected", err)
	}
	if got, err := s.GetItem(ctx, kind, "f1"); err != nil || got.OpID != "o1" {
		t.Fatalf("after-fault did not write the item: %+v %v", got, err)
	}
	// Transactions and batch writes go through the injector too; reads do not.
	inj.Next(faults.Before)
	err = s.Commit(ctx, work.AdjustSlots{Kind: kind, Delta: 1}, work.AcquireLock{Key: "apply/x", Holder: "h"})
	if !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("transaction: %v", err)
	}
	writes, _ := inj.Counts()
	if _, err := s.ListItems(ctx, work.ListQuery{Kind: kind}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockHolder(ctx, "apply/x"); err != nil {
		t.Fatal(err)
	}
	if w, _ := inj.Counts(); w != writes {
		t.Fatalf("reads consulted the injector (%d → %d)", writes, w)
	}
	if _, _, err := s.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if _, err := s.PutFile(ctx, workspace.File{Workspace: "acme", Path: fmt.Sprintf("agents/a%02d/AGENT.md", i), Content: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	w0, _ := inj.Counts()
	if err := s.DeleteWorkspace(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	// One UpdateItem (the deletion mark), 31 items (30 files and the counter) in
	// two batches, then one DeleteItem (META).
	if w, _ := inj.Counts(); w-w0 != 4 {
		t.Fatalf("delete workspace made %d writes through the injector, want 4", w-w0)
	}
	if dynamo.WithFaults(client, nil) != dynamo.API(client) {
		t.Fatal("WithFaults(nil) should return the client itself")
	}
}

// lossy is an HTTP client that, once armed, sends the next request for target
// and then drops its response with a retryable connection error, so the SDK
// sends it again: the first attempt landed, the caller never heard.
type lossy struct {
	base   *http.Client
	target string
	armed  atomic.Bool
}

func (l *lossy) Do(r *http.Request) (*http.Response, error) {
	resp, err := l.base.Do(r)
	if err == nil && strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+l.target) && l.armed.CompareAndSwap(true, false) {
		resp.Body.Close()
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return resp, err
}

// TestRetriedConditionIsUnknown: when the SDK re-sends a conditional write whose
// first attempt landed, the second attempt's condition failure must not be taken
// for a refusal; the protocol reads back and finds its write.
func TestRetriedConditionIsUnknown(t *testing.T) {
	t.Parallel()
	_, table := newTable(t)
	ctx := context.Background()
	noWait := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	for _, target := range []string{"TransactWriteItems", "UpdateItem"} {
		t.Run(target, func(t *testing.T) {
			l := &lossy{base: &http.Client{}, target: target}
			lossyClient := newClient(t, func(o *dynamodb.Options) {
				o.HTTPClient = l
				o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.Backoff = noWait })
			})
			clock := molt.NewManualClock(epoch)
			ids := &molt.SortableIDs{Clock: clock}
			s := dynamo.New(lossyClient, table, dynamo.Options{Clock: clock, IDs: ids})
			p := &work.Protocol{Backend: s, Clock: clock, IDs: ids}
			k := work.Kind("k" + strings.ToLower(target))
			it, err := p.Create(ctx, work.Item{Kind: k})
			if err != nil {
				t.Fatal(err)
			}
			if target == "TransactWriteItems" {
				l.armed.Store(true)
				c, _, err := p.Claim(ctx, k, it.ID, 0, 1)
				if err != nil {
					t.Fatalf("claim whose response was lost once: %v", err)
				}
				if l.armed.Load() {
					t.Fatal("the fault was not used")
				}
				if n, _ := s.ActiveCount(ctx, k); n != 1 {
					t.Fatalf("active %d, want 1", n)
				}
				if got, _ := s.GetItem(ctx, k, it.ID); got.Token != c.Token {
					t.Fatalf("token %q, want %q", got.Token, c.Token)
				}
				return
			}
			// A single conditional update whose condition its own first attempt
			// breaks: the adapter must report an unknown outcome, not a refusal.
			l.armed.Store(true)
			err = s.Commit(ctx, work.UpdateItem{Kind: k, ID: it.ID, If: work.Cond{Statuses: []work.Status{work.StatusPending}},
				Set: work.Set{Status: "done", UpdatedAt: clock.Now(), OpID: "op-lost"}})
			var cf *work.ConditionFailed
			if err == nil || errors.As(err, &cf) {
				t.Fatalf("retried condition failure = %v, want an unknown outcome", err)
			}
			if got, _ := s.GetItem(ctx, k, it.ID); got.OpID != "op-lost" {
				t.Fatalf("first attempt did not land: %+v", got)
			}
		})
	}
}

func TestListing(t *testing.T) {
	f := setup(t)
	var ids []string
	for i := 0; i < 7; i++ {
		it := f.item(f.ids.NewID())
		if err := f.s.Commit(f.ctx, work.CreateItem{Item: it}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	list := func(q work.ListQuery) []string {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			pg, err := f.s.ListItems(f.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(pg.Items) > max(q.Page.Limit, 1) || pages > 10 {
				t.Fatalf("page of %d, limit %d", len(pg.Items), q.Page.Limit)
			}
			for _, it := range pg.Items {
				got = append(got, it.ID)
			}
			if pg.Next == "" {
				return got
			}
			q.Page.Cursor = pg.Next
		}
	}
	rev := func(s []string) string {
		r := make([]string, len(s))
		for i := range s {
			r[len(s)-1-i] = s[i]
		}
		return strings.Join(r, ",")
	}
	for _, limit := range []int{1, 3, 7, 8} {
		if got := list(work.ListQuery{Kind: kind, Page: page.Query{Limit: limit}}); strings.Join(got, ",") != rev(ids) {
			t.Fatalf("limit %d newest first = %v", limit, got)
		}
		if got := list(work.ListQuery{Kind: kind, Oldest: true, Page: page.Query{Limit: limit}}); strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Fatalf("limit %d oldest first = %v", limit, got)
		}
	}
	// An exact last page has no Next.
	pg, err := f.s.ListItems(f.ctx, work.ListQuery{Kind: kind, Page: page.Query{Limit: 7}})
	if err != nil || len(pg.Items) != 7 || pg.Next != "" {
		t.Fatalf("exact page: %d items next %q %v", len(pg.Items), pg.Next, err)
	}
	// The cursor stays valid when the item it names leaves the listing.
	pg, err = f.s.ListItems(f.ctx, work.ListQuery{Kind: kind, Status: work.StatusPending, Page: page.Query{Limit: 2}})
	if err != nil || pg.Next == "" {
		t.Fatal(err)
	}
	last := pg.Items[1].ID
	if err := f.s.Commit(f.ctx, work.UpdateItem{Kind: kind, ID: last, Set: work.Set{Status: "done", OpID: "x"}}); err != nil {
		t.Fatal(err)
	}
	rest, err := f.s.ListItems(f.ctx, work.ListQuery{Kind: kind, Status: work.StatusPending, Page: page.Query{Cursor: pg.Next, Limit: 10}})
	if err != nil || len(rest.Items) != 5 || rest.Items[0].ID != ids[4] {
		t.Fatalf("after the cursor item moved: %d items %v", len(rest.Items), err)
	}
	// Large items: DynamoDB returns at most 1 MB per response; pages still fill.
	blob := bytes.Repeat([]byte("x"), 90<<10)
	for i := 0; i < 14; i++ {
		it := f.item(f.ids.NewID())
		it.Kind, it.Data = "big", blob
		if err := f.s.Commit(f.ctx, work.CreateItem{Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	pg, err = f.s.ListItems(f.ctx, work.ListQuery{Kind: "big", Page: page.Query{Limit: 13}})
	if err != nil || len(pg.Items) != 13 || pg.Next == "" || len(pg.Items[12].Data) != len(blob) {
		t.Fatalf("big page: %d items next %q %v", len(pg.Items), pg.Next, err)
	}
	for _, bad := range []string{"!!", page.Cursor(strings.Repeat("x", 600))} {
		if _, err := f.s.ListItems(f.ctx, work.ListQuery{Kind: kind, Page: page.Query{Cursor: bad}}); molt.ErrorCode(err) != molt.EINVALID {
			t.Fatalf("cursor %q: %v", bad, err)
		}
	}
}

func TestWorkspaces(t *testing.T) {
	f := setup(t)
	w, created, err := f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: "acme", Description: "one"})
	if err != nil || !created || !w.CreatedAt.Equal(epoch) || !w.UpdatedAt.Equal(epoch) {
		t.Fatalf("create %+v %v %v", w, created, err)
	}
	f.clock.Advance(time.Hour)
	w, created, err = f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: "acme", CreatedAt: epoch.Add(-time.Hour)})
	if err != nil || created || !w.CreatedAt.Equal(epoch) || !w.UpdatedAt.Equal(epoch.Add(time.Hour)) || w.Description != "" {
		t.Fatalf("update %+v %v %v", w, created, err)
	}
	if got, err := f.s.GetWorkspace(f.ctx, "acme"); err != nil || got != w {
		t.Fatalf("get %+v %v, want %+v", got, err, w)
	}
	_, _, err = f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: workspace.Global})
	if molt.ErrorCode(err) != molt.EINVALID || molt.ErrorReason(err) != "reserved" {
		t.Fatalf("global: %v", err)
	}
	_, _, err = f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: "acme", Description: strings.Repeat("d", workspace.MaxDescLength+1)})
	wantCode(t, err, molt.EINVALID)
	wantCode(t, f.s.DeleteWorkspace(f.ctx, workspace.Global), molt.EINVALID)
	_, err = f.s.GetWorkspace(f.ctx, workspace.Global)
	wantCode(t, err, molt.ENOTFOUND)

	// Files: a missing workspace, the global surface, overwrite, sizes.
	_, err = f.s.PutFile(f.ctx, workspace.File{Workspace: "ghost", Path: "USER.md"})
	wantCode(t, err, molt.ENOTFOUND)
	if _, err := f.s.PutFile(f.ctx, workspace.File{Workspace: workspace.Global, Path: "INDEX.md", Content: []byte("g")}); err != nil {
		t.Fatal(err)
	}
	empty, err := f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "USER.md"})
	if err != nil || empty.Size != 0 || empty.SHA256 != workspace.NewFile("", "", nil, time.Time{}).SHA256 {
		t.Fatalf("empty file %+v %v", empty, err)
	}
	if got, err := f.s.GetFile(f.ctx, "acme", "USER.md"); err != nil || got.Content == nil || len(got.Content) != 0 || !got.UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("empty file read back %+v %v", got, err)
	}
	full := bytes.Repeat([]byte("m"), workspace.MaxFileSize)
	if _, err := f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "INSTRUCTIONS.md", Content: full}); err != nil {
		t.Fatalf("file at the size limit: %v", err)
	}
	_, err = f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "INSTRUCTIONS.md", Content: append(full, 'x')})
	wantCode(t, err, molt.ETOOLARGE)
	files, err := f.s.ListFiles(f.ctx, "acme")
	if err != nil || len(files) != 2 || files[0].Path != "INSTRUCTIONS.md" || len(files[0].Content) != len(full) || files[1].Path != "USER.md" {
		t.Fatalf("files %d %v", len(files), err)
	}
	if g, _ := f.s.ListFiles(f.ctx, workspace.Global); len(g) != 1 || g[0].Workspace != workspace.Global {
		t.Fatalf("global files %+v", g)
	}

	// The file budget: a full surface refuses new files and still takes overwrites.
	_, err = f.client.PutItem(f.ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "WS#acme"}, "sk": &types.AttributeValueMemberS{Value: "FILES"},
		"n": &types.AttributeValueMemberN{Value: fmt.Sprint(workspace.MaxFiles)}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "INDEX.md", Content: []byte("x")})
	if molt.ErrorCode(err) != molt.ECONFLICT || molt.ErrorReason(err) != dynamo.ReasonTooManyFiles {
		t.Fatalf("file over the budget: %v", err)
	}
	if _, err := f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: []byte("u")}); err != nil {
		t.Fatalf("overwrite in a full surface: %v", err)
	}
	if err := f.s.DeleteFile(f.ctx, "acme", "USER.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "INDEX.md", Content: []byte("x")}); err != nil {
		t.Fatalf("new file after a delete freed room: %v", err)
	}
	wantCode(t, f.s.DeleteFile(f.ctx, "acme", "USER.md"), molt.ENOTFOUND)

	// Delete removes the files; a workspace made again under that name starts empty.
	if err := f.s.DeleteWorkspace(f.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, f.s.DeleteWorkspace(f.ctx, "acme"), molt.ENOTFOUND)
	_, err = f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "USER.md"})
	wantCode(t, err, molt.ENOTFOUND)
	if _, created, err := f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: "acme"}); err != nil || !created {
		t.Fatalf("re-create: %v %v", created, err)
	}
	if fs, err := f.s.ListFiles(f.ctx, "acme"); err != nil || len(fs) != 0 {
		t.Fatalf("re-created workspace has %d files %v", len(fs), err)
	}
	if _, err := f.s.PutFile(f.ctx, workspace.File{Workspace: "acme", Path: "USER.md"}); err != nil {
		t.Fatalf("file budget not reset by delete: %v", err)
	}

	// A delete that stopped after removing META: the next delete finishes it.
	if _, err := f.client.DeleteItem(f.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "WS#acme"}, "sk": &types.AttributeValueMemberS{Value: "META"}}}); err != nil {
		t.Fatal(err)
	}
	if fs, _ := f.s.ListFiles(f.ctx, "acme"); len(fs) != 1 {
		t.Fatalf("leftover files %d, want 1", len(fs))
	}
	wantCode(t, f.s.DeleteWorkspace(f.ctx, "acme"), molt.ENOTFOUND)
	if fs, _ := f.s.ListFiles(f.ctx, "acme"); len(fs) != 0 {
		t.Fatalf("leftover files after a second delete: %d", len(fs))
	}
	if _, _, err := f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}

	// Listing: newest first by creation, cursors across pages.
	for _, n := range []string{"w1", "w2", "w3"} {
		f.clock.Advance(time.Second)
		if _, _, err := f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	q := page.Query{Limit: 2}
	for {
		pg, err := f.s.ListWorkspaces(f.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range pg.Items {
			names = append(names, w.Name)
		}
		if pg.Next == "" {
			break
		}
		q.Cursor = pg.Next
	}
	if strings.Join(names, ",") != "w3,w2,w1,acme" {
		t.Fatalf("workspaces = %v", names)
	}
}

func TestTokensAndSettings(t *testing.T) {
	f := setup(t)
	secret, tok, err := auth.New(auth.Full, "", "admin", f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.PutToken(f.ctx, tok); err != nil {
		t.Fatal(err)
	}
	err = f.s.PutToken(f.ctx, tok)
	if molt.ErrorCode(err) != molt.ECONFLICT || molt.ErrorReason(err) != "exists" {
		t.Fatalf("duplicate: %v", err)
	}
	got, err := f.s.TokenByHash(f.ctx, auth.Hash(secret))
	if err != nil || got != tok {
		t.Fatalf("token %+v %v, want %+v", got, err, tok)
	}
	for _, h := range []string{"", auth.Hash("other"), strings.Repeat("a", 200)} {
		if _, err := f.s.TokenByHash(f.ctx, h); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("hash %q: %v", h, err)
		}
	}
	wantCode(t, f.s.PutToken(f.ctx, auth.Token{Level: auth.Full}), molt.EINVALID)

	s, err := f.s.GetSettings(f.ctx)
	if err != nil || s != settings.Default() {
		t.Fatalf("defaults %+v %v", s, err)
	}
	s.General.Language = "de-DE"
	s.Evolution.Triggers.PreCompact = false
	if err := f.s.PutSettings(f.ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, err := f.s.GetSettings(f.ctx); err != nil || got != s {
		t.Fatalf("settings %+v %v", got, err)
	}
	bad := s
	bad.Evolution.Level = "L9"
	wantCode(t, f.s.PutSettings(f.ctx, bad), molt.EINVALID)
}

// TestSlotAttribute: a claim without a slot is stored with noslot, and its
// release removes it; an active item without the attribute (claimed before it
// existed, when every claim took a slot) reads as holding a slot.
func TestSlotAttribute(t *testing.T) {
	f := setup(t)
	pk := "WORK#" + string(kind) + "#"
	free := f.create("free")
	c, _, err := f.p.ClaimSeen(f.ctx, free, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.raw(pk+"free", "WORK")["noslot"]; !ok || f.get("free").Slot {
		t.Fatalf("unbudgeted claim: raw %v, item %+v", f.raw(pk+"free", "WORK"), f.get("free"))
	}
	if _, err := f.p.Transition(f.ctx, c, work.Transition{To: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.raw(pk+"free", "WORK")["noslot"]; ok {
		t.Fatal("release kept noslot")
	}
	budgeted := f.create("budgeted")
	if _, _, err := f.p.ClaimSeen(f.ctx, budgeted, 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.raw(pk+"budgeted", "WORK")["noslot"]; ok || !f.get("budgeted").Slot {
		t.Fatalf("budgeted claim: raw %v, item %+v", f.raw(pk+"budgeted", "WORK"), f.get("budgeted"))
	}
	legacy := f.item("legacy")
	legacy.Status, legacy.Active, legacy.Token, legacy.Attempts = work.StatusRunning, true, "tok", 1
	legacy.Slot = true // encoded without noslot, as before the attribute
	if err := f.s.Commit(f.ctx, work.CreateItem{Item: legacy}); err != nil {
		t.Fatal(err)
	}
	if got := f.get("legacy"); !got.Slot {
		t.Fatalf("legacy claimed item %+v reads without a slot", got)
	}
}
