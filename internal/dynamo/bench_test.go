package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// counting is a dynamo.API that counts the requests sent through it.
type counting struct {
	dynamo.API
	n, writes atomic.Int64
}

func (c *counting) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n.Add(1)
	return c.API.GetItem(ctx, in, o...)
}

func (c *counting) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.n.Add(1)
	return c.API.Query(ctx, in, o...)
}

func (c *counting) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.n.Add(1)
	c.writes.Add(1)
	return c.API.PutItem(ctx, in, o...)
}

func (c *counting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	c.writes.Add(1)
	return c.API.UpdateItem(ctx, in, o...)
}

func (c *counting) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.n.Add(1)
	c.writes.Add(1)
	return c.API.DeleteItem(ctx, in, o...)
}

func (c *counting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.n.Add(1)
	c.writes.Add(1)
	return c.API.TransactWriteItems(ctx, in, o...)
}

func (c *counting) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.n.Add(1)
	c.writes.Add(1)
	return c.API.BatchWriteItem(ctx, in, o...)
}

// benchStore returns a protocol on a fresh table whose requests are counted.
func benchStore(b *testing.B) (*work.Protocol, *counting) {
	b.Helper()
	client, table := newTable(b)
	api := &counting{API: client}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	s := dynamo.New(api, table, dynamo.Options{Clock: clock, IDs: ids})
	return &work.Protocol{Backend: s, Clock: clock, IDs: ids}, api
}

func benchItems(b *testing.B, p *work.Protocol, n int) []work.Item {
	b.Helper()
	items := make([]work.Item, n)
	for i := range items {
		it, err := p.Create(context.Background(), work.Item{Kind: "bench", LockKey: "apply/bench-" + strconv.Itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		items[i] = it
	}
	return items
}

// BenchmarkClaimCycle runs what a worker does for one wake-up — read the item,
// claim it, heartbeat, finish — and reports the DynamoDB requests and writes each
// cycle takes. The minimum is one conditional write per transition (3); the read
// is the worker's look at the item its wake-up names.
func BenchmarkClaimCycle(b *testing.B) {
	p, api := benchStore(b)
	items := benchItems(b, p, b.N)
	ctx := context.Background()
	api.n.Store(0)
	api.writes.Store(0)
	b.ResetTimer()
	for _, it := range items {
		seen, err := p.Backend.GetItem(ctx, it.Kind, it.ID)
		if err != nil {
			b.Fatal(err)
		}
		c, _, err := p.ClaimSeen(ctx, seen, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Heartbeat(ctx, c); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Transition(ctx, c, work.Transition{To: "done"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	perCycle := float64(api.n.Load()) / float64(b.N)
	writes := float64(api.writes.Load()) / float64(b.N)
	b.ReportMetric(perCycle, "requests/cycle")
	b.ReportMetric(writes, "writes/cycle")
	b.ReportMetric(writes/3, "writes-x-minimum")
}

// BenchmarkClaimParallel16 has 16 claimers claim and finish b.N items (unlimited
// budget, so every claim still updates the kind's slot counter) and reports
// claims per second.
func BenchmarkClaimParallel16(b *testing.B) {
	p, _ := benchStore(b)
	items := benchItems(b, p, b.N)
	ctx := context.Background()
	next := make(chan work.Item, len(items))
	for _, it := range items {
		next <- it
	}
	close(next)
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				c, _, err := p.Claim(ctx, it.Kind, it.ID, 0, 0)
				if err != nil {
					failed.Add(1)
					continue
				}
				if _, err := p.Transition(ctx, c, work.Transition{To: "done"}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d claims failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "claims/s")
}
