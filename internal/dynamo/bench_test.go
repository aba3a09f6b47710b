package dynamo_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/storetest"
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

// BenchmarkClaims: claim cycle cost in DynamoDB requests (counted at the API)
// and 16 concurrent claimers, on the emulator (or LocalStack).
func BenchmarkClaims(b *testing.B) {
	storetest.BenchClaims(b, func(b *testing.B, o storetest.Options) (store.Store, storetest.Counter) {
		client, table := newTable(b)
		api := &counting{API: client}
		s := dynamo.New(api, table, dynamo.Options{Clock: o.Clock, IDs: o.IDs})
		return s, func() (int64, int64) { return api.n.Load(), api.writes.Load() }
	})
}
