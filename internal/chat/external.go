package chat

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// ReasonNotExternal refuses outside input (A2A) to a session that was not
// opened for it: such a session's runs would not record source access
// external.
const ReasonNotExternal = "not_external"

// PostExternal posts input that came from outside molt (an A2A message) to
// an external session (NewSession.External): the user message and its turn in
// one write, then the wake-up. Commands are not run: the text goes to the
// model as it is. It returns the pending turn.
//
// key, when not "", names the message (the caller derives it from the
// sender's message id, see TurnByKey): the same message sent again (a retry
// whose answer was lost) returns the turn it made the first time and posts
// nothing.
//
// Errors: those of Post, and EINVALID with ReasonNotExternal for a session
// not opened as external.
func (s *Service) PostExternal(ctx context.Context, c auth.Caller, sessionID, text, key string) (work.Item, error) {
	if err := checkUserText(text); err != nil {
		return work.Item{}, err
	}
	sess, err := s.session(ctx, c, sessionID, true)
	if err != nil {
		return work.Item{}, err
	}
	if !sess.External {
		return work.Item{}, &molt.Error{Code: molt.EINVALID, Field: "contextId", Reason: ReasonNotExternal,
			Message: fmt.Sprintf("session %s was not opened for outside input", sess.ID)}
	}
	return s.createTurn(ctx, sess, text, false, key)
}

// CancelTurn cancels a turn the caller may write to: a pending turn at once,
// a running one by ending its claim (Protocol.Cancel), which the attempt sees
// at its next heartbeat, or at once when it runs in this process; its final
// write then fails and nothing more is appended. The session's next turn is
// woken. It returns the turn as it now is.
//
// Errors: ENOTFOUND (no such turn, or not visible); EFORBIDDEN for a caller
// that may not write to the turn's session; ECONFLICT with ReasonTurnEnded
// when the turn has already ended (the item is returned alongside).
func (s *Service) CancelTurn(ctx context.Context, c auth.Caller, id string) (work.Item, error) {
	for try := 0; ; try++ {
		it, d, err := s.Turn(ctx, c, id)
		if err != nil {
			return work.Item{}, err
		}
		if _, err := s.session(ctx, c, d.SessionID, true); err != nil && molt.ErrorCode(err) != molt.ENOTFOUND {
			return work.Item{}, err
		}
		if it.Status != work.StatusPending && it.Status != work.StatusRunning {
			return it, &molt.Error{Code: molt.ECONFLICT, Reason: ReasonTurnEnded,
				Message: fmt.Sprintf("turn %s is %s", id, it.Status)}
		}
		out, err := s.proto.Cancel(ctx, it, StatusCanceled, "canceled by the client")
		if molt.ErrorReason(err) == work.ReasonChanged && try < 3 {
			continue // claimed or ended meanwhile: look again
		}
		if err != nil {
			return work.Item{}, fmt.Errorf("cancel turn %s: %w", id, err)
		}
		s.running.cancel(id)
		s.log.InfoContext(ctx, "turn canceled", slog.String("turn_id", id), slog.String("was", string(it.Status)))
		s.wakeNext(ctx, d.SessionID, d.UserSeq, nil, true)
		return out, nil
	}
}

// ReasonTurnEnded refuses to cancel a turn that has already ended.
const ReasonTurnEnded = "turn_ended"

// attempts tracks the turn attempts running in this process, so a cancel
// served by the same process stops the attempt at once instead of at its
// next heartbeat (on Lambda the heartbeat is what tells).
type attempts struct {
	mu   sync.Mutex
	byID map[string]context.CancelCauseFunc
}

func (r *attempts) track(ctx context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	if r.byID == nil {
		r.byID = map[string]context.CancelCauseFunc{}
	}
	r.byID[id] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.byID, id)
		r.mu.Unlock()
		cancel(nil)
	}
}

func (r *attempts) cancel(id string) {
	r.mu.Lock()
	fn := r.byID[id]
	r.mu.Unlock()
	if fn != nil {
		fn(work.ErrClaimLost)
	}
}
