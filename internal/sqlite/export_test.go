package sqlite

// BusyTimeout is exported for tests that hold the write lock past it.
const BusyTimeout = busyTimeout
