package dynamo_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/dynamo"
)

// newTable creates a fresh table on the emulator and deletes it when the test ends.
func newTable(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	client := newClient(t)
	table := awstest.Name("molt")
	if err := dynamo.CreateTable(context.Background(), client, table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return client, table
}

// newClient returns a client of the emulator. The emulator sends no CRC32 header,
// which makes the SDK log a warning per response; validation is off in tests.
func newClient(t testing.TB, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	opts = append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
		// Keep a connection per concurrent caller (the SDK keeps 10 idle per host).
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxIdleConnsPerHost = 64 })
	}}, opts...)
	return dynamodb.NewFromConfig(awstest.Config(t), opts...)
}
