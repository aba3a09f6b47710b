package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/a2astate"
	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/apptest"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// scripted is the decisions' model: the app's (offline, with the
// supervisor's answers) unless propose scripts the supervising agent's
// answer. It counts the calls per built-in agent and keeps every prompt.
type scripted struct {
	inner   model.Model
	mu      sync.Mutex
	calls   map[string]int
	prompts []string
	propose string // a proposal's JSON, answered for every supervisor request
}

func (m *scripted) Name() string { return m.inner.Name() }

func (m *scripted) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	id, _ := supervisor.AgentFromSystem(req.System)
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[id]++
	text := req.System
	for _, msg := range req.Messages {
		text += "\n" + msg.Text
	}
	m.prompts = append(m.prompts, text)
	propose := m.propose
	m.mu.Unlock()
	if id == supervisor.AgentSupervisor && propose != "" {
		return model.Response{Text: "```json\n" + propose + "\n```"}, nil
	}
	return m.inner.Generate(ctx, req)
}

func (m *scripted) count(agent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[agent]
}

func (m *scripted) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.calls {
		n += c
	}
	return n
}

func (m *scripted) texts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.prompts)
}

func (m *scripted) script(proposal string) {
	m.mu.Lock()
	m.propose = proposal
	m.mu.Unlock()
}

// decide runs the pending decisions (as the decision worker would) until
// none is left that can run.
func (e *env) decide() {
	e.t.Helper()
	var last []string
	for range 20 {
		pg, err := e.app.Store.ListItems(e.ctx, work.ListQuery{Kind: supervisor.KindDecision, Status: work.StatusPending, Oldest: true})
		if err != nil {
			e.t.Fatal(err)
		}
		var ids []string
		for _, it := range pg.Items {
			ids = append(ids, it.ID)
		}
		if len(ids) == 0 || slices.Equal(ids, last) {
			return
		}
		last = ids
		for _, id := range ids {
			if err := e.svc.Decider().Handle(e.ctx, queue.Message{Kind: string(supervisor.KindDecision), ID: id}); err != nil {
				e.t.Fatalf("decision %s: %v", id, err)
			}
		}
	}
}

