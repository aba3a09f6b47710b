package delegate_test

import (
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/delegate"
)

type access struct {
	chat, full bool
}

func (a access) CanChat(string) bool { return a.chat }
func (a access) IsFull() bool        { return a.full }

func registry() delegate.Registry {
	return delegate.Registry{Targets: []delegate.Target{
		{Name: "reviewer", Kind: delegate.KindAgent, Title: "Nora"},
		{Name: "billing", Kind: delegate.KindRemote, Registered: true},
		{Name: "rogue", Kind: delegate.KindRemote},
	}}
}

// TestPrepare: the gate re-validates a dispatch against the live registry and
// the caller; anything else abstains with a reason and no route.
func TestPrepare(t *testing.T) {
	reg := registry()
	cases := []struct {
		name   string
		text   string
		live   delegate.Registry
		caller access
		reason string // "" = allowed
	}{
		{"agent allowed", "@reviewer look", reg, access{chat: true}, ""},
		{"remote allowed for full", "@billing balance?", reg, access{chat: true, full: true}, ""},
		{"remote refused for a workspace token", "@billing balance?", reg, access{chat: true}, delegate.ReasonNotAllowed},
		{"target gone", "@reviewer look", delegate.Registry{}, access{chat: true, full: true}, delegate.ReasonGone},
		{"kind changed", "@reviewer look", delegate.Registry{Targets: []delegate.Target{{Name: "reviewer", Kind: delegate.KindRemote, Registered: true}}},
			access{chat: true, full: true}, delegate.ReasonGone},
		{"remote nobody registered", "@rogue hi", reg, access{chat: true, full: true}, delegate.ReasonNotRegistered},
		{"caller may not chat", "@reviewer look", reg, access{}, delegate.ReasonNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := delegate.Resolve(c.text, reg)
			if res.Decision != delegate.Dispatch {
				t.Fatalf("resolve %q = %+v", c.text, res)
			}
			route, out, err := delegate.Prepare(res, c.live, "acme", c.caller)
			if c.reason == "" {
				if err != nil || route.Target.Name != res.Target || route.Message != res.Message {
					t.Fatalf("prepare = %+v %+v %v, want the route", route, out, err)
				}
				return
			}
			if err == nil || out.Decision != delegate.Abstain || out.Reason != c.reason || route.Target.Name != "" {
				t.Fatalf("prepare = %+v %+v %v, want abstain %s", route, out, err, c.reason)
			}
		})
	}
	// Only a dispatch can be prepared.
	if _, _, err := delegate.Prepare(delegate.Resolve("hello", reg), reg, "acme", access{chat: true, full: true}); err == nil {
		t.Fatal("a local decision was prepared")
	}
	// A name the model produced (not a resolution of the registry) never
	// passes: the gate looks the target up, it does not trust it.
	forged := delegate.Resolution{Decision: delegate.Dispatch, Target: "evil", Kind: delegate.KindRemote, Message: "x"}
	if _, _, err := delegate.Prepare(forged, reg, "acme", access{chat: true, full: true}); err == nil {
		t.Fatal("a forged target was prepared")
	}
}

// TestValidate: a name or alias given to two targets is refused, however it
// is spelled.
func TestValidate(t *testing.T) {
	ok := registry()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []delegate.Registry{
		{Targets: []delegate.Target{{Name: "reviewer", Kind: delegate.KindAgent}, {Name: "Reviewer", Kind: delegate.KindRemote}}},
		{Targets: []delegate.Target{{Name: "code-reviewer", Kind: delegate.KindAgent}, {Name: "x", Kind: delegate.KindAgent, Aliases: []string{"Code  Reviewer"}}}},
		{Targets: []delegate.Target{{Name: "a", Kind: delegate.KindAgent, Title: "Nora"}, {Name: "b", Kind: delegate.KindAgent, Aliases: []string{"nora"}}}},
		{Targets: []delegate.Target{{Name: "", Kind: delegate.KindAgent}}},
		{Targets: []delegate.Target{{Name: "a", Kind: "robot"}}},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("registry %+v validated", r.Targets)
		}
	}
}

// TestMaskedNeverDispatches: whatever delegation phrase stands inside code,
// quotes or a URL, nothing routes.
func TestMaskedNeverDispatches(t *testing.T) {
	reg := registry()
	for _, phrase := range []string{"ask the reviewer to look", "@reviewer look", "have Nora check this", "send this to billing"} {
		for _, wrap := range []string{"`%s`", "```\n%s\n```", "\"%s\"", "“%s”", "«%s»", "> %s", "https://x.example/%s"} {
			text := strings.Replace(wrap, "%s", phrase, 1)
			if strings.HasPrefix(wrap, "https") {
				text = strings.Replace(wrap, "%s", strings.ReplaceAll(phrase, " ", "-"), 1)
			}
			if got := delegate.Resolve(text, reg); got.Decision == delegate.Dispatch {
				t.Errorf("%q dispatched: %+v", text, got)
			}
		}
	}
}
