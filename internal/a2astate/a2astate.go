// Package a2astate is the A2A v1.0 task-state vocabulary (ProtoJSON names),
// shared by molt's A2A server (internal/a2a) and its client (internal/a2aclient).
package a2astate

// Task states, v1.0 spelling.
const (
	Submitted = "TASK_STATE_SUBMITTED"
	Working   = "TASK_STATE_WORKING"
	Completed = "TASK_STATE_COMPLETED"
	Failed    = "TASK_STATE_FAILED"
	Canceled  = "TASK_STATE_CANCELED"
	Rejected  = "TASK_STATE_REJECTED"
)

// Terminal reports whether a task in state has ended.
func Terminal(state string) bool {
	switch state {
	case Completed, Failed, Canceled, Rejected:
		return true
	}
	return false
}
