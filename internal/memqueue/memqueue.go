// Package memqueue is the in-process queue adapter used by `molt serve` and unit
// tests: one queue per kind of work, with SQS-like visibility semantics.
//
// Messages live in memory only and are lost when the process stops. That is by
// design: a message is a wake-up, the store is the only source of truth, and the
// tick re-sends wake-ups for work that is still pending, so a lost message only
// delays work until the next tick.
//
// Run the handlers of a queue with internal/consumer, which deletes handled
// messages, releases failed ones with a backoff and drops poison messages.
package memqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/molt-dev/molt/internal/queue"
)

// DefaultVisibilityTimeout is how long a received message stays invisible when
// it is neither deleted nor released.
const DefaultVisibilityTimeout = 2 * time.Minute

var _ queue.Sender = (*Queues)(nil)
var _ queue.Receiver = (*Queue)(nil)

// Queues is a set of in-process queues, one per kind. It is safe for concurrent
// use.
type Queues struct {
	visibility time.Duration
	kinds      map[string]bool // nil: any kind
	seq        atomic.Uint64   // message ids and receipts

	mu     sync.Mutex
	queues map[string]*Queue
}

// Option configures Queues.
type Option func(*Queues)

// WithVisibilityTimeout sets how long a received message stays invisible before
// it is delivered again (default DefaultVisibilityTimeout). d must be positive.
func WithVisibilityTimeout(d time.Duration) Option {
	return func(q *Queues) {
		if d > 0 {
			q.visibility = d
		}
	}
}

// WithKinds restricts Send to the given kinds, like an SQS sender that has a queue
// URL for each of them: any other kind gets queue.ErrNoRoute. Without it, a queue
// is created on first use for any kind.
func WithKinds(kinds ...string) Option {
	return func(q *Queues) {
		q.kinds = make(map[string]bool, len(kinds))
		for _, k := range kinds {
			q.kinds[k] = true
		}
	}
}

// New returns an empty set of queues.
func New(opts ...Option) *Queues {
	q := &Queues{visibility: DefaultVisibilityTimeout, queues: map[string]*Queue{}}
	for _, o := range opts {
		o(q)
	}
	return q
}

// Send puts m on the queue of m.Kind. It returns EINVALID for a message without
// kind or id, and queue.ErrNoRoute for a kind outside WithKinds.
func (qs *Queues) Send(ctx context.Context, m queue.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("send %s %s wake-up: %w", m.Kind, m.ID, err)
	}
	body := m.Encode()
	if _, err := queue.Parse(body); err != nil {
		return fmt.Errorf("send %s %s wake-up: %w", m.Kind, m.ID, err)
	}
	if qs.kinds != nil && !qs.kinds[m.Kind] {
		return fmt.Errorf("send %s %s wake-up: %w", m.Kind, m.ID, queue.ErrNoRoute(m.Kind))
	}
	qs.queue(m.Kind).push(body)
	return nil
}

// Receiver returns the receiving end of kind's queue, creating the queue if
// needed.
func (qs *Queues) Receiver(kind string) queue.Receiver { return qs.queue(kind) }

// Queue returns kind's queue, creating it if needed.
func (qs *Queues) Queue(kind string) *Queue { return qs.queue(kind) }

func (qs *Queues) queue(kind string) *Queue {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q, ok := qs.queues[kind]
	if !ok {
		q = &Queue{
			kind:       kind,
			visibility: qs.visibility,
			seq:        &qs.seq,
			changed:    make(chan struct{}),
			receipts:   map[string]*message{},
		}
		qs.queues[kind] = q
	}
	return q
}

// Queue is one kind's queue. A received message is invisible to other receives
// until it is deleted, released, or its visibility timeout passes.
type Queue struct {
	kind       string
	visibility time.Duration
	seq        *atomic.Uint64

	mu       sync.Mutex
	msgs     []*message          // in send order
	receipts map[string]*message // current receipt → message
	changed  chan struct{}       // closed (and replaced) when a message may have become visible
}

type message struct {
	id        string
	body      string
	visibleAt time.Time
	receipt   string
	count     int
}

func (q *Queue) push(body string) {
	m := &message{id: q.kind + "-" + strconv.FormatUint(q.seq.Add(1), 10), body: body}
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.broadcastLocked()
	q.mu.Unlock()
}

func (q *Queue) broadcastLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Len returns the number of messages in the queue, visible or not.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// Receive returns up to n visible messages (at least one), waiting up to wait
// for one to arrive or become visible. It returns an empty slice when wait passes
// with nothing to deliver, and ctx's error when ctx ends first.
func (q *Queue) Receive(ctx context.Context, n int, wait time.Duration) ([]queue.Delivery, error) {
	n = max(n, 1)
	deadline := time.Now().Add(wait)
	for {
		out, next, changed := q.take(n)
		if len(out) > 0 {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("receive from %s queue: %w", q.kind, err)
		}
		d := time.Until(deadline)
		if d <= 0 {
			return []queue.Delivery{}, nil
		}
		if !next.IsZero() {
			d = min(d, time.Until(next))
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// take delivers up to n visible messages. When there are none it returns the
// time the next invisible message becomes visible (zero if none) and the channel
// that is closed on the next change.
func (q *Queue) take(n int) ([]queue.Delivery, time.Time, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var out []queue.Delivery
	var next time.Time
	for _, m := range q.msgs {
		if len(out) == n {
			break
		}
		if m.visibleAt.After(now) {
			if next.IsZero() || m.visibleAt.Before(next) {
				next = m.visibleAt
			}
			continue
		}
		if m.receipt != "" {
			delete(q.receipts, m.receipt)
		}
		m.count++
		m.receipt = m.id + "#" + strconv.FormatUint(q.seq.Add(1), 10)
		m.visibleAt = now.Add(q.visibility)
		q.receipts[m.receipt] = m
		d := queue.Delivery{Body: m.body, MessageID: m.id, Receipt: m.receipt, ReceiveCount: m.count}
		if msg, err := queue.Parse(m.body); err == nil {
			d.Message = msg
		}
		out = append(out, d)
	}
	return out, next, q.changed
}

// Delete removes a received message. A receipt from an earlier receive of a
// message that has been received again since, or of a message already deleted,
// is ignored: the current holder of the message decides its fate.
func (q *Queue) Delete(ctx context.Context, d queue.Delivery) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete message %s: %w", d.MessageID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.receipts[d.Receipt]
	if !ok {
		return nil
	}
	delete(q.receipts, d.Receipt)
	for i, x := range q.msgs {
		if x == m {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			break
		}
	}
	return nil
}

// Release makes a received message visible again after delay (zero: now). Like
// Delete, it ignores a receipt that is no longer current.
func (q *Queue) Release(ctx context.Context, d queue.Delivery, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("release message %s: %w", d.MessageID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.receipts[d.Receipt]
	if !ok {
		return nil
	}
	m.visibleAt = time.Now().Add(max(delay, 0))
	// Waiting receivers recompute when the next message becomes visible.
	q.broadcastLocked()
	return nil
}