func (e *env) decisions(id string) []supervisor.Decision {
	e.t.Helper()
	ds, err := e.svc.Decisions(e.ctx, e.admin, id, 50)
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

// decisionOf returns the decision of campaign c's first event of type typ.
func (e *env) decisionOf(c supervisor.Campaign, typ string) supervisor.Decision {
	e.t.Helper()
	for _, d := range slices.Backward(e.decisions(c.ID)) {
		if d.Event.Type == typ {
			return d
		}
	}
	e.t.Fatalf("no decision for a %s event of campaign %s", typ, c.ID)
	return supervisor.Decision{}
}

// finishDecided checks the decisions of a campaign whose mission completed on
// the offline model: the completed attempt's decision proposed finish, the
// reviewer approved it, it was relayed once; no decision is left running.
func (e *env) finishDecided(c supervisor.Campaign) {
	e.t.Helper()
	d := e.decisionOf(c, supervisor.EventAttemptCompleted)
	if d.Outcome != string(supervisor.DecisionRelayed) || len(d.Rounds) != 1 || d.Rounds[0].Proposal.Action != supervisor.ActionFinish ||
		d.Rounds[0].Verdict == nil || !d.Rounds[0].Verdict.Approve || d.Relayed == nil || d.Relayed.Action != supervisor.ActionFinish {
		e.t.Errorf("the completed attempt's decision: %+v, want finish proposed, approved and relayed", d)
	}
	if !strings.HasPrefix(d.Rounds[0].Proposal.Reason, "[offline model]") || d.Model != "offline" {
		e.t.Errorf("the offline proposal is not labelled as such: reason %q model %q", d.Rounds[0].Proposal.Reason, d.Model)
	}
	if !slices.Contains(c.Consumed, d.ID) {
		e.t.Errorf("consumed decisions %v lack %s", c.Consumed, d.ID)
	}
	for _, d := range e.decisions(c.ID) {
		if d.Outcome == string(work.StatusPending) || d.Outcome == string(work.StatusRunning) {
			e.t.Errorf("decision %s (%s) still %s", d.ID, d.Event.Type, d.Outcome)
		}
		if d.Event.Type == supervisor.EventMissionCompleted && d.Calls != 0 {
			e.t.Errorf("the finished mission's decision made %d model calls", d.Calls)
		}
	}
	if c.ModelCalls != e.model.total() {
		e.t.Errorf("campaign counts %d model calls, the model saw %d", c.ModelCalls, e.model.total())
	}
}

// claimed creates a campaign on a loopback molt and claims it (one
// CONTROL_CHANGED, whose decision is left pending).
func claimed(t *testing.T, in supervisor.Input) (*env, supervisor.Campaign) {
	t.Helper()
	base, token, _ := remoteMolt(t)
	e := setup(t, token)
	in.Name, in.Workspace, in.HeartbeatSeconds = "c", "acme", 1
	in.Remote = supervisor.Remote{CardURL: base + card, TokenRef: "env:SUP_TOKEN"}
	if in.Mission == "" {
		in.Mission = "say hello"
	}
	c, err := e.svc.Create(e.ctx, e.admin, in)
	if err != nil {
		t.Fatal(err)
	}
	e.pass(c.ID)
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	if c = e.pass(c.ID); c.Mode != supervisor.ModeController {
		t.Fatalf("mode %s after claim", c.Mode)
	}
	return e, c
}

// TestRejectedTwiceEscalates: a supervisor that proposes finish while no
// task completed is rejected by the reviewer, gets a second round with the
// objection, is rejected again: the decision ends escalated, relays nothing
// but the escalation, and a person sees one BLOCKED "escalated" event (which
// wakes no decision of its own).
func TestRejectedTwiceEscalates(t *testing.T) {
	t.Parallel()
	e, c := claimed(t, supervisor.Input{})
	e.model.script(`{"action":"finish","reason":"looks done to me"}`)
	e.decide()
	d := e.decisionOf(c, supervisor.EventControlChanged)
	if d.Outcome != string(supervisor.DecisionEscalated) || len(d.Rounds) != 2 || d.Calls != 4 {
		t.Fatalf("decision %+v: want escalated after two rounds and four model calls", d)
	}
	for i, r := range d.Rounds {
		if r.Proposal.Action != supervisor.ActionFinish || r.Verdict == nil || r.Verdict.Approve || !strings.Contains(r.Verdict.Objection, "not completed") {
			t.Errorf("round %d: %+v, want finish rejected as not completed", i+1, r)
		}
	}
	if s, r := e.model.count(supervisor.AgentSupervisor), e.model.count(supervisor.AgentReviewer); s != 2 || r != 2 {
		t.Errorf("model calls: %d supervisor, %d reviewer; want 2 and 2", s, r)
	}
	if d.Relayed == nil || d.Relayed.Action != supervisor.ActionEscalate {
		t.Errorf("relayed %+v, want the escalation", d.Relayed)
	}
	prompts := e.model.texts()
	if len(prompts) != 4 || !strings.Contains(prompts[2], "not completed") {
		t.Errorf("the second proposal's prompt does not carry the objection")
	}
	if strings.Contains(prompts[1], "looks done to me") || strings.Contains(prompts[3], "looks done to me") {
		t.Errorf("the reviewer saw the supervisor's reasoning")
	}
	last := c.LastDecision
	c = e.pass(c.ID)
	blocked := e.escalations(c.ID)
	if blocked != 1 || c.State == supervisor.StateFinished {
		t.Errorf("%d escalated BLOCKED events, state %s; want one, not finished", blocked, c.State)
	}
	if c.LastDecision != last {
		t.Errorf("the escalation's BLOCKED event woke a decision")
	}
	e.decide()
	if n := e.model.total(); n != 4 {
		t.Errorf("model calls %d, want 4", n)
	}
	if e.events(c.ID)[supervisor.EventMissionCompleted] != 0 {
		t.Errorf("a rejected finish completed the mission")
	}
}

// TestDecisionRelayedOnce: an approved submission is relayed and carried out
// once, however often its decision runs again (a duplicate wake-up, a re-run
// after a lost final write before and after the pass consumed it) and even
// when its request reaches the campaign twice.
func TestDecisionRelayedOnce(t *testing.T) {
	t.Parallel()
	e, c := claimed(t, supervisor.Input{})
	e.model.script(`{"action":"submit","text":"hello from the supervisor"}`)
	d := e.decisionOf(c, supervisor.EventControlChanged)
	msg := queue.Message{Kind: string(supervisor.KindDecision), ID: d.ID}
	for range 2 { // a duplicate wake-up
		if err := e.svc.Decider().Handle(e.ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	d = e.decisionOf(c, supervisor.EventControlChanged)
	if d.Outcome != string(supervisor.DecisionRelayed) || d.Relayed == nil || d.Relayed.Action != supervisor.ActionSubmit {
		t.Fatalf("decision %+v, want the submission relayed", d)
	}
	calls := e.model.total()
	if calls != 2 {
		t.Errorf("model calls %d, want 2 (one proposal, one verdict)", calls)
	}
	// The final write's answer was lost and the decision runs again (its
	// checkpointed rounds kept): the campaign already holds its request.
	rerun := func() supervisor.Decision {
		t.Helper()
		it, err := e.app.Store.GetItem(e.ctx, supervisor.KindDecision, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.app.Protocol.UpdateSeen(e.ctx, it, work.Edit{To: work.StatusPending}); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Decider().Handle(e.ctx, msg); err != nil {
			t.Fatal(err)
		}
		return e.decisionOf(c, supervisor.EventControlChanged)
	}
	if got := rerun(); got.Outcome != string(supervisor.DecisionRefused) {
		t.Errorf("a re-run before the pass: %s, want refused", got.Outcome)
	}
	c = e.pass(c.ID)
	if got := rerun(); got.Outcome != string(supervisor.DecisionRefused) {
		t.Errorf("a re-run after the pass: %s, want refused", got.Outcome)
	}
	if n := e.model.total(); n != calls {
		t.Errorf("the re-runs made %d model calls", n-calls)
	}
	c = e.pass(c.ID)
	deadline := time.Now().Add(30 * time.Second)
	for !a2astate.Terminal(c.TaskState) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		c = e.pass(c.ID)
	}
	if c.TaskState != a2astate.Completed {
		t.Fatalf("task state %q, want completed (so that a second submission would be allowed)", c.TaskState)
	}
	// The same decision's request reaches the campaign again (written behind
	// the relay's back): the pass refuses the consumed id.
	it, err := e.app.Store.GetItem(e.ctx, supervisor.KindCampaign, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(it.Data, &raw); err != nil {
		t.Fatal(err)
	}
	raw["requests"] = []any{map[string]any{"action": "submit", "text": "again", "at": "2026-01-01T00:00:00Z", "decision": d.ID}}
	b, _ := json.Marshal(raw)
	if _, err := e.app.Protocol.UpdateSeen(e.ctx, it, work.Edit{Data: b}); err != nil {
		t.Fatal(err)
	}
	c = e.pass(c.ID)
	if len(c.Requests) != 0 {
		t.Errorf("requests %+v left", c.Requests)
	}
	if n := e.f.count("SendMessage"); n != 1 {
		t.Errorf("SendMessage sent %d times for one decision, want 1", n)
	}
	if c.AttemptsUsed != 1 || !slices.Contains(c.Consumed, d.ID) {
		t.Errorf("attempts %d, consumed %v", c.AttemptsUsed, c.Consumed)
	}
}

// TestModelBudgetStopsModelCalls: once a campaign's model budget is spent,
// its decisions escalate without calling the model.
func TestModelBudgetStopsModelCalls(t *testing.T) {
	t.Parallel()
	e, c := claimed(t, supervisor.Input{ModelBudget: 1})
	e.decide() // the claim's decision: one call, continue
	if n := e.model.total(); n != 1 {
		t.Fatalf("model calls %d, want 1", n)
	}
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "release"); err != nil {
		t.Fatal(err)
	}
	c = e.pass(c.ID)
	e.decide()
	if n := e.model.total(); n != 1 {
		t.Errorf("model calls %d after the budget was spent, want 1", n)
	}
	ds := e.decisions(c.ID)
	if len(ds) != 2 || ds[0].Outcome != string(supervisor.DecisionEscalated) || ds[0].Calls != 0 || !strings.Contains(ds[0].Reason, "budget") {
		t.Fatalf("decisions %+v: want the newest escalated for the budget with no model call", ds)
	}
	if ds[1].Outcome != string(supervisor.DecisionContinued) || ds[1].Calls != 1 {
		t.Errorf("the first decision %+v, want continued after one call", ds[1])
	}
	c = e.pass(c.ID)
	if c.ModelCalls != 1 || c.ModelBudget != 1 {
		t.Errorf("campaign model calls %d of %d, want 1 of 1", c.ModelCalls, c.ModelBudget)
	}
	if e.events(c.ID)[supervisor.EventBlocked] != 1 {
		t.Errorf("no escalated BLOCKED event for the spent budget")
	}
	// The next event's decision escalates too, still without a call, and
	// tells no one again.
	if _, err := e.svc.Control(e.ctx, e.admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	e.pass(c.ID)
	e.decide()
	c = e.pass(c.ID)
	ds = e.decisions(c.ID)
	if len(ds) != 3 || ds[0].Outcome != string(supervisor.DecisionEscalated) || ds[0].Relayed != nil || e.model.total() != 1 {
		t.Errorf("decisions %+v (model calls %d): want the third escalated, nothing relayed, no call", ds, e.model.total())
	}
	if n := e.events(c.ID)[supervisor.EventBlocked]; n != 1 {
		t.Errorf("%d BLOCKED events for one spent budget, want 1", n)
	}
}

// TestSupervisorAgent: a campaign's supervising agent must be on the
// workspace's surface; its prompt follows the built-in protocol.
func TestSupervisorAgent(t *testing.T) {
	t.Parallel()
	e := setup(t, "tok")
	in := supervisor.Input{Name: "c", Workspace: "acme", Mission: "m", Supervisor: "nobody",
		Remote: supervisor.Remote{CardURL: "http://127.0.0.1:9/card", TokenRef: "env:SUP_TOKEN"}}
	if _, err := e.svc.Create(e.ctx, e.admin, in); !isField(err, "supervisor") {
		t.Errorf("an unknown supervisor: %v, want invalid supervisor", err)
	}
	in.Supervisor = "main" // the built-in chat agent every workspace has
	c, err := e.svc.Create(e.ctx, e.admin, in)
	if err != nil || c.Supervisor != "main" || c.ModelBudget != supervisor.DefaultModelBudget {
		t.Fatalf("create with supervisor main: %+v, %v", c, err)
	}
	e, c = claimed(t, supervisor.Input{Supervisor: "main"})
	e.decide()
	d := e.decisionOf(c, supervisor.EventControlChanged)
	prompts := e.model.texts()
	if d.Agent != "main" || len(prompts) != 1 || !strings.HasPrefix(prompts[0], supervisor.Marker(supervisor.AgentSupervisor)) ||
		!strings.Contains(prompts[0], "=== agents/main (the campaign's supervising agent) ===") {
		t.Errorf("decision agent %q, prompts %d: want main's assembled prompt after the built-in protocol", d.Agent, len(prompts))
	}
}

func isField(err error, field string) bool {
	var me *molt.Error
	return errors.As(err, &me) && me.Code == molt.EINVALID && me.Field == field
}

// TestDecisionStatesDocumented: the Decision table of docs/architecture.md
// ("Supervisor") uses exactly the statuses a decision can be in.
func TestDecisionStatesDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "**Decision** (`supervisor.KindDecision`")
	if i < 0 {
		t.Fatal("docs/architecture.md has no Decision table")
	}
	table := doc[i:]
	if j := strings.Index(table, "\n\n"); j >= 0 {
		if k := strings.Index(table[j+2:], "\n\n"); k >= 0 {
			table = table[:j+2+k]
		}
	}
	statuses := []work.Status{work.StatusPending, work.StatusRunning, work.StatusTimeout, supervisor.DecisionContinued,
		supervisor.DecisionRelayed, supervisor.DecisionEscalated, supervisor.DecisionRefused, supervisor.DecisionFailed}
	code := regexp.MustCompile("`([a-z_]+)`")
	seen := map[work.Status]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.Contains(line, "---") || strings.TrimSpace(cells[1]) == "from" {
			continue
		}
		for _, cell := range cells[1:3] {
			for _, m := range code.FindAllStringSubmatch(cell, -1) {
				st := work.Status(m[1])
				if !slices.Contains(statuses, st) {
					t.Errorf("the Decision table names status %q, which the code does not define", st)
				}
				seen[st] = true
			}
		}
	}
	for _, st := range statuses {
		if !seen[st] {
			t.Errorf("the Decision table never shows status %q", st)
		}
	}
}

// TestServeDecidesMission: two molt serve processes on loopback. The first
// supervises a campaign on the second with its workers and tick alone (no
// pass or decision run by hand): it claims, submits, sees the task complete,
// and its decision worker finishes the mission: exactly one ATTEMPT_COMPLETED
// and one MISSION_COMPLETED, the finish proposed and approved on the offline
// model.
func TestServeDecidesMission(t *testing.T) {
	base, token, _ := remoteMolt(t)
	t.Setenv("SERVE_SUP_TOKEN", token)
	cfg := app.Config{DataDir: t.TempDir(), Supervisor: supervisor.Config{Tick: time.Second, CallTimeout: 5 * time.Second}}
	_, a, _ := apptest.Serve(t, cfg, apptest.Options{Tick: time.Second})
	if _, _, err := a.Store.PutWorkspace(context.Background(), workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := auth.Caller{Token: auth.Token{Level: auth.Full}}
	svc := a.Supervisor
	c, err := svc.Create(ctx, admin, supervisor.Input{Name: "served", Workspace: "acme", Mission: "say hello", HeartbeatSeconds: 1,
		Remote: supervisor.Remote{CardURL: base + card, TokenRef: "env:SERVE_SUP_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(what string, ok func(supervisor.Campaign) bool) supervisor.Campaign {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := svc.Get(ctx, admin, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: campaign %+v", what, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	wait("capabilities", func(c supervisor.Campaign) bool { return c.Capabilities != nil })
	if _, err := svc.Control(ctx, admin, c.ID, "claim"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Submit(ctx, admin, c.ID, "hello there"); err != nil {
		t.Fatal(err)
	}
	c = wait("mission finished", func(c supervisor.Campaign) bool { return c.State == supervisor.StateFinished })
	time.Sleep(2 * time.Second) // a few more heartbeats and decisions: nothing new
	evs, err := svc.Events(ctx, admin, c.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range evs {
		n[ev.Type]++
	}
	if n[supervisor.EventAttemptCompleted] != 1 || n[supervisor.EventMissionCompleted] != 1 {
		t.Errorf("events %v: want one ATTEMPT_COMPLETED and one MISSION_COMPLETED", n)
	}
	ds, err := svc.Decisions(ctx, admin, c.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for _, d := range ds {
		if d.Outcome == string(supervisor.DecisionRelayed) && d.Relayed != nil && d.Relayed.Action == supervisor.ActionFinish &&
			d.Event.Type == supervisor.EventAttemptCompleted && d.Rounds[0].Verdict != nil && d.Rounds[0].Verdict.Approve {
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("decisions %+v: want one approved finish relayed", ds)
	}
}
