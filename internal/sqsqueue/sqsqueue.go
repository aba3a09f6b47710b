// Package sqsqueue is the SQS adapter of the queue port: a Sender that routes each
// wake-up to its kind's queue, a long-polling Receiver, and Ensure, which creates
// a queue and its dead-letter queue for `molt bootstrap` (LocalStack, the Go
// emulator; on AWS the SAM template owns the queues).
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
)

// API is the part of the SQS client the Sender and Receiver use (*sqs.Client
// implements it). A function that only sends needs sqs:SendMessage only.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var (
	_ API            = (*sqs.Client)(nil)
	_ EnsureAPI      = (*sqs.Client)(nil)
	_ queue.Sender   = (*Sender)(nil)
	_ queue.Receiver = (*Receiver)(nil)
)

// MaxWait is the longest long-poll wait SQS allows.
const MaxWait = 20 * time.Second

// Sender sends wake-ups to the queue of each message's kind.
type Sender struct {
	api  API
	urls map[string]string
}

// New returns a Sender routing kind → queue URL. urls is copied.
func New(api API, urls map[string]string) *Sender {
	s := &Sender{api: api, urls: make(map[string]string, len(urls))}
	for k, u := range urls {
		s.urls[k] = u
	}
	return s
}

// attributesAPI is what Ping needs besides API; *sqs.Client has it.
type attributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Ping reads one attribute of every queue the Sender routes to (the deep health
// check; it needs sqs:GetQueueAttributes). EUNAVAILABLE when one does not answer;
// nil when the client cannot read attributes (nothing to check with).
func (s *Sender) Ping(ctx context.Context) error {
	api, ok := s.api.(attributesAPI)
	if !ok {
		return nil
	}
	for kind, url := range s.urls {
		_, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			return molt.Unavailable(err, "queue of %s", kind)
		}
	}
	return nil
}

// Send sends m to its kind's queue. It returns EINVALID for a message without kind
// or id, queue.ErrNoRoute for a kind without a queue, and EUNAVAILABLE when SQS
// fails (sending again is harmless: wake-ups are idempotent).
func (s *Sender) Send(ctx context.Context, m queue.Message) error {
	body := m.Encode()
	if _, err := queue.Parse(body); err != nil {
		return fmt.Errorf("send %s %s wake-up: %w", m.Kind, m.ID, err)
	}
	url, ok := s.urls[m.Kind]
	if !ok {
		return fmt.Errorf("send %s %s wake-up: %w", m.Kind, m.ID, queue.ErrNoRoute(m.Kind))
	}
	_, err := s.api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
	if err != nil {
		return molt.Unavailable(err, "send %s %s wake-up", m.Kind, m.ID)
	}
	return nil
}

// Receiver receives from one queue.
type Receiver struct {
	api API
	url string
}

// NewReceiver returns a Receiver for the queue at url.
func NewReceiver(api API, url string) *Receiver { return &Receiver{api: api, url: url} }

// Receive long-polls for up to n (1–10) messages, waiting up to wait (rounded
// up to whole seconds, at most MaxWait). A body that does not parse is returned
// with a zero Message and its raw Body, for the caller to drop or dead-letter.
// ReceiveCount comes from ApproximateReceiveCount. When ctx ends during the wait
// the error wraps ctx's error.
func (r *Receiver) Receive(ctx context.Context, n int, wait time.Duration) ([]queue.Delivery, error) {
	out, err := r.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(r.url),
		MaxNumberOfMessages:         int32(min(max(n, 1), 10)),
		WaitTimeSeconds:             seconds(min(wait, MaxWait)),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("receive from %s: %w", r.url, ctx.Err())
		}
		return nil, molt.Unavailable(err, "receive from %s", r.url)
	}
	ds := make([]queue.Delivery, 0, len(out.Messages))
	for _, m := range out.Messages {
		d := queue.Delivery{
			Body:      aws.ToString(m.Body),
			MessageID: aws.ToString(m.MessageId),
			Receipt:   aws.ToString(m.ReceiptHandle),
		}
		d.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		if msg, err := queue.Parse(d.Body); err == nil {
			d.Message = msg
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// Delete deletes a received message.
func (r *Receiver) Delete(ctx context.Context, d queue.Delivery) error {
	_, err := r.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.url), ReceiptHandle: aws.String(d.Receipt)})
	if err != nil {
		return molt.Unavailable(err, "delete message %s", d.MessageID)
	}
	return nil
}

