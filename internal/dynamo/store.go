package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/store"
)

// Attribute and index names of the table (see doc.go).
const (
	attrPK   = "pk"
	attrSK   = "sk"
	attrG1PK = "gsi1pk"
	attrG1SK = "gsi1sk"
	attrG2PK = "gsi2pk"
	attrG2SK = "gsi2sk"
	attrG3PK = "gsi3pk"
	attrG3SK = "gsi3sk"
	attrG4SK = "gsi4sk" // gsi4's hash key is gsi2pk
	index1   = "gsi1"
	index2   = "gsi2"
	index3   = "gsi3"
	index4   = "gsi4"
)

// Options configure a Store.
type Options struct {
	Clock molt.Clock // nil → molt.SystemClock{}
	IDs   molt.IDs   // nil → &molt.SortableIDs{Clock: Clock}
	// CallTimeout bounds each DynamoDB call (0 → DefaultCallTimeout).
	CallTimeout time.Duration
}

// Store is the DynamoDB adapter of store.Store: all of molt's state in one table.
// It is safe for concurrent use.
type Store struct {
	api   API
	table string
	clock molt.Clock
	ids   molt.IDs
}

var _ store.Store = (*Store)(nil)

// New returns a Store on table (created by CreateTable or the template) through api.
// Every call gets its own deadline (Options.CallTimeout), and a call that fails to
// reach DynamoDB, is throttled or runs out of SDK retries returns EUNAVAILABLE.
func New(api API, table string, o Options) *Store {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	api = &guarded{api: api, timeout: o.CallTimeout}
	if o.Clock == nil {
		o.Clock = molt.SystemClock{}
	}
	if o.IDs == nil {
		o.IDs = &molt.SortableIDs{Clock: o.Clock}
	}
	return &Store{api: api, table: table, clock: o.Clock, ids: o.IDs}
}

func (s *Store) now() time.Time { return s.clock.Now().UTC() }

// key returns the primary key of an item.
func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk), attrSK: str(sk)}
}

// get reads one item with strong consistency; found is false when it is absent.
func (s *Store) get(ctx context.Context, k map[string]types.AttributeValue) (map[string]types.AttributeValue, bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: k, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, false, err
	}
	if len(out.Item) == 0 {
		return nil, false, nil
	}
	return out.Item, true, nil
}

// queryPage runs in (a Query) for up to limit items, following LastEvaluatedKey
// when DynamoDB stops early (1 MB per response). It asks for one item more than
// limit, so more reports truthfully whether another page exists.
func (s *Store) queryPage(ctx context.Context, in *dynamodb.QueryInput, limit int) (items []map[string]types.AttributeValue, more bool, err error) {
	in.TableName = aws.String(s.table)
	for {
		in.Limit = aws.Int32(int32(limit + 1 - len(items)))
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, false, err
		}
		items = append(items, out.Items...)
		if len(items) > limit {
			return items[:limit], true, nil
		}
		if len(out.LastEvaluatedKey) == 0 {
			return items, false, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// queryAll runs in to the end.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	in.TableName = aws.String(s.table)
	var items []map[string]types.AttributeValue
	for {
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// exprs collects the placeholders of one request's expressions. Every attribute
// name goes through a placeholder, so DynamoDB's reserved words (status, data,
// token, name, level, …) never clash.
type exprs struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func (e *exprs) name(attr string) string {
	if e.names == nil {
		e.names = map[string]string{}
	}
	k := "#" + attr
	e.names[k] = attr
	return k
}

func (e *exprs) value(v types.AttributeValue) string {
	if e.values == nil {
		e.values = map[string]types.AttributeValue{}
	}
	k := ":v" + strconv.Itoa(len(e.values))
	e.values[k] = v
	return k
}

// update builds an UpdateExpression from SET, REMOVE and ADD clauses.
type update struct {
	e      *exprs
	set    []string
	remove []string
	add    []string
}

func (u *update) setVal(attr string, v types.AttributeValue) {
	u.set = append(u.set, u.e.name(attr)+" = "+u.e.value(v))
}

// setStr sets attr to v, or removes it when v is "" (absent reads back as "").
func (u *update) setStr(attr, v string) {
	if v == "" {
		u.remove = append(u.remove, u.e.name(attr))
		return
	}
	u.setVal(attr, str(v))
}

// setTime sets attr to t, or removes it when t is zero.
func (u *update) setTime(attr string, t time.Time) {
	if t.IsZero() {
		u.remove = append(u.remove, u.e.name(attr))
		return
	}
	u.setVal(attr, tnum(t))
}

func (u *update) expr() string {
	var parts []string
	if len(u.set) > 0 {
		parts = append(parts, "SET "+strings.Join(u.set, ", "))
	}
	if len(u.remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(u.remove, ", "))
	}
	if len(u.add) > 0 {
		parts = append(parts, "ADD "+strings.Join(u.add, ", "))
	}
	return strings.Join(parts, " ")
}

// Attribute value helpers.

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func boolean(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

// tnum stores a time as Unix nanoseconds: numeric, sortable, exact.
func tnum(t time.Time) types.AttributeValue { return num(t.UnixNano()) }

func getS(m map[string]types.AttributeValue, k string) string {
	if v, ok := m[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(m map[string]types.AttributeValue, k string) int64 {
	if v, ok := m[k].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err == nil {
			return n
		}
		// ADD counters and numbers written by other tools may come back as decimals.
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil {
			return int64(f)
		}
	}
	return 0
}

func getBool(m map[string]types.AttributeValue, k string) bool {
	if v, ok := m[k].(*types.AttributeValueMemberBOOL); ok {
		return v.Value
	}
	return false
}

func getB(m map[string]types.AttributeValue, k string) []byte {
	if v, ok := m[k].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

// getTime reads a time stored by tnum; absent is the zero time.
func getTime(m map[string]types.AttributeValue, k string) time.Time {
	if _, ok := m[k]; !ok {
		return time.Time{}
	}
	return time.Unix(0, getN(m, k)).UTC()
}

// Error classification.

// conditionIndex reports whether err is a condition failure and which item of the
// request failed: 0 for a single-item write, the first ConditionalCheckFailed
// cancellation reason of a transaction.
func conditionIndex(err error) (int, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return 0, true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return i, true
			}
		}
	}
	return 0, false
}

// transient reports a write DynamoDB refused without applying it for a reason
// that a retry may clear: a transaction cancelled because of another transaction
// on one of its items or throttling, or a single-item write refused because an
// ongoing transaction holds its item (TransactionConflictException, which the SDK
// does not retry).
func transient(err error) bool {
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return true
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	seen := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None":
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			seen = true
		default:
			return false
		}
	}
	return seen
}

// backoff waits before retry number try (0-based), with full jitter.
func backoff(ctx context.Context, try int) error {
	d := time.Duration(rand.Int64N(int64(5*time.Millisecond) << min(try, 6)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// failure wraps an SDK error with context.
func failure(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }
