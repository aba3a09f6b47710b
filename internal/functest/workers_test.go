//go:build linux

package functest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// batchResponse decodes a worker's answer strictly: exactly
// {"batchItemFailures":[{"itemIdentifier":…},…]}, as the event source mapping
// reads it.
func batchResponse(tb testing.TB, payload []byte) []string {
	tb.Helper()
	var resp struct {
		BatchItemFailures *[]struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil || resp.BatchItemFailures == nil {
		tb.Fatalf("not a partial batch response (%v): %s", err, payload)
	}
	ids := []string{}
	for _, f := range *resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// TestWorkerFunctions invokes each worker's bootstrap with its sample,
// events/<kind>-worker-wake.json: a wake-up for an item that does not exist and
// a record whose body is not a wake-up. The answer reports exactly the malformed
// record (so SQS retries it and, after five receives, dead-letters it); the
// unknown item is nothing to do: it is read once, nothing is written and nothing
// is woken.
func TestWorkerFunctions(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	for _, kind := range app.Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn := kind + "-worker"
			var ev events.SQSEvent
			payload := readEvent(t, fn+"-wake.json", &ev)
			want := []string{}
			var unknown []queue.Message
			for _, r := range ev.Records {
				if m, err := queue.Parse(r.Body); err != nil {
					want = append(want, r.MessageId)
				} else {
					unknown = append(unknown, m)
				}
			}
			if len(want) == 0 || len(unknown) == 0 {
				t.Fatalf("events/%s-wake.json needs a wake-up and a malformed record; has %d and %d", fn, len(unknown), len(want))
			}
			e, rec := d.function(t, fn)
			got := batchResponse(t, e.invoke(t, payload))
			if !slices.Equal(got, want) {
				t.Errorf("batchItemFailures = %v, want exactly the malformed record %v", got, want)
			}
			for _, m := range unknown {
				if m.Kind != kind {
					t.Errorf("the sample wakes a %s, not a %s", m.Kind, kind)
				}
				_, err := d.store.GetItem(context.Background(), work.Kind(m.Kind), m.ID)
				if molt.ErrorCode(err) != molt.ENOTFOUND {
					t.Errorf("%s %s after the wake-up: %v; want not found (nothing created)", m.Kind, m.ID, err)
				}
			}
			if got, want := rec.actions(), []string{"dynamodb:GetItem"}; !slices.Equal(got, want) {
				t.Errorf("calls to AWS: %v; want %v only (read the item, find nothing, do nothing)", got, want)
			}
		})
	}
}

// TestPipeline runs molt's work through all five bootstraps, each under the
// emulator, the way AWS wires them: the API's writes send wake-ups to the real
// queues; the messages received from them become each worker's SQS event (with a
// malformed record added, reported alone), and the handled ones are deleted as
// the event source mapping would. At L2 with the offline model: a chat turn is
// answered; /evo queues a run that is approved automatically; its apply is
// applied; the tick sends the auto apply's notice; the API rolls it back and
// deletes the run with its artifacts. Every AWS call each function makes is
// checked against its policy in template.yaml (deployment.function).
func TestPipeline(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	api, _ := d.function(t, "api")
	workers := map[string]*emulator{}
	for _, kind := range app.Kinds() {
		workers[kind], _ = d.function(t, kind+"-worker")
	}
	ticker, _ := d.function(t, "ticker")
	call := func(want int, method, path, body string) map[string]any {
		t.Helper()
		return d.api(t, api, want, method, path, body)
	}

	call(http.StatusOK, "PUT", "/api/settings", `{"evolution":{"level":"L2"}}`)
	call(http.StatusCreated, "PUT", "/api/workspaces/acme", `{}`)
	sid := call(http.StatusCreated, "POST", "/api/workspaces/acme/sessions", `{}`)["id"].(string)

	// A chat turn, answered by the turn worker.
	turn := call(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", `{"text":"hello"}`)["turn"].(map[string]any)
	d.work(t, workers["turn"], "turn", turn["id"].(string))
	msgs := call(http.StatusOK, "GET", "/api/sessions/"+sid+"/messages", "")["items"].([]any)
	if roles := messageRoles(msgs); !slices.Equal(roles, []string{"user", "assistant"}) {
		t.Fatalf("session messages after the turn: %v; want the user's and the reply", msgs)
	}

	// /evo: the run is approved automatically at L2, which queues its apply.
	run := call(http.StatusAccepted, "POST", "/api/sessions/"+sid+"/messages", `{"text":"/evo always answer in French"}`)["run"].(map[string]any)
	runID := run["id"].(string)
	d.work(t, workers["run"], "run", runID)
	det := call(http.StatusOK, "GET", "/api/evolution/runs/"+runID, "")
	aps, _ := det["applies"].([]any)
	if det["status"] != "approved" || det["approved_by"] != "auto" || len(aps) != 1 {
		t.Fatalf("run after the run worker: %v; want approved automatically with one apply", det)
	}
	applyID := aps[0].(map[string]any)["id"].(string)

	d.work(t, workers["apply"], "apply", applyID)
	ap := call(http.StatusOK, "GET", "/api/evolution/applies/"+applyID, "")
	if ap["status"] != "applied" {
		t.Fatalf("apply after the apply worker: %v; want applied", ap)
	}
	if det := call(http.StatusOK, "GET", "/api/evolution/runs/"+runID, ""); det["status"] != "applied" {
		t.Fatalf("run after its apply: %v; want applied", det["status"])
	}

	// The tick sends the auto apply's notice to the session, once.
	var counts app.TickResult
	if err := json.Unmarshal(ticker.invoke(t, readEvent(t, "ticker-scheduled.json", nil)), &counts); err != nil {
		t.Fatal(err)
	}
	if counts.Notified != 1 {
		t.Errorf("tick notified %d; want the one auto apply", counts.Notified)
	}
	msgs = call(http.StatusOK, "GET", "/api/sessions/"+sid+"/messages", "")["items"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "system" || !strings.Contains(fmt.Sprint(last["text"]), applyID) {
		t.Errorf("last message %v; want the notice of apply %s", last, applyID)
	}

	// Rollback, then delete the run with its apply and artifacts.
	rb := call(http.StatusOK, "POST", "/api/evolution/applies/"+applyID+"/rollback", `{}`)
	if rb["ok"] != true {
		t.Errorf("rollback answered %v", rb)
	}
	if det := call(http.StatusOK, "GET", "/api/evolution/runs/"+runID, ""); det["status"] != "rolled_back" {
		t.Fatalf("run after rollback: %v; want rolled_back", det["status"])
	}
	call(http.StatusNoContent, "DELETE", "/api/evolution/runs/"+runID, "")
	call(http.StatusNotFound, "GET", "/api/evolution/applies/"+applyID, "")
}

// messageRoles lists the roles of a message listing.
func messageRoles(items []any) []string {
	var out []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, fmt.Sprint(m["role"]))
	}
	return out
}

