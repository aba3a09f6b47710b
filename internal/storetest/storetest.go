// Package storetest is the conformance suite every store adapter runs: the claim
// protocol's invariants under concurrency and injected faults, transactions,
// workspaces, files, tokens, settings, pagination, and sessions with their message
// logs (appends committed together with work items). An adapter's test calls Run
// with a function that opens a fresh, empty store.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/work"
)

// Options are passed to the open function: the adapter must use this clock and id
// generator, and consult Faults on every write through its client wrapper.
type Options struct {
	Clock  molt.Clock
	IDs    molt.IDs
	Faults *faults.Injector
}

// Opener opens a fresh, empty store for one test.
type Opener func(t *testing.T, o Options) store.Store

// env is one test's store with its clock, faults and protocol.
type env struct {
	t      *testing.T
	s      store.Store
	clock  *molt.ManualClock
	faults *faults.Injector
	p      *work.Protocol
	ctx    context.Context
}

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, open Opener) *env {
	t.Helper()
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	inj := &faults.Injector{}
	s := open(t, Options{Clock: clock, IDs: ids, Faults: inj})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, s: s, clock: clock, faults: inj, ctx: ctx,
		p: &work.Protocol{Backend: s, Clock: clock, IDs: ids}}
}

// Run runs the whole suite.
func Run(t *testing.T, open Opener) {
	t.Run("Items", func(t *testing.T) { t.Parallel(); testItems(t, open) })
	t.Run("ClaimRace", func(t *testing.T) { t.Parallel(); testClaimRace(t, open) })
	t.Run("ShardedClaimRace", func(t *testing.T) { t.Parallel(); testShardedClaimRace(t, open) })
	t.Run("ShardedRelease", func(t *testing.T) { t.Parallel(); testShardedRelease(t, open) })
	t.Run("ShardedFaults", func(t *testing.T) { t.Parallel(); testShardedFaults(t, open) })
	t.Run("ShardedClaimEach", func(t *testing.T) { t.Parallel(); testShardedClaimEach(t, open) })
	t.Run("CommitEach", func(t *testing.T) { t.Parallel(); testCommitEach(t, open) })
	t.Run("ClaimEach", func(t *testing.T) { t.Parallel(); testClaimEach(t, open) })
	t.Run("BatchFaults", func(t *testing.T) { t.Parallel(); testBatchFaults(t, open) })
	t.Run("ClaimEachRace", func(t *testing.T) { t.Parallel(); testClaimEachRace(t, open) })
	t.Run("ExecutorBatch", func(t *testing.T) { t.Parallel(); testExecutorBatch(t, open) })
	t.Run("GetItems", func(t *testing.T) { t.Parallel(); testGetItems(t, open) })
	t.Run("UnbudgetedNoSlot", func(t *testing.T) { t.Parallel(); testUnbudgetedNoSlot(t, open) })
	t.Run("BudgetChange", func(t *testing.T) { t.Parallel(); testBudgetChange(t, open) })
	t.Run("WorkspaceLock", func(t *testing.T) { t.Parallel(); testWorkspaceLock(t, open) })
	t.Run("LostClaim", func(t *testing.T) { t.Parallel(); testLostClaim(t, open) })
	t.Run("Expire", func(t *testing.T) { t.Parallel(); testExpire(t, open) })
	t.Run("Transactions", func(t *testing.T) { t.Parallel(); testTransactions(t, open) })
	t.Run("MalformedOps", func(t *testing.T) { t.Parallel(); testMalformedOps(t, open) })
	t.Run("ZeroUpdatedAt", func(t *testing.T) { t.Parallel(); testZeroUpdatedAt(t, open) })
	t.Run("Faults", func(t *testing.T) { t.Parallel(); testFaults(t, open) })
	t.Run("Maintainer", func(t *testing.T) { t.Parallel(); testMaintainer(t, open) })
	t.Run("MaintainerLimit", func(t *testing.T) { t.Parallel(); testMaintainerLimit(t, open) })
	t.Run("MaintainerKindsIndependent", func(t *testing.T) { t.Parallel(); testMaintainerKindsIndependent(t, open) })
	t.Run("Takeover", func(t *testing.T) { t.Parallel(); testTakeover(t, open) })
	t.Run("HeartbeatKeepsUpdatedAt", func(t *testing.T) { t.Parallel(); testHeartbeatKeepsUpdatedAt(t, open) })
	t.Run("Recover", func(t *testing.T) { t.Parallel(); testRecover(t, open) })
	t.Run("ExpireAlso", func(t *testing.T) { t.Parallel(); testExpireAlso(t, open) })
	t.Run("MaintainerResume", func(t *testing.T) { t.Parallel(); testMaintainerResume(t, open) })
	t.Run("Delete", func(t *testing.T) { t.Parallel(); testDelete(t, open) })
	t.Run("OpIDAndExpiry", func(t *testing.T) { t.Parallel(); testOpIDAndExpiry(t, open) })
	t.Run("Pagination", func(t *testing.T) { t.Parallel(); testPagination(t, open) })
	t.Run("ListByAge", func(t *testing.T) { t.Parallel(); testListByAge(t, open) })
	t.Run("Workspaces", func(t *testing.T) { t.Parallel(); testWorkspaces(t, open) })
	t.Run("Files", func(t *testing.T) { t.Parallel(); testFiles(t, open) })
	t.Run("FileConditions", func(t *testing.T) { t.Parallel(); testFileConditions(t, open) })
	t.Run("ListSurface", func(t *testing.T) { t.Parallel(); testListSurface(t, open) })
	t.Run("Tokens", func(t *testing.T) { t.Parallel(); testTokens(t, open) })
	t.Run("TokenLifecycle", func(t *testing.T) { t.Parallel(); testTokenLifecycle(t, open) })
	t.Run("Settings", func(t *testing.T) { t.Parallel(); testSettings(t, open) })
	t.Run("SettingsRevision", func(t *testing.T) { t.Parallel(); testSettingsRevision(t, open) })
	t.Run("SettingsMerge", func(t *testing.T) { t.Parallel(); testSettingsMerge(t, open) })
	t.Run("WorkspaceSettings", func(t *testing.T) { t.Parallel(); testWorkspaceSettings(t, open) })
	t.Run("WorkspaceSettingsMerge", func(t *testing.T) { t.Parallel(); testWorkspaceSettingsMerge(t, open) })
	t.Run("Sessions", func(t *testing.T) { t.Parallel(); testSessions(t, open) })
	t.Run("Messages", func(t *testing.T) { t.Parallel(); testMessages(t, open) })
	t.Run("AppendRace", func(t *testing.T) { t.Parallel(); testAppendRace(t, open) })
	t.Run("Turns", func(t *testing.T) { t.Parallel(); testTurns(t, open) })
	t.Run("SessionFaults", func(t *testing.T) { t.Parallel(); testSessionFaults(t, open) })
	t.Run("Summary", func(t *testing.T) { t.Parallel(); testSummary(t, open) })
	t.Run("MarkExternal", func(t *testing.T) { t.Parallel(); testMarkExternal(t, open) })
	t.Run("Titles", func(t *testing.T) { t.Parallel(); testTitles(t, open) })
	t.Run("DeleteSession", func(t *testing.T) { t.Parallel(); testDeleteSession(t, open) })
	t.Run("NamingOps", func(t *testing.T) { t.Parallel(); testNamingOps(t, open) })
	t.Run("CreateClaimed", func(t *testing.T) { t.Parallel(); testCreateClaimed(t, open) })
	t.Run("UpdateSeen", func(t *testing.T) { t.Parallel(); testUpdateSeen(t, open) })
	t.Run("Patch", func(t *testing.T) { t.Parallel(); testPatch(t, open) })
	t.Run("Owns", func(t *testing.T) { t.Parallel(); testOwns(t, open) })
	t.Run("Executor", func(t *testing.T) { t.Parallel(); testExecutor(t, open) })
	t.Run("Cancel", func(t *testing.T) { t.Parallel(); testCancel(t, open) })
	t.Run("ItemsChanged", func(t *testing.T) { t.Parallel(); testItemsChanged(t, open) })
	t.Run("Relay", func(t *testing.T) { t.Parallel(); testRelay(t, open) })
}

