package sqsqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/queuetest"
	"github.com/molt-dev/molt/internal/sqsqueue"
)

func client(t *testing.T) *sqs.Client {
	t.Helper()
	return sqs.NewFromConfig(awstest.Config(t))
}

// ensure creates a queue pair and deletes it when the test ends.
func ensure(t *testing.T, c *sqs.Client, name string, vis time.Duration) (url, dlq string) {
	t.Helper()
	url, dlq, err := sqsqueue.Ensure(t.Context(), c, name, vis)
	if err != nil {
		t.Fatalf("ensure %s: %v", name, err)
	}
	t.Cleanup(func() {
		for _, u := range []string{url, dlq} {
			_, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	return url, dlq
}

func TestConformance(t *testing.T) {
	c := client(t)
	queuetest.Run(t, func(t *testing.T, kinds []string) queuetest.Queues {
		urls := map[string]string{}
		for _, k := range kinds {
			urls[k], _ = ensure(t, c, awstest.Name("molt-"+k), 30*time.Second)
		}
		return queuetest.Queues{
			Sender:   sqsqueue.New(c, urls),
			Receiver: func(kind string) queue.Receiver { return sqsqueue.NewReceiver(c, urls[kind]) },
		}
	})
}

func TestEnsureIsIdempotent(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := t.Context()
	name := awstest.Name("molt-ensure")
	url, dlq := ensure(t, c, name, 30*time.Second)
	if !strings.HasSuffix(url, "/"+name) || !strings.HasSuffix(dlq, "/"+name+"-dlq") {
		t.Errorf("urls %s, %s do not name %s and %s-dlq", url, dlq, name, name)
	}
	// Again, with another visibility timeout: same queues, converged attributes.
	url2, dlq2, err := sqsqueue.Ensure(ctx, c, name, 90*time.Second)
	if err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	if url2 != url || dlq2 != dlq {
		t.Errorf("second ensure returned %s, %s; want %s, %s", url2, dlq2, url, dlq)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := attrs.Attributes["VisibilityTimeout"]; got != "90" {
		t.Errorf("visibility timeout %s, want 90", got)
	}
	dlqAttrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(dlq),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	rp := attrs.Attributes["RedrivePolicy"]
	if !strings.Contains(rp, dlqAttrs.Attributes["QueueArn"]) || !strings.Contains(rp, `"maxReceiveCount":"5"`) {
		t.Errorf("redrive policy %s, want the dead-letter queue %s after 5 receives", rp, dlqAttrs.Attributes["QueueArn"])
	}
}

// TestPoisonReachesDeadLetterQueue follows a message that always fails through
// five receives into the dead-letter queue Ensure set up.
func TestPoisonReachesDeadLetterQueue(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := t.Context()
	url, dlq := ensure(t, c, awstest.Name("molt-redrive"), 30*time.Second)
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("not a wake-up")}); err != nil {
		t.Fatal(err)
	}
	r := sqsqueue.NewReceiver(c, url)
	for i := 1; i <= sqsqueue.MaxReceiveCount; i++ {
		ds, err := r.Receive(ctx, 1, 5*time.Second)
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive %d: %v, %d messages", i, err, len(ds))
		}
		d := ds[0]
		if d.Body != "not a wake-up" || d.Message != (queue.Message{}) {
			t.Errorf("receive %d: body %q message %+v, want the raw body and no message", i, d.Body, d.Message)
		}
		if d.ReceiveCount != i {
			t.Errorf("receive %d: receive count %d", i, d.ReceiveCount)
		}
		if err := r.Release(ctx, d, 0); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if ds, err := r.Receive(ctx, 1, time.Second); err != nil || len(ds) != 0 {
		t.Fatalf("sixth receive: %v, %d messages; want the message moved to the dead-letter queue", err, len(ds))
	}
	ds, err := sqsqueue.NewReceiver(c, dlq).Receive(ctx, 1, 5*time.Second)
	if err != nil || len(ds) != 1 || ds[0].Body != "not a wake-up" {
		t.Fatalf("dead-letter queue: %v, %+v", err, ds)
	}
}

func TestSendFailureIsUnavailable(t *testing.T) {
	t.Parallel()
	c := client(t)
	s := sqsqueue.New(c, map[string]string{"run": "http://127.0.0.1:1/000000000000/missing"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := s.Send(ctx, queue.Message{Kind: "run", ID: "r1"})
	if molt.ErrorCode(err) != molt.EUNAVAILABLE {
		t.Errorf("send to a missing queue: %v, want %s", err, molt.EUNAVAILABLE)
	}
}
