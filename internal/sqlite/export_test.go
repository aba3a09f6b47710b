package sqlite

import "context"

// BusyTimeout is exported for tests that hold the write lock past it.
const BusyTimeout = busyTimeout

// Migrations is the schema's migrations, for tests that build an older file.
var Migrations = migrations

// GroupStats returns how many group transactions s has committed, and how many
// writes they held.
func GroupStats(s *Store) (groups, members int64) {
	return s.g.groups.Load(), s.g.members.Load()
}

// Queued returns how many writes wait for the writer.
func Queued(s *Store) int {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	return len(s.g.queue)
}

// HoldWriter runs a write that blocks the writer until release is called;
// release returns that write's result.
func HoldWriter(s *Store) (release func() error) {
	held, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.w.write(context.Background(), func(querier) error {
			close(held)
			<-rel
			return nil
		})
	}()
	<-held
	return func() error {
		close(rel)
		return <-done
	}
}

// SyncSetting returns PRAGMA synchronous of s's write connection (1 NORMAL, 2 FULL).
func SyncSetting(s *Store) (int, error) {
	var n int
	err := s.w.write(context.Background(), func(q querier) error {
		return q.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&n)
	})
	return n, err
}
