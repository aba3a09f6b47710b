package evolution_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/work"
)

// TestStateMachinesDocumented: the state machine tables of
// docs/architecture.md use exactly the statuses the code defines: every status
// in a table's from/to columns is one of its kind's, and every status of the
// kind appears in its table.
func TestStateMachinesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## State machines")
	end := strings.Index(doc, "## Invariants")
	if start < 0 || end < start {
		t.Fatal("docs/architecture.md has no State machines section before Invariants")
	}
	sec := doc[start:end]
	kinds := map[string][]work.Status{
		"**Run**": {evolution.RunPending, evolution.RunRunning, evolution.RunAwaitingReview, evolution.RunApproved,
			evolution.RunApplied, evolution.RunRolledBack, evolution.RunRejected, evolution.RunSkipped,
			evolution.RunFailed, evolution.RunTimeout},
		"**Apply**": {evolution.ApplyPending, evolution.ApplyRunning, evolution.ApplySyncing, evolution.ApplyApplied,
			evolution.ApplyFailed, evolution.ApplyTimeout, evolution.ApplyRolledBack},
	}
	code := regexp.MustCompile("`([a-z_]+)`")
	for head, statuses := range kinds {
		i := strings.Index(sec, head)
		if i < 0 {
			t.Fatalf("no %s table", head)
		}
		table := sec[i:]
		if j := strings.Index(table[len(head):], "**"); j >= 0 {
			table = table[:len(head)+j]
		}
		seen := map[work.Status]bool{}
		for _, line := range strings.Split(table, "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 4 || strings.Contains(line, "---") || strings.TrimSpace(cells[1]) == "from" {
				continue
			}
			for _, cell := range cells[1:3] { // from, to
				for _, m := range code.FindAllStringSubmatch(cell, -1) {
					st := work.Status(m[1])
					if strings.HasPrefix(m[1], "approved_by") {
						continue
					}
					if !slices.Contains(statuses, st) {
						t.Errorf("%s table names status %q, which the code does not define", head, st)
					}
					seen[st] = true
				}
			}
		}
		for _, st := range statuses {
			if !seen[st] {
				t.Errorf("%s table never shows status %q", head, st)
			}
		}
	}
	for _, st := range []work.Status{evolution.RollbackDone, evolution.RollbackFailed, evolution.RollbackRunning} {
		if !strings.Contains(sec, "`"+string(st)+"`") {
			t.Errorf("the rollback machine does not name %q", st)
		}
	}
}
