package dynamo

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/molt-dev/molt/internal/awserr"
	"github.com/molt-dev/molt/internal/faults"
)

// API is the narrow set of DynamoDB calls the Store uses. *dynamodb.Client
// satisfies it; WithFaults and test wrappers decorate it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// TableAPI is what CreateTable needs. *dynamodb.Client satisfies it.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ TableAPI = (*dynamodb.Client)(nil)

// WithFaults wraps api so that every write call (PutItem, UpdateItem, DeleteItem,
// TransactWriteItems, BatchWriteItem) first asks inj.Take(): faults.Before returns an
// error wrapping faults.ErrInjected without calling DynamoDB; faults.After performs
// the call, then returns an error wrapping faults.ErrInjected as if the response had
// been lost. Reads pass through. A nil inj returns api unchanged.
func WithFaults(api API, inj *faults.Injector) API {
	if inj == nil {
		return api
	}
	return &faulty{API: api, inj: inj}
}

type faulty struct {
	API
	inj *faults.Injector
}

// inject runs one write call under the injector's next decision.
func inject[I, O any](inj *faults.Injector, name string, call func(context.Context, I, ...func(*dynamodb.Options)) (O, error),
	ctx context.Context, in I, optFns []func(*dynamodb.Options)) (O, error) {
	var zero O
	switch inj.Take() {
	case faults.Before:
		return zero, fmt.Errorf("%s: %w", name, faults.ErrInjected)
	case faults.After:
		// The write happens; its response (success or failure) is lost.
		_, _ = call(ctx, in, optFns...)
		return zero, fmt.Errorf("%s: %w", name, faults.ErrInjected)
	}
	return call(ctx, in, optFns...)
}

func (f *faulty) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return inject(f.inj, "put item", f.API.PutItem, ctx, in, optFns)
}

func (f *faulty) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return inject(f.inj, "update item", f.API.UpdateItem, ctx, in, optFns)
}

func (f *faulty) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return inject(f.inj, "delete item", f.API.DeleteItem, ctx, in, optFns)
}

func (f *faulty) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return inject(f.inj, "transact write items", f.API.TransactWriteItems, ctx, in, optFns)
}

func (f *faulty) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return inject(f.inj, "batch write item", f.API.BatchWriteItem, ctx, in, optFns)
}

// attempts counts the HTTP attempts the SDK makes for one call. The SDK retries
// transient failures by itself; when a conditional write is retried, its first
// attempt may have been applied with the response lost, so a condition failure on
// a later attempt may be the write failing against itself. Callers treat such a
// failure as an unknown outcome rather than a refusal.
type attempts struct{ n atomic.Int32 }

func (a *attempts) retried() bool { return a.n.Load() > 1 }

// opt is a per-call SDK option that installs the counter just after the retry
// middleware, so it runs once per attempt.
func (a *attempts) opt(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		mw := middleware.FinalizeMiddlewareFunc("MoltCountAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				a.n.Add(1)
				return next.HandleFinalize(ctx, in)
			})
		if err := st.Finalize.Insert(mw, "Retry", middleware.After); err != nil {
			return st.Finalize.Add(mw, middleware.After)
		}
		return nil
	})
}

// DefaultCallTimeout bounds one DynamoDB call, the SDK's own retries included,
// when Options.CallTimeout is zero: well under a request's deadline, so a hung
// table answers 503 while the client still waits.
const DefaultCallTimeout = 10 * time.Second

// guarded gives every call its own deadline and turns transport faults,
// throttling and exhausted retries into molt.EUNAVAILABLE (awserr.Classify);
// other errors (condition failures, validation) pass unchanged.
type guarded struct {
	api     API
	timeout time.Duration
}

func guard[I, O any](g *guarded, name string, call func(context.Context, I, ...func(*dynamodb.Options)) (O, error),
	ctx context.Context, in I, optFns []func(*dynamodb.Options)) (O, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	out, err := call(ctx, in, optFns...)
	return out, awserr.Classify(err, "dynamodb "+name)
}

func (g *guarded) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return guard(g, "get item", g.api.GetItem, ctx, in, optFns)
}

func (g *guarded) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return guard(g, "put item", g.api.PutItem, ctx, in, optFns)
}

func (g *guarded) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return guard(g, "update item", g.api.UpdateItem, ctx, in, optFns)
}

func (g *guarded) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return guard(g, "delete item", g.api.DeleteItem, ctx, in, optFns)
}

func (g *guarded) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return guard(g, "query", g.api.Query, ctx, in, optFns)
}

func (g *guarded) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return guard(g, "transact write items", g.api.TransactWriteItems, ctx, in, optFns)
}

func (g *guarded) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return guard(g, "batch write item", g.api.BatchWriteItem, ctx, in, optFns)
}
