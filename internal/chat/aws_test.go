package chat_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/sqsqueue"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// newAWSHarness is a harness on the AWS adapters: a fresh DynamoDB table and SQS
// turns queue on the emulator. drain receives from SQS and runs the records
// through the turn-worker Lambda handler (App.WorkerLambda), deleting those it
// does not report as failed, as the event source mapping does.
func newAWSHarness(t *testing.T, cfg chat.Config) *harness {
	t.Helper()
	awsCfg := awstest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := awstest.Name("molt-chat")
	if err := dynamo.CreateTable(ctx, db, table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	sq := sqs.NewFromConfig(awsCfg)
	url, dlq, err := sqsqueue.Ensure(ctx, sq, table+"-turn", 30*time.Second)
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	t.Cleanup(func() {
		for _, u := range []string{url, dlq} {
			_, _ = sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	clock := molt.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	ids := &molt.SortableIDs{Clock: clock}
	cs := newCountingStore(dynamo.New(db, table, dynamo.Options{Clock: clock, IDs: ids}))
	cm := &ctlModel{inner: offline.New()}
	acfg := app.Config{Backend: app.BackendAWS, Table: table, Bucket: "unused", Queues: map[string]string{"turn": url}, Chat: cfg}
	blobs, err := dirblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(acfg, app.Deps{Store: cs, Blobs: blobs, Queue: sqsqueue.New(sq, acfg.Queues), Clock: clock, IDs: ids, Model: cm},
		slog.New(slog.NewJSONHandler(io.Discard, nil)))
	a.Chat.HandleReplied(nil) // the turn alone, as newHarness
	h := &harness{t: t, app: a, store: cs, clock: clock, model: cm, ctx: ctx}
	if _, _, err := cs.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatalf("put workspace: %v", err)
	}
	lambdaHandler, err := a.WorkerLambda(work.KindTurn)
	if err != nil {
		t.Fatal(err)
	}
	rcv := sqsqueue.NewReceiver(sq, url)
	h.drainer = func() []error {
		var errs []error
		for {
			ds, err := rcv.Receive(ctx, 10, 0)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			if len(ds) == 0 {
				return errs
			}
			var ev events.SQSEvent
			for _, d := range ds {
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: d.MessageID, Body: d.Body, ReceiptHandle: d.Receipt,
					Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(d.ReceiveCount)}})
			}
			resp, err := lambdaHandler(ctx, ev)
			if err != nil {
				t.Fatalf("lambda handler: %v", err)
			}
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
				errs = append(errs, fmt.Errorf("record %s failed", f.ItemIdentifier))
			}
			for _, d := range ds {
				if !failed[d.MessageID] {
					if err := rcv.Delete(ctx, d); err != nil {
						t.Fatalf("delete: %v", err)
					}
				}
			}
		}
	}
	return h
}

func TestTurnsOnAWSAdapters(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	kill := false
	h := newAWSHarness(t, chat.Config{BeforeFinish: func(tc chat.TurnContext) error {
		mu.Lock()
		defer mu.Unlock()
		if kill {
			kill = false
			return errors.New("killed")
		}
		return nil
	}})
	s := h.session()

	// A reply, with its tool-less transcript, through SQS and the Lambda handler.
	t1 := h.post(s.ID, "hello from the cloud")
	h.mustDrain()
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user assistant" || !strings.Contains(msgs[1].Text, `Last user message: "hello from the cloud"`) {
		t.Fatalf("log = %q %q", got, msgs[len(msgs)-1].Text)
	}
	if it, _ := h.turn(t1.ID); it.Status != chat.StatusDone {
		t.Fatalf("turn %s", it.Status)
	}

	// Duplicate wake-ups in one batch and across batches: one reply.
	t2 := h.post(s.ID, "twice")
	for range 2 {
		if err := h.app.Queue.Send(h.ctx, queue.Message{Kind: "turn", ID: t2.ID}); err != nil {
			t.Fatal(err)
		}
	}
	h.mustDrain()
	if got := roles(h.messages(s.ID)); got != "user assistant user assistant" {
		t.Fatalf("log after duplicates = %q", got)
	}

	// Two messages while nothing runs, then a killed worker recovered by the tick:
	// order kept, one reply each.
	mu.Lock()
	kill = true
	mu.Unlock()
	t3 := h.post(s.ID, "third")
	t4 := h.post(s.ID, "fourth")
	if errs := h.drain(); len(errs) != 1 {
		t.Fatalf("errors = %v, want the killed record", errs)
	}
	h.mustDrain() // the killed record is visible again after SQS's visibility timeout only; nothing else is left
	if it, _ := h.turn(t3.ID); it.Status != work.StatusRunning {
		t.Fatalf("killed turn is %s", it.Status)
	}
	if it, _ := h.turn(t4.ID); it.Status != work.StatusPending {
		t.Fatalf("the turn behind it is %s", it.Status)
	}
	h.clock.Advance(h.app.Chat.Config().Timeout + time.Second)
	if res := h.tick(); res.Requeued != 1 {
		t.Fatalf("tick = %+v", res)
	}
	h.mustDrain()
	msgs = h.messages(s.ID)
	var order []string
	for _, m := range msgs {
		order = append(order, m.Role+":"+m.TurnID)
	}
	want := []string{"user:" + t1.ID, "assistant:" + t1.ID, "user:" + t2.ID, "assistant:" + t2.ID,
		"user:" + t3.ID, "user:" + t4.ID, "assistant:" + t3.ID, "assistant:" + t4.ID}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("log = %v\nwant %v", order, want)
	}
	if n := h.store.summaries; n != 0 {
		t.Fatalf("summaries = %d", n)
	}
}

func TestCompactionOnAWSAdapters(t *testing.T) {
	t.Parallel()
	h := newAWSHarness(t, chat.Config{CompactTokens: 250, KeepTail: 2})
	if _, err := h.store.PutFile(h.ctx, workspace.NewFile("acme", "agents/main/agent.yaml", []byte("tools: [echo]\n"), h.clock.Now())); err != nil {
		t.Fatal(err)
	}
	if err := h.app.Chat.Tools().Register(echoTool("echo")); err != nil {
		t.Fatal(err)
	}
	s := h.session()
	var turns []string
	for i := range 5 {
		// Tool turns append three messages and may compact: several session ops in one transaction.
		turns = append(turns, h.post(s.ID, fmt.Sprintf("/tool echo {\"n\": %d}", i)).ID)
		h.mustDrain()
	}
	compacted := h.compactedTurns(turns)
	if len(compacted) == 0 || h.store.summaries != len(compacted) {
		t.Fatalf("compacting turns %d, summaries committed %d", len(compacted), h.store.summaries)
	}
	if got := roles(h.messages(s.ID)); got != strings.TrimSpace(strings.Repeat("user assistant tool assistant ", 5)) {
		t.Fatalf("log = %q", got)
	}
	sess, err := h.store.GetSession(h.ctx, s.ID)
	if err != nil || sess.SummarySeq == 0 || !strings.HasPrefix(sess.Summary, offline.Label) {
		t.Fatalf("session %+v %v", sess, err)
	}
}