// api invokes the API function with a request made from
// events/api-workspaces-authorized.json (its token, its context) and returns the
// decoded JSON body, failing unless the status is want.
func (d *deployment) api(tb testing.TB, e *emulator, want int, method, path, body string) map[string]any {
	tb.Helper()
	var req events.APIGatewayV2HTTPRequest
	readEvent(tb, "api-workspaces-authorized.json", &req)
	path, query, _ := strings.Cut(path, "?")
	req.RawPath, req.RequestContext.HTTP.Path, req.RequestContext.HTTP.Method = path, path, method
	req.RawQueryString = query
	if query != "" {
		req.QueryStringParameters = map[string]string{}
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			req.QueryStringParameters[k] = v
		}
	}
	req.Body = body
	req.Headers["content-length"] = fmt.Sprint(len(body))
	if body != "" {
		req.Headers["content-type"] = "application/json"
	}
	payload, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	r, out := httpResponse(tb, e.invoke(tb, payload))
	if r.StatusCode != want {
		tb.Fatalf("%s %s: status %d, want %d: %s", method, path, r.StatusCode, want, out)
	}
	var v map[string]any
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &v); err != nil {
			tb.Fatalf("%s %s: %v: %s", method, path, err, out)
		}
	}
	return v
}

// work receives kind's queue until the wake-up of id arrives, invokes the worker
// with what was received plus a malformed record, expects only that record
// reported, and deletes the handled messages, as the event source mapping does.
func (d *deployment) work(tb testing.TB, e *emulator, kind, id string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := d.queues[kind]
	var recs []events.SQSMessage
	found := false
	for !found {
		out, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			tb.Fatalf("no %s wake-up for %s: %v", kind, id, err)
		}
		for _, m := range out.Messages {
			recs = append(recs, events.SQSMessage{MessageId: aws.ToString(m.MessageId),
				ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
				Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes,
				MessageAttributes: map[string]events.SQSMessageAttribute{}, EventSource: "aws:sqs",
				EventSourceARN: d.queueARNs[kind], AWSRegion: "us-east-1"})
			if msg, err := queue.Parse(aws.ToString(m.Body)); err == nil && msg.Kind == kind && msg.ID == id {
				found = true
			}
		}
	}
	bad := events.SQSMessage{MessageId: "functest-malformed-" + kind, ReceiptHandle: "none", Body: "wake up " + id,
		EventSource: "aws:sqs", EventSourceARN: d.queueARNs[kind], AWSRegion: "us-east-1"}
	payload, err := json.Marshal(events.SQSEvent{Records: append(recs, bad)})
	if err != nil {
		tb.Fatal(err)
	}
	failed := batchResponse(tb, e.invoke(tb, payload))
	if !slices.Equal(failed, []string{bad.MessageId}) {
		tb.Fatalf("%s worker reported %v as failed; want only %s", kind, failed, bad.MessageId)
	}
	for _, r := range recs {
		if _, err := d.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(r.ReceiptHandle)}); err != nil {
			tb.Fatalf("delete handled message: %v", err)
		}
	}
}
