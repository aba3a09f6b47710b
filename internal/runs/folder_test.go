package runs_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/workspace"
)

// TestDryRunKeepsFolder: a patch that writes one file of a global agent folder
// is dry-run on the surface its apply publishes: the workspace folder it creates
// replaces the global one as a whole, so the folder's other
// files are copied with the patched one and the agent keeps its agent.yaml
// (here its system_prompt) in the dry-run.
func TestDryRunKeepsFolder(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := setup(t, open)
		for p, c := range map[string]string{
			"agents/main/AGENT.md":   "You are main.",
			"agents/main/agent.yaml": "name: main\nsystem_prompt: Always sign as Bob.\n",
		} {
			if _, err := e.store.PutFile(e.ctx, workspace.NewFile(workspace.Global, p, []byte(c), e.clock.Now())); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var dryRun string
		e.model.setAnswer(func(phase string, req model.Request) (model.Response, bool) {
			switch phase {
			case "draft":
				return model.Response{Text: "```json\n" + `{"files": [{"path": "agents/main/AGENT.md", "content": "You are main. Answer in French."}],
 "test_scenario": {"description": "answers in French", "message": "Hello"}, "rationale": "the user writes French"}` + "\n```"}, true
			case "dryrun":
				mu.Lock()
				dryRun = req.System
				mu.Unlock()
			}
			return model.Response{}, false
		})
		ss := e.session(fullCaller)
		run := e.evo(ss.ID, "answer in French")
		if errs := e.drain(); len(errs) > 0 {
			t.Fatalf("handler errors: %v", errs)
		}
		e.wantStatus(run.ID, runs.StatusAwaitingReview)
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(dryRun, "Answer in French.") {
			t.Fatalf("the dry-run's system prompt lacks the patched AGENT.md:\n%s", dryRun)
		}
		if !strings.Contains(dryRun, "Always sign as Bob.") {
			t.Fatalf("the dry-run lost the global agent.yaml (the new workspace folder hid it):\n%s", dryRun)
		}
		d := e.detail(run.ID)
		if d.Score == nil || !d.Score.Checks.PatchInSandbox {
			t.Fatalf("score %+v, want patchInSandbox", d.Score)
		}
	})
}
