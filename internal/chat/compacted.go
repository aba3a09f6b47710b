package chat

import (
	"context"
	"log/slog"
	"time"

	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// CompactedTurn is what a compaction hook sees: a turn of a root session whose
// final write is about to commit a compaction (automatic or /compact).
type CompactedTurn struct {
	Turn    work.Item
	Session session.Session // as the final write sees it
	// Appended are the messages the final write appends (the reply), seqs set.
	Appended []session.Message
	Now      time.Time
}

// CompactedEffect is what a compaction hook adds to the turn's final write.
type CompactedEffect struct {
	Ops    []work.Op // committed in the same transaction as the turn's end
	Notice string    // a system line appended after the turn's messages; "" for none
	// After, when set, runs once after that write landed (e.g. a wake-up).
	After func(ctx context.Context)
}

// CompactedHook is called before the final write of every turn that compacted a
// root session (sub-sessions never call it), possibly more than once for one
// turn when its write races a new message: its effect must be the same each time
// (e.g. a work item whose id derives from the turn's). An error is logged and the
// turn commits without the effect: a reply is never held back by it.
type CompactedHook func(ctx context.Context, t CompactedTurn) (CompactedEffect, error)

// HandleCompacted registers the compaction hook (the evolution pre-compact
// trigger registers it). Register it before serving.
func (s *Service) HandleCompacted(fn CompactedHook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCompacted = fn
}

// compactedEffect runs the hook for a turn about to commit ops (built by finalOps)
// and returns ops with the hook's ops and notice added, and its After.
func (s *Service) compactedEffect(ctx context.Context, it work.Item, sess session.Session, ops []work.Op) ([]work.Op, func(context.Context)) {
	s.mu.RLock()
	fn := s.onCompacted
	s.mu.RUnlock()
	if fn == nil || sess.ID == "" || sess.Parent != "" {
		return ops, nil
	}
	var appended []session.Message
	for _, op := range ops {
		if a, ok := op.(session.AppendMessage); ok {
			appended = append(appended, a.Message)
		}
	}
	now := s.clock.Now().UTC()
	eff, err := fn(ctx, CompactedTurn{Turn: it, Session: sess, Appended: appended, Now: now})
	if err != nil {
		s.log.WarnContext(ctx, "compaction hook failed; the turn commits without it", slog.String("error", err.Error()))
		return ops, nil
	}
	ops = append(ops, eff.Ops...)
	if eff.Notice != "" {
		ops = append(ops, session.AppendMessage{Message: session.Message{SessionID: sess.ID,
			Seq: sess.NextSeq + len(appended), Role: session.RoleSystem, Text: storedText(eff.Notice),
			TurnID: it.ID, CreatedAt: now}})
	}
	return ops, eff.After
}

// RepliedHook is called once after a turn's final write committed its reply
// (status done, the session still there), with the session as that write saw
// it and the seq of the reply's last message. It runs after the write, so it
// never delays or endangers the reply; background naming registers it to ask
// for a naming job. It should not block for long: the turn's wake-up of the
// session's next turn waits for it.
type RepliedHook func(ctx context.Context, sess session.Session, replySeq int)

// HandleReplied registers the reply hook. Register it before serving.
func (s *Service) HandleReplied(fn RepliedHook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReplied = fn
}

func (s *Service) replied(ctx context.Context, sess session.Session, replySeq int) {
	s.mu.RLock()
	fn := s.onReplied
	s.mu.RUnlock()
	if fn != nil && sess.ID != "" && replySeq > 0 {
		fn(ctx, sess, replySeq)
	}
}
