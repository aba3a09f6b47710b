package delegate

import (
	"fmt"
	"sort"
	"strings"
)

// Access is what the gate needs to know of the caller: whether it may chat in
// the workspace (a workspace agent's sub-session is a chat), and whether it may
// send to a remote (external, so full access or an explicit grant).
type Access interface {
	CanChat(ws string) bool
	IsFull() bool
}

// Route is a dispatch the gate allowed: the target as it is in the live
// registry and the message it receives.
type Route struct {
	Target  Target
	Message string
}

// Prepare is the one execution gate: just before a dispatch it re-validates
// res against the live registry and the caller. The target must still be
// registered under the same kind (an agent the workspace has, a remote an
// administrator registered — never a name the model produced), and the caller
// must be allowed to use it. Anything else abstains, with the reason in the
// returned Resolution; only a nil error authorises the route.
func Prepare(res Resolution, live Registry, ws string, c Access) (Route, Resolution, error) {
	if res.Decision != Dispatch {
		return Route{}, res, fmt.Errorf("not a dispatch: %s", res.Decision)
	}
	abstain := func(reason string) (Route, Resolution, error) {
		out := res
		out.Decision, out.Reason = Abstain, reason
		return Route{}, out, fmt.Errorf("route to %s refused: %s", res.Target, reason)
	}
	var t *Target
	for i := range live.Targets {
		if live.Targets[i].Name == res.Target && live.Targets[i].Kind == res.Kind {
			t = &live.Targets[i]
			break
		}
	}
	switch {
	case t == nil:
		return abstain(ReasonGone)
	case t.Kind == KindRemote && !t.Registered:
		return abstain(ReasonNotRegistered)
	case !c.CanChat(ws):
		return abstain(ReasonNotAllowed)
	case t.Kind == KindRemote && !c.IsFull():
		// A remote dispatch sends the message outside molt on the
		// administrator's credentials: full access only.
		return abstain(ReasonNotAllowed)
	}
	return Route{Target: *t, Message: res.Message}, res, nil
}

// Validate refuses a registry in which one name or alias names two targets
// (after Normalize), or a target without a name or kind.
func (r Registry) Validate() error {
	owner := map[string]string{}
	var clash []string
	for _, t := range r.Targets {
		if Normalize(t.Name) == "" {
			return fmt.Errorf("a target has no name")
		}
		if t.Kind != KindAgent && t.Kind != KindRemote {
			return fmt.Errorf("target %s: kind %q is neither %s nor %s", t.Name, t.Kind, KindAgent, KindRemote)
		}
		names := map[string]bool{Normalize(t.Name): true}
		if t.Title != "" {
			names[Normalize(t.Title)] = true
		}
		for _, a := range t.Aliases {
			if n := Normalize(a); n != "" {
				names[n] = true
			}
		}
		for n := range names {
			if o, ok := owner[n]; ok && o != t.Kind+"/"+t.Name {
				clash = append(clash, fmt.Sprintf("%q (%s and %s)", n, o, t.Kind+"/"+t.Name))
				continue
			}
			owner[n] = t.Kind + "/" + t.Name
		}
	}
	if len(clash) > 0 {
		sort.Strings(clash)
		return fmt.Errorf("names given to two targets: %s", strings.Join(clash, ", "))
	}
	return nil
}
