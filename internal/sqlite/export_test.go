package sqlite

// BusyTimeout is exported for tests that hold the write lock past it.
const BusyTimeout = busyTimeout

// Migrations is the schema's migrations, for tests that build an older file.
var Migrations = migrations
