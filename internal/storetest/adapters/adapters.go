// Package adapters opens a fresh store of each adapter for tests of packages
// built on the store (runs, applies, …), so their tests run on SQLite and on
// DynamoDB (the emulator at AWS_ENDPOINT_URL) alike.
package adapters

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/store"
)

// Opener opens a fresh, empty store on clock and ids.
type Opener func(t testing.TB, clock molt.Clock, ids molt.IDs) store.Store

// OpenSQLite opens a store on a new SQLite file in the test's temporary folder.
func OpenSQLite(t testing.TB, clock molt.Clock, ids molt.IDs) store.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "molt.db"), sqlite.Options{Clock: clock, IDs: ids})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// OpenDynamo opens a store on a new table of the emulator (skipped without
// AWS_ENDPOINT_URL, failed under CI=true; see awstest.Config).
func OpenDynamo(t testing.TB, clock molt.Clock, ids molt.IDs) store.Store {
	t.Helper()
	client := dynamodb.NewFromConfig(awstest.Config(t), func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true // emulators send no CRC32
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxIdleConnsPerHost = 64 })
	})
	table := awstest.Name("molt-test")
	if err := dynamo.CreateTable(context.Background(), client, table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return dynamo.New(client, table, dynamo.Options{Clock: clock, IDs: ids})
}

// Each runs f on both adapters, in parallel subtests "sqlite" and "dynamo".
func Each(t *testing.T, f func(t *testing.T, open Opener)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); f(t, OpenSQLite) })
	t.Run("dynamo", func(t *testing.T) { t.Parallel(); f(t, OpenDynamo) })
}
