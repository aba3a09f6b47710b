// Package store names the whole state port: everything a store adapter provides.
// Each adapter (internal/sqlite, internal/dynamo) implements Store, and
// internal/storetest's conformance suite runs against both.
package store

import (
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/changes"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// Store is the state port.
type Store interface {
	work.Backend
	workspace.Store
	auth.Store
	settings.Store
	settings.WorkspaceStore
	session.Store
	changes.Store
}
