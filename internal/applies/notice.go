package applies

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
)

// NoticeResult counts what one notice pass did.
type NoticeResult struct {
	Sent    int `json:"sent"`    // lines appended (and applies stamped)
	Stamped int `json:"stamped"` // applies stamped without a line (session gone)
	Dropped int `json:"dropped"` // notices of applies no longer applied
	Raced   int `json:"raced"`   // another pass (or a rollback) moved first
}

// Notify is the tick's notice step: for each pending notice (an auto apply that
// is applied and not yet notified, oldest first) it appends one system line to
// the source session and, in the same write, deletes the notice and stamps the
// apply's notified_at. The notice's delete is conditional on it still being
// there, the stamp on the apply being unchanged since it was read, and the
// line on the session's next sequence number: of two passes at once only one
// writes, and a pass that dies before its write leaves the notice for the next.
// A session that is gone gets no line; the apply is stamped all the same.
func (s *Service) Notify(ctx context.Context) (NoticeResult, error) {
	var res NoticeResult
	pg, err := s.store.ListItems(ctx, work.ListQuery{Kind: KindNotice, Status: work.StatusPending, Oldest: true,
		Page: page.Query{Limit: 100}})
	if err != nil {
		return res, fmt.Errorf("list notices: %w", err)
	}
	for _, n := range pg.Items {
		if err := s.notifyOne(ctx, n, &res); err != nil {
			return res, fmt.Errorf("notice %s: %w", n.ID, err)
		}
	}
	return res, nil
}

func (s *Service) notifyOne(ctx context.Context, n work.Item, res *NoticeResult) error {
	it, err := s.store.GetItem(ctx, work.KindApply, n.ID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return s.dropNotice(ctx, res, &res.Dropped, n)
	}
	if err != nil {
		return err
	}
	d, err := ParseData(it.Data)
	if err != nil || it.Status != StatusApplied || d.NotifiedAt != nil {
		// Rolled back before its notice, or stamped already: nothing to say.
		return s.dropNotice(ctx, res, &res.Dropped, n)
	}
	now := s.now()
	d.NotifiedAt = &now
	stamp := s.proto.UpdateSeenOp(it, work.Edit{Data: d.Encode()})
	// The source session is the run's. A run that is gone (or not a run's)
	// names no session; a run that could not be read is not gone: the notice
	// waits for the next pass rather than being stamped without its line.
	sessionID := ""
	r, err := s.store.GetItem(ctx, work.KindRun, firstOr(d.Runs))
	switch {
	case err == nil:
		if rd, err := runs.ParseData(r.Data); err == nil {
			sessionID = rd.SourceSession
		}
	case molt.ErrorCode(err) != molt.ENOTFOUND:
		return fmt.Errorf("read run %s: %w", firstOr(d.Runs), err)
	}
	for try := 0; try < 3; try++ {
		var sess session.Session
		var serr error = molt.NotFound("no source session")
		if sessionID != "" {
			sess, serr = s.store.GetSession(ctx, sessionID)
		}
		if molt.ErrorCode(serr) == molt.ENOTFOUND {
			return s.dropNotice(ctx, res, &res.Stamped, n, stamp)
		}
		if serr != nil {
			return serr
		}
		line := session.AppendMessage{Message: session.Message{SessionID: sess.ID, Seq: sess.NextSeq,
			Role: session.RoleSystem, Text: NoticeText(it.ID, d), CreatedAt: now}}
		err := s.proto.DeleteSeen(ctx, n, stamp, line)
		if _, ok := work.FailedOp(err).(session.AppendMessage); ok {
			continue // a message landed meanwhile: read the session again
		}
		return s.settleNotice(ctx, err, res, &res.Sent)
	}
	res.Raced++
	return nil
}

// dropNotice deletes the notice n as it was read, with also (the apply's
// stamp), and counts the outcome.
func (s *Service) dropNotice(ctx context.Context, res *NoticeResult, counter *int, n work.Item, also ...work.Op) error {
	return s.settleNotice(ctx, s.proto.DeleteSeen(ctx, n, also...), res, counter)
}

func (s *Service) settleNotice(ctx context.Context, err error, res *NoticeResult, counter *int) error {
	if err == nil {
		*counter++
		return nil
	}
	if code := molt.ErrorCode(err); code == molt.ECONFLICT || code == molt.ENOTFOUND {
		res.Raced++ // another pass sent it, or the apply changed: the next pass sees
		return nil
	}
	// Unknown outcome: the notice is still there unless the write landed; the
	// next pass reads it again.
	s.log.WarnContext(ctx, "notice write failed; the next tick retries", slog.String("error", err.Error()))
	return nil
}

// NoticeText is the one system line an auto apply sends to its source session:
// the files it effectively changed (more than three summarised), the score, and
// a preview of the run's observation.
func NoticeText(id string, d Data) string {
	var b strings.Builder
	b.WriteString("Evolution applied automatically")
	if d.Level != "" {
		b.WriteString(" (" + d.Level + ")")
	}
	b.WriteString(": ")
	switch files := d.Published; {
	case len(files) == 0:
		b.WriteString("no file changed")
	case len(files) <= 3:
		b.WriteString("changed " + strings.Join(files, ", "))
	default:
		fmt.Fprintf(&b, "changed %s and %d more files", strings.Join(files[:3], ", "), len(files)-3)
	}
	if sc := d.Score; sc != nil {
		fmt.Fprintf(&b, "; score %d (behavior %d, lint %d, confidence %s)", sc.Avg, sc.Behavior, sc.Lint, sc.Confidence)
	}
	if obs := strings.Join(strings.Fields(d.Observation), " "); obs != "" {
		b.WriteString("; observation: " + clip(obs, 200))
	}
	b.WriteString(". Apply " + id + " can be rolled back from the Evolution tab.")
	return b.String()
}

func firstOr(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return xs[0]
}
