package dynamo_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// offlineClient is a DynamoDB client of endpoint, which is not an emulator.
func offlineClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// hungEndpoint accepts connections and never answers.
func hungEndpoint(t *testing.T) string {
	t.Helper()
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
	return "http://" + ln.Addr().String()
}

// refusedEndpoint is an address nothing listens on.
func refusedEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// TestUnreachableIsUnavailable: a table that refuses connections or never
// answers makes reads and writes fail with EUNAVAILABLE (503 to API clients),
// a hung one within the call deadline.
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		endpoint func(*testing.T) string
	}{
		{"refused", refusedEndpoint},
		{"hung", hungEndpoint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := dynamo.New(offlineClient(c.endpoint(t)), "molt", dynamo.Options{CallTimeout: 300 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			_, err := st.TokenByHash(ctx, "0123456789abcdef")
			if got := molt.ErrorCode(err); got != molt.EUNAVAILABLE {
				t.Fatalf("TokenByHash: code %q (%v), want %q", got, err, molt.EUNAVAILABLE)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("TokenByHash took %v, want about the 300ms call deadline", d)
			}
			_, err = st.ActiveCount(ctx, work.KindTurn)
			if got := molt.ErrorCode(err); got != molt.EUNAVAILABLE {
				t.Fatalf("ActiveCount: code %q (%v), want %q", got, err, molt.EUNAVAILABLE)
			}
			err = st.Commit(ctx, work.CreateItem{Item: work.Item{Kind: work.KindTurn, ID: "t1", Status: work.StatusPending}})
			if got := molt.ErrorCode(err); got != molt.EUNAVAILABLE {
				t.Fatalf("Commit: code %q (%v), want %q", got, err, molt.EUNAVAILABLE)
			}
		})
	}
}