// Release makes a received message visible again after delay (rounded up to whole
// seconds, at most 12 hours) with ChangeMessageVisibility.
func (r *Receiver) Release(ctx context.Context, d queue.Delivery, delay time.Duration) error {
	_, err := r.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(r.url),
		ReceiptHandle:     aws.String(d.Receipt),
		VisibilityTimeout: seconds(min(delay, 12*time.Hour)),
	})
	if err != nil {
		return molt.Unavailable(err, "release message %s", d.MessageID)
	}
	return nil
}

// seconds rounds d up to whole seconds, never below zero.
func seconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(math.Ceil(d.Seconds()))
}

// EnsureAPI is the part of the SQS client Ensure uses (*sqs.Client implements it).
type EnsureAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

// MaxReceiveCount is the redrive policy's bound: a message received more often
// than this moves to the dead-letter queue.
const MaxReceiveCount = 5

// dlqRetention keeps dead letters for the longest period SQS allows (14 days), so
// operators have time to look at them.
const dlqRetention = 14 * 24 * time.Hour

// Ensure creates (or updates) the queue name and its dead-letter queue
// "<name>-dlq", with the given visibility timeout and a redrive policy of
// MaxReceiveCount receives. It is idempotent: running it again converges the
// attributes of existing queues and returns the same URLs.
func Ensure(ctx context.Context, api EnsureAPI, name string, visibilityTimeout time.Duration) (url, dlqURL string, err error) {
	dlqURL, err = ensureQueue(ctx, api, name+"-dlq", map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int(dlqRetention.Seconds())),
	})
	if err != nil {
		return "", "", err
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("ensure queue %s: read dead-letter queue arn: %w", name, err)
	}
	arn := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", "", fmt.Errorf("ensure queue %s: dead-letter queue %s has no arn", name, dlqURL)
	}
	url, err = ensureQueue(ctx, api, name, map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(seconds(visibilityTimeout))),
		string(types.QueueAttributeNameRedrivePolicy):     RedrivePolicy(arn, MaxReceiveCount),
	})
	if err != nil {
		return "", "", err
	}
	return url, dlqURL, nil
}

// RedrivePolicy returns the RedrivePolicy attribute sending messages to the queue
// with ARN dlqARN after maxReceiveCount receives.
func RedrivePolicy(dlqARN string, maxReceiveCount int) string {
	return fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, dlqARN, maxReceiveCount)
}

// ensureQueue looks the queue up, creates it when missing, and sets attrs either
// way (CreateQueue refuses an existing queue whose attributes differ).
func ensureQueue(ctx context.Context, api EnsureAPI, name string, attrs map[string]string) (string, error) {
	url, err := queueURL(ctx, api, name)
	if err != nil {
		return "", err
	}
	if url == "" {
		out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err == nil {
			return aws.ToString(out.QueueUrl), nil
		}
		// Lost a race with another bootstrap: fall through to converge attributes.
		if url, _ = queueURL(ctx, api, name); url == "" {
			return "", fmt.Errorf("create queue %s: %w", name, err)
		}
	}
	if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs}); err != nil {
		return "", fmt.Errorf("set attributes of queue %s: %w", name, err)
	}
	return url, nil
}

// queueURL returns the URL of the queue name, or "" when it does not exist.
func queueURL(ctx context.Context, api EnsureAPI, name string) (string, error) {
	out, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		var missing *types.QueueDoesNotExist
		if errors.As(err, &missing) || errorCode(err) == "AWS.SimpleQueueService.NonExistentQueue" {
			return "", nil
		}
		return "", fmt.Errorf("look up queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
