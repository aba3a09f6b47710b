// Package offlinesup makes molt's offline model answer the supervisor's
// built-in agents deterministically, so a campaign's decisions work with no
// network and always the same way. internal/app and internal/app/modelenv
// pass Handlers to offline.New next to the evolution ones.
//
// Handle answers a request whose system prompt starts with the marker of
// __supervisor__ or __reviewer__ (supervisor.Marker; a workspace supervising
// agent's prompt follows the built-in one, so it is answered the same way).
// It reads the facts and the event from the `facts` data block of the last
// user message. Every answer starts with offline.Label and carries one json
// block.
//
// # __supervisor__
//
//   - round 2 (an `objection` block): escalate — the reviewer objected, a
//     person should look;
//   - ATTEMPT_COMPLETED and the remote task completed: finish;
//   - ATTEMPT_COMPLETED otherwise (failed, canceled, rejected): submit the
//     mission again while attempts are left, else escalate;
//   - BLOCKED: escalate;
//   - CONTROL_CHANGED to observer other than by a release: escalate;
//   - anything else: continue.
//
// # __reviewer__
//
// Approves a proposal the facts support and rejects it otherwise, naming the
// fact: finish needs the remote task completed; submit needs controller mode,
// no running task and attempts left; cancel needs controller mode and a
// running task.
package offlinesup

import (
	"encoding/json"
	"strings"

	"github.com/molt-dev/molt/internal/a2astate"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/supervisor"
)

// Handlers returns the handlers to pass to offline.New.
func Handlers() []offline.Handler { return []offline.Handler{Handle} }

// Handle answers the supervisor's built-in agents and passes on every other
// request.
func Handle(req model.Request) (model.Response, bool) {
	id, ok := supervisor.AgentFromSystem(req.System)
	if !ok {
		return model.Response{}, false
	}
	blocks := evolution.RequestDataBlocks(req)
	var f supervisor.Facts
	raw, _ := evolution.FindData(blocks, supervisor.BlockFacts)
	_ = json.Unmarshal([]byte(raw), &f)
	mission, _ := evolution.FindData(blocks, supervisor.BlockMission)
	switch id {
	case supervisor.AgentSupervisor:
		_, round2 := evolution.FindData(blocks, supervisor.BlockObjection)
		p := Propose(f, mission, round2)
		return answer(map[string]string{"action": p.Action, "text": p.Text, "reason": p.Reason}), true
	case supervisor.AgentReviewer:
		var p supervisor.Proposal
		pr, _ := evolution.FindData(blocks, supervisor.BlockProposal)
		_ = json.Unmarshal([]byte(pr), &p)
		v := Review(f, p)
		verdict := "approve"
		if !v.Approve {
			verdict = "reject"
		}
		return answer(map[string]string{"verdict": verdict, "objection": v.Objection}), true
	}
	return model.Response{}, false
}

func answer(v map[string]string) model.Response {
	b, _ := json.MarshalIndent(v, "", "  ")
	return model.Response{Text: offline.Label + " Deterministic offline answer.\n\n```json\n" + string(b) + "\n```\n"}
}

// Propose is the offline supervisor's proposal for facts f.
func Propose(f supervisor.Facts, mission string, objected bool) supervisor.Proposal {
	ev := f.Event
	say := func(action, text, why string) supervisor.Proposal {
		return supervisor.Proposal{Action: action, Text: text, Reason: offline.Label + " " + why}
	}
	switch {
	case objected:
		return say(supervisor.ActionEscalate, "", "The reviewer objected to the first proposal; a person should look.")
	case ev.Type == supervisor.EventAttemptCompleted && f.TaskState == a2astate.Completed:
		return say(supervisor.ActionFinish, "", "The remote task completed: the mission is done.")
	case ev.Type == supervisor.EventAttemptCompleted && f.AttemptsUsed < f.MaxAttempts:
		return say(supervisor.ActionSubmit, strings.TrimSpace(mission), "The attempt ended "+ev.Detail+"; attempts are left: try the mission again.")
	case ev.Type == supervisor.EventAttemptCompleted:
		return say(supervisor.ActionEscalate, "", "The attempt ended "+ev.Detail+" and the attempts are spent.")
	case ev.Type == supervisor.EventBlocked:
		return say(supervisor.ActionEscalate, "", "The remote task is blocked ("+ev.Detail+"): it needs a person.")
	case ev.Type == supervisor.EventControlChanged && strings.HasPrefix(ev.Detail, supervisor.ModeObserver) &&
		!strings.Contains(ev.Detail, "released"):
		return say(supervisor.ActionEscalate, "", "Control was lost ("+ev.Detail+"): only a person may claim it again.")
	}
	return say(supervisor.ActionContinue, "", "Nothing to do after "+ev.Type+".")
}

// Review is the offline reviewer's verdict on proposal p for facts f.
func Review(f supervisor.Facts, p supervisor.Proposal) supervisor.Verdict {
	running := f.TaskID != "" && !a2astate.Terminal(f.TaskState)
	reject := func(why string) supervisor.Verdict {
		return supervisor.Verdict{Objection: offline.Label + " " + why}
	}
	switch p.Action {
	case supervisor.ActionFinish:
		if f.TaskState != a2astate.Completed {
			return reject("the remote task is not completed")
		}
	case supervisor.ActionSubmit:
		switch {
		case f.Mode != supervisor.ModeController:
			return reject("molt is not the campaign's controller")
		case running:
			return reject("a remote task is still running")
		case f.AttemptsUsed >= f.MaxAttempts:
			return reject("the campaign's attempts are spent")
		case strings.TrimSpace(p.Text) == "":
			return reject("the submission has no text")
		}
	case supervisor.ActionCancel:
		if f.Mode != supervisor.ModeController || !running {
			return reject("no remote task runs under molt's control")
		}
	case supervisor.ActionContinue, supervisor.ActionEscalate:
	default:
		return reject("unknown action " + p.Action)
	}
	return supervisor.Verdict{Approve: true}
}
