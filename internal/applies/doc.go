// Package applies runs evolution applies (DESIGN.md §4): the apply worker that
// merges approved runs' patches, re-tests them, snapshots what it will overwrite
// and publishes; rollback; the notice an auto apply sends to its session; and the
// retention of runs' and applies' artifacts.
package applies
