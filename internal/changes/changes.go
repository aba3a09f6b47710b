// Package changes is the change feed the web console polls: which work items
// (turns, naming jobs, runs, applies, rollbacks) changed since a cursor, read from
// the store by update time. A new message, a run's new status and an apply's
// progress are all a work item's write, so one feed over items serves every view,
// on `molt serve` and on Lambda alike.
//
// A poll when nothing changed costs one index query per kind that returns nothing
// (DynamoDB's gsi3, SQLite's items_by_updated). The cursor records, per kind,
// where the next poll starts: Lookback before the time of this poll, because an
// index read may lag a write by a moment and the writers' clocks may differ a
// little, so a change is never skipped. A change may therefore be sent in two
// consecutive polls; the client drops the ones it has seen (same kind, id and
// updated_at). When a kind's page was full, the next poll continues exactly
// after its last change instead, so a burst is paged through.
package changes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// Store is the port the feed reads.
type Store interface {
	// ItemsChangedAfter lists items of kind whose (updated_at, id) comes strictly
	// after (at, id), oldest change first, at most limit (1 to page.MaxLimit).
	// Items with a zero updated_at are never listed. On DynamoDB the read goes
	// through an index and may lag a write by a moment. EINVALID for a bad kind or
	// limit.
	ItemsChangedAfter(ctx context.Context, kind work.Kind, at time.Time, id string, limit int) ([]work.Item, error)
}

// Lookback is how far before a kind's cursor each poll reads again.
const Lookback = 2 * time.Second

// PageLimit is the most changes of one kind a poll returns.
const PageLimit = 100

// Kinds a full caller sees; workspace and readonly callers see only KindsScoped,
// of their own workspace.
var (
	Kinds       = []work.Kind{work.KindTurn, work.KindNaming, work.KindRun, work.KindApply, evolution.KindRollback}
	KindsScoped = []work.Kind{work.KindTurn, work.KindNaming}
)

// Event is one changed item as the feed shows it.
type Event struct {
	Kind      work.Kind   `json:"kind"`
	ID        string      `json:"id"`
	Workspace string      `json:"workspace,omitempty"`
	Status    work.Status `json:"status"`
	SessionID string      `json:"session_id,omitempty"` // turns and naming jobs
	UpdatedAt time.Time   `json:"updated_at"`
}

// Feed is one poll's answer: the changes and the cursor of the next poll.
type Feed struct {
	Events []Event `json:"events"`
	Cursor string  `json:"cursor"`
}

// Service answers polls.
type Service struct {
	Store Store
	Clock molt.Clock // for the first poll's starting point
}

// position is a kind's place in the feed: the next poll reads the changes
// strictly after (At, ID).
type position struct {
	At int64  `json:"t"`
	ID string `json:"i,omitempty"`
}

// Poll returns the changes visible to c after cursor ("" starts Lookback ago).
// EINVALID for a cursor this package did not make.
func (s *Service) Poll(ctx context.Context, c auth.Caller, cursor string) (Feed, error) {
	pos, err := decode(cursor)
	if err != nil {
		return Feed{}, err
	}
	kinds := Kinds
	if !c.IsFull() {
		kinds = KindsScoped
	}
	// Every change older than settled is in the index by now: the next poll
	// need not read it again.
	settled := s.Clock.Now().Add(-Lookback).UnixNano()
	out := Feed{Events: []Event{}}
	next := map[work.Kind]position{}
	for _, k := range kinds {
		p, ok := pos[k]
		if !ok {
			p = position{At: settled}
		}
		items, err := s.Store.ItemsChangedAfter(ctx, k, time.Unix(0, p.At), p.ID, PageLimit)
		if err != nil {
			return Feed{}, err
		}
		for _, it := range items {
			if !c.IsFull() && !c.CanRead(it.Workspace) {
				continue
			}
			out.Events = append(out.Events, event(it))
		}
		switch {
		case len(items) == PageLimit:
			// A burst: continue exactly after the last change read.
			last := items[len(items)-1]
			next[k] = position{At: last.UpdatedAt.UnixNano(), ID: last.ID}
		case settled > p.At:
			next[k] = position{At: settled}
		default:
			next[k] = p
		}
	}
	out.Cursor = encode(next)
	return out, nil
}

func event(it work.Item) Event {
	ev := Event{Kind: it.Kind, ID: it.ID, Workspace: it.Workspace, Status: it.Status, UpdatedAt: it.UpdatedAt}
	if it.Kind == work.KindTurn || it.Kind == work.KindNaming {
		var d struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(it.Data, &d) == nil {
			ev.SessionID = d.SessionID
		}
	}
	return ev
}

func encode(p map[work.Kind]position) string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decode(cursor string) (map[work.Kind]position, error) {
	out := map[work.Kind]position{}
	if cursor == "" {
		return out, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) > 4096 || json.Unmarshal(b, &out) != nil {
		return nil, molt.Invalid("after", "after is not a cursor of this feed")
	}
	return out, nil
}
