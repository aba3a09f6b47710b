package awsbackend_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/workspace"
)

// TestBootstrapThenServe: `molt bootstrap` creates the table, bucket and queues on
// the emulator, twice without error, and an App built on them works end to end:
// a workspace file is stored in DynamoDB, an artifact in S3, and a wake-up goes
// through SQS to a receiver.
func TestBootstrapThenServe(t *testing.T) {
	awstest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := app.Config{Backend: app.BackendAWS, Table: awstest.Name("molt"), Bucket: awstest.Name("molt-art"), Queues: map[string]string{}}
	var out bytes.Buffer
	kinds := app.Kinds()
	if len(kinds) == 0 {
		t.Fatal("no kinds of work registered")
	}
	for i := 0; i < 2; i++ {
		out.Reset()
		if err := awsbackend.Bootstrap(ctx, cfg, kinds, &out); err != nil {
			t.Fatalf("bootstrap %d: %v\n%s", i+1, err, out.String())
		}
	}
	// The printed environment names a queue per kind.
	for _, line := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(k, app.EnvQueuePrefix) {
			cfg.Queues[strings.ToLower(strings.TrimPrefix(k, app.EnvQueuePrefix))] = v
		}
	}
	for _, k := range kinds {
		if cfg.Queues[k] == "" {
			t.Fatalf("no queue printed for %s:\n%s", k, out.String())
		}
	}
	a, err := awsbackend.NewApp(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, _, err := a.Store.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatalf("put workspace: %v", err)
	}
	if _, err := a.Store.PutFile(ctx, workspace.File{Workspace: "acme", Path: "INSTRUCTIONS.md", Content: []byte("hi")}); err != nil {
		t.Fatalf("put file: %v", err)
	}
	if f, err := a.Store.GetFile(ctx, "acme", "INSTRUCTIONS.md"); err != nil || string(f.Content) != "hi" {
		t.Fatalf("get file = %q %v", f.Content, err)
	}
	if err := a.Blobs.Put(ctx, "runs/x/meta.json", []byte(`{}`)); err != nil {
		t.Fatalf("put blob: %v", err)
	}
	if b, err := a.Blobs.Get(ctx, "runs/x/meta.json"); err != nil || string(b) != `{}` {
		t.Fatalf("get blob = %q %v", b, err)
	}
	kind := kinds[0]
	if err := a.Queue.Send(ctx, queue.Message{Kind: kind, ID: "w1"}); err != nil {
		t.Fatalf("send: %v", err)
	}
	rcv, err := a.Receiver(kind)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := rcv.Receive(ctx, 1, time.Second)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(ds) == 1 {
			if ds[0].Message.ID != "w1" || ds[0].Message.Kind != kind {
				t.Fatalf("received %+v", ds[0].Message)
			}
			return
		}
	}
	t.Fatal("the wake-up never arrived")
}
