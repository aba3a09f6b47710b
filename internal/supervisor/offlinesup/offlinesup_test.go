package offlinesup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/a2astate"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/supervisor/offlinesup"
)

func TestPropose(t *testing.T) {
	t.Parallel()
	ctl := supervisor.Facts{Mode: supervisor.ModeController, MaxAttempts: 3, AttemptsUsed: 1, TaskID: "t1"}
	with := func(f supervisor.Facts, typ, detail, task string) supervisor.Facts {
		f.Event = supervisor.Event{Type: typ, Detail: detail}
		f.TaskState = task
		return f
	}
	spent := ctl
	spent.AttemptsUsed = 3
	cases := []struct {
		name     string
		f        supervisor.Facts
		objected bool
		want     string
	}{
		{"completed", with(ctl, supervisor.EventAttemptCompleted, "completed", a2astate.Completed), false, supervisor.ActionFinish},
		{"failed with attempts left", with(ctl, supervisor.EventAttemptCompleted, a2astate.Failed, a2astate.Failed), false, supervisor.ActionSubmit},
		{"failed, attempts spent", with(spent, supervisor.EventAttemptCompleted, a2astate.Failed, a2astate.Failed), false, supervisor.ActionEscalate},
		{"blocked", with(ctl, supervisor.EventBlocked, "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_INPUT_REQUIRED"), false, supervisor.ActionEscalate},
		{"control lost", with(ctl, supervisor.EventControlChanged, "observer: the epoch moved", ""), false, supervisor.ActionEscalate},
		{"released", with(ctl, supervisor.EventControlChanged, "observer: released", ""), false, supervisor.ActionContinue},
		{"working", with(ctl, supervisor.EventStateChanged, "working", a2astate.Working), false, supervisor.ActionContinue},
		{"objected", with(ctl, supervisor.EventAttemptCompleted, "completed", a2astate.Completed), true, supervisor.ActionEscalate},
	}
	for _, c := range cases {
		p := offlinesup.Propose(c.f, "the mission", c.objected)
		if p.Action != c.want || !strings.HasPrefix(p.Reason, offline.Label) {
			t.Errorf("%s: %+v, want %s labelled offline", c.name, p, c.want)
		}
		if p.Action == supervisor.ActionSubmit && p.Text != "the mission" {
			t.Errorf("%s: submits %q, want the mission", c.name, p.Text)
		}
	}
}

func TestReview(t *testing.T) {
	t.Parallel()
	ctl := supervisor.Facts{Mode: supervisor.ModeController, MaxAttempts: 3, AttemptsUsed: 1, TaskID: "t1"}
	state := func(f supervisor.Facts, st string) supervisor.Facts { f.TaskState = st; return f }
	spent := state(ctl, a2astate.Failed)
	spent.AttemptsUsed = 3
	observer := state(ctl, a2astate.Failed)
	observer.Mode = supervisor.ModeObserver
	cases := []struct {
		name string
		f    supervisor.Facts
		p    supervisor.Proposal
		ok   bool
	}{
		{"finish completed", state(ctl, a2astate.Completed), supervisor.Proposal{Action: supervisor.ActionFinish}, true},
		{"finish working", state(ctl, a2astate.Working), supervisor.Proposal{Action: supervisor.ActionFinish}, false},
		{"finish failed", state(ctl, a2astate.Failed), supervisor.Proposal{Action: supervisor.ActionFinish}, false},
		{"submit after a failure", state(ctl, a2astate.Failed), supervisor.Proposal{Action: supervisor.ActionSubmit, Text: "again"}, true},
		{"submit, attempts spent", spent, supervisor.Proposal{Action: supervisor.ActionSubmit, Text: "again"}, false},
		{"submit while running", state(ctl, a2astate.Working), supervisor.Proposal{Action: supervisor.ActionSubmit, Text: "again"}, false},
		{"submit as observer", observer, supervisor.Proposal{Action: supervisor.ActionSubmit, Text: "again"}, false},
		{"cancel running", state(ctl, a2astate.Working), supervisor.Proposal{Action: supervisor.ActionCancel}, true},
		{"cancel ended", state(ctl, a2astate.Completed), supervisor.Proposal{Action: supervisor.ActionCancel}, false},
	}
	for _, c := range cases {
		v := offlinesup.Review(c.f, c.p)
		if v.Approve != c.ok || (!v.Approve && !strings.HasPrefix(v.Objection, offline.Label)) {
			t.Errorf("%s: %+v, want approve=%v (an objection labelled offline)", c.name, v, c.ok)
		}
	}
}

// TestHandle: only the supervisor's built-in agents are answered, with one
// labelled json block.
func TestHandle(t *testing.T) {
	t.Parallel()
	m := offline.New(offlinesup.Handlers()...)
	sys, _ := supervisor.BuiltinAgent(supervisor.AgentReviewer)
	msg := "<data name=\"facts\">\n{\"mode\":\"controller\",\"state\":\"working\",\"task_id\":\"t1\",\"task_state\":\"TASK_STATE_WORKING\"}\n</data>\n" +
		"<data name=\"proposal\">\n{\"action\":\"finish\"}\n</data>"
	resp, err := m.Generate(context.Background(), model.Request{System: sys, Messages: []model.Message{{Role: model.RoleUser, Text: msg}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Text, offline.Label) || !strings.Contains(resp.Text, `"verdict": "reject"`) {
		t.Errorf("reviewer answer %q, want a labelled rejection", resp.Text)
	}
	plain, err := m.Generate(context.Background(), model.Request{System: "you are helpful", Messages: []model.Message{{Role: model.RoleUser, Text: msg}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.Text, "verdict") {
		t.Errorf("a plain request got a verdict: %q", plain.Text)
	}
}
