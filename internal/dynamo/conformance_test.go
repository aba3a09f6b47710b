package dynamo_test

import (
	"testing"

	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/storetest"
)

// TestConformance runs the store conformance suite against DynamoDB (the
// emulator), one fresh table per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		client, table := newTable(t)
		return dynamo.New(dynamo.WithFaults(client, o.Faults), table, dynamo.Options{Clock: o.Clock, IDs: o.IDs})
	})
}
