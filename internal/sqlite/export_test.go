package sqlite

import "context"

// BusyTimeout is exported for tests that hold the write lock past it.
const BusyTimeout = busyTimeout

// Migrations is the schema's migrations, for tests that build an older file.
var Migrations = migrations

// SyncSetting returns PRAGMA synchronous of s's write connection (1 NORMAL, 2 FULL).
func SyncSetting(s *Store) (int, error) {
	var n int
	err := s.w.write(context.Background(), func(q querier) error {
		return q.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&n)
	})
	return n, err
}