// --- helpers -------------------------------------------------------------------

func (e *env) create(kind work.Kind, lock string) work.Item {
	e.t.Helper()
	it, err := e.p.Create(e.ctx, work.Item{Kind: kind, LockKey: lock, Workspace: "acme"})
	if err != nil {
		e.t.Fatalf("create: %v", err)
	}
	return it
}

func (e *env) get(kind work.Kind, id string) work.Item {
	e.t.Helper()
	it, err := e.s.GetItem(e.ctx, kind, id)
	if err != nil {
		e.t.Fatalf("get %s %s: %v", kind, id, err)
	}
	return it
}

// roomy is a budget no test fills: a claim under it takes a slot (a claim
// with budget 0 takes none), for tests that count the slots a claim holds.
const roomy = 1 << 20

func (e *env) claim(it work.Item, budget int) work.Claim {
	e.t.Helper()
	c, _, err := e.p.Claim(e.ctx, it.Kind, it.ID, it.Attempts, budget)
	if err != nil {
		e.t.Fatalf("claim %s: %v", it.ID, err)
	}
	return c
}

func (e *env) active(kind work.Kind) int {
	e.t.Helper()
	n, err := e.s.ActiveCount(e.ctx, kind)
	if err != nil {
		e.t.Fatalf("active count: %v", err)
	}
	return n
}

func (e *env) holder(key string) string {
	e.t.Helper()
	h, err := e.s.LockHolder(e.ctx, key)
	if err != nil {
		e.t.Fatalf("lock holder: %v", err)
	}
	return h
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := molt.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	if got := molt.ErrorReason(err); got != reason {
		t.Fatalf("error reason = %q (%v), want %q", got, err, reason)
	}
}

func done(s string) *string { return &s }
