package dynamo

import (
	"context"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
)

// The session methods are being written; until then they refuse.

func notYet() error {
	return molt.Errorf(molt.EINTERNAL, "sessions are not implemented on dynamodb yet")
}

// CreateSession is not implemented yet.
func (s *Store) CreateSession(ctx context.Context, in session.Session) (session.Session, error) {
	return session.Session{}, notYet()
}

// GetSession is not implemented yet.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	return session.Session{}, notYet()
}

// ListSessions is not implemented yet.
func (s *Store) ListSessions(ctx context.Context, ws string, q page.Query) (page.Page[session.Session], error) {
	return page.Page[session.Session]{}, notYet()
}

// SetTitle is not implemented yet.
func (s *Store) SetTitle(ctx context.Context, id, title, source string, ifRev int) (session.Session, error) {
	return session.Session{}, notYet()
}

// DeleteSession is not implemented yet.
func (s *Store) DeleteSession(ctx context.Context, id string) error { return notYet() }

// ListMessages is not implemented yet.
func (s *Store) ListMessages(ctx context.Context, id string, after, limit int) ([]session.Message, error) {
	return nil, notYet()
}
