// Package queue is the port for wake-ups. A message names a work item ("look at run
// X"); it never carries the work itself, and the store stays the only source of truth.
// Delivery is at least once: handling a message twice, late, or never (the tick
// re-sends) must be harmless.
package queue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// Message is a wake-up for one work item.
type Message struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// MaxBody is the largest message body accepted by Parse.
const MaxBody = 1024

// Encode returns the message's JSON body.
func (m Message) Encode() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// Parse decodes and validates a message body. It returns EINVALID for anything that
// is not exactly a {kind, id} object.
func Parse(body string) (Message, error) {
	if len(body) > MaxBody {
		return Message{}, molt.Invalid("body", "message body over %d bytes", MaxBody)
	}
	var m Message
	if err := molt.DecodeStrict([]byte(body), &m); err != nil {
		return Message{}, err
	}
	if m.Kind == "" || m.ID == "" {
		return Message{}, molt.Invalid("body", "message needs kind and id")
	}
	return m, nil
}

// Sender sends wake-ups. Implementations route each message to the queue of its kind.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Delivery is one received message.
type Delivery struct {
	Message      Message
	Body         string // raw body, kept when Message could not be parsed
	MessageID    string
	Receipt      string // handle to delete or release the message
	ReceiveCount int
}

// Receiver pulls messages from one queue (long polling on SQS, a channel in process).
// A received message is invisible to other receivers until it is deleted or its
// visibility timeout ends.
type Receiver interface {
	Receive(ctx context.Context, max int, wait time.Duration) ([]Delivery, error)
	Delete(ctx context.Context, d Delivery) error
	// Release makes the message visible again after delay (a failed handling).
	Release(ctx context.Context, d Delivery, delay time.Duration) error
}

// Handler handles one wake-up. A nil error deletes the message; an error leaves it
// for redelivery (and, after the queue's receive limit, the dead-letter queue).
type Handler interface {
	Handle(ctx context.Context, m Message) error
}

// BatchHandler is a Handler that can take several wake-ups at once (the
// executor of internal/work claims them in one store round trip), reporting on
// each through r as its handling goes (possibly from several goroutines at
// once, and in any order); HandleBatch returns after the last r.Done.
type BatchHandler interface {
	Handler
	HandleBatch(ctx context.Context, ms []Message, r Report)
}

// Report is how a BatchHandler reports on the messages of a batch.
type Report struct {
	// Done(i, err) is ms[i]'s result, what Handle would have returned for it:
	// once per message.
	Done func(i int, err error)
	// Ended(i), when set, says that ms[i]'s work is over and only its final
	// write is in flight (committed together with others ending then), so
	// the caller may give its place to another message: at most once, before
	// Done. A worker slot of River's frees the same way, before its job's
	// completion is committed.
	Ended func(i int)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m Message) error { return f(ctx, m) }

// ErrNoRoute is returned (wrapped) by a Sender for a kind it has no queue for.
func ErrNoRoute(kind string) error {
	return molt.Errorf(molt.EINTERNAL, "no queue for kind %q", kind)
}
