package sqsbatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/sqsbatch"
)

// sampleEvent reads events/testdata/sqs-event.json from the aws-lambda-go module
// this build uses.
func sampleEvent(t *testing.T) events.SQSEvent {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("go list aws-lambda-go: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("aws-lambda-go module dir not found (%v): %s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(mod.Dir, "events", "testdata", "sqs-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("decode sample: %v", err)
	}
	return ev
}

func record(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

func failures(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// logLines decodes the JSON log records.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestSampleEventIsReportedForTheDLQ(t *testing.T) {
	t.Parallel()
	ev := sampleEvent(t)
	if len(ev.Records) == 0 {
		t.Fatal("sample event has no records")
	}
	called := false
	var buf bytes.Buffer
	resp := sqsbatch.Handle(t.Context(), ev, queue.HandlerFunc(func(context.Context, queue.Message) error {
		called = true
		return nil
	}), obs.NewLogger(&buf))
	if called {
		t.Error("handler called for a body that is not a wake-up")
	}
	if got, want := failures(resp), []string{"MessageID_1"}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	lines := logLines(t, &buf)
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %s", len(lines), buf.String())
	}
	l := lines[0]
	if l["message_id"] != "MessageID_1" || l["body"] != "Message Body" || l["receive_count"] != float64(2) || l["level"] != "ERROR" {
		t.Errorf("log record %v lacks message_id, body, receive_count or level", l)
	}
}

func TestMixedBatch(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		record("m-ok", queue.Message{Kind: "run", ID: "r1"}.Encode()),
		record("m-err", queue.Message{Kind: "run", ID: "r2"}.Encode()),
		record("m-poison", long),
		record("m-extra", `{"kind":"run","id":"r3","extra":1}`),
		record("m-panic", queue.Message{Kind: "apply", ID: "a1"}.Encode()),
		record("m-ok2", queue.Message{Kind: "apply", ID: "a2"}.Encode()),
	}}
	var handled []string
	var buf bytes.Buffer
	log := obs.NewLogger(&buf)
	h := queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
		handled = append(handled, m.ID)
		log.InfoContext(ctx, "handling")
		switch m.ID {
		case "r2":
			return errors.New("store unavailable")
		case "a1":
			panic("bug")
		}
		return nil
	})
	resp := sqsbatch.Handle(t.Context(), ev, h, log)
	if got, want := failures(resp), []string{"m-err", "m-poison", "m-extra", "m-panic"}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	if got, want := handled, []string{"r1", "r2", "a1", "a2"}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	var sawHandling, sawPoison int
	for _, l := range logLines(t, &buf) {
		switch l["msg"] {
		case "handling":
			sawHandling++
			if l["message_id"] == nil || l["kind"] == nil || l["id"] == nil {
				t.Errorf("handler's log record lacks message_id, kind or id: %v", l)
			}
		default:
			if l["message_id"] == "m-poison" {
				sawPoison++
				body, _ := l["body"].(string)
				if n := len([]rune(strings.TrimSuffix(body, "…"))); n != 200 {
					t.Errorf("poison body logged with %d characters, want 200", n)
				}
			}
		}
	}
	if sawHandling != 4 || sawPoison != 1 {
		t.Errorf("saw %d handler records and %d poison records, want 4 and 1:\n%s", sawHandling, sawPoison, buf.String())
	}
}

func TestAllHandledReportsEmptyList(t *testing.T) {
	t.Parallel()
	ev := events.SQSEvent{Records: []events.SQSMessage{record("m1", queue.Message{Kind: "turn", ID: "t1"}.Encode())}}
	resp := sqsbatch.Handle(t.Context(), ev, queue.HandlerFunc(func(context.Context, queue.Message) error { return nil }), obs.NewLogger(&bytes.Buffer{}))
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"batchItemFailures":[]}`; got != want {
		t.Errorf("response %s, want %s", got, want)
	}
}

func TestEndedContextReportsRest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	ev := events.SQSEvent{Records: []events.SQSMessage{
		record("m1", queue.Message{Kind: "run", ID: "r1"}.Encode()),
		record("m2", queue.Message{Kind: "run", ID: "r2"}.Encode()),
		record("m3", queue.Message{Kind: "run", ID: "r3"}.Encode()),
	}}
	var handled []string
	h := queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
		handled = append(handled, m.ID)
		cancel() // the invocation's deadline passes during the first record
		return nil
	})
	resp := sqsbatch.Handler(h, obs.NewLogger(&bytes.Buffer{}))
	got, err := resp(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if ids, want := failures(got), []string{"m2", "m3"}; !slices.Equal(ids, want) {
		t.Errorf("failures %v, want %v", ids, want)
	}
	if !slices.Equal(handled, []string{"r1"}) {
		t.Errorf("handled %v, want [r1]", handled)
	}
}
