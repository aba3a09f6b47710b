package chat_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/workspace"
)

// TestSubSessionParent: a sub-session's parent must be a session of the same
// workspace that the caller may write to. A parent in another workspace is
// refused exactly like a missing one, and nothing is created.
func TestSubSessionParent(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testSubSessionParent(t, newHarness(t, options{})) })
	t.Run("dynamo", func(t *testing.T) { t.Parallel(); testSubSessionParent(t, newAWSHarness(t, chat.Config{})) })
}

func testSubSessionParent(t *testing.T, h *harness) {
	if _, _, err := h.store.PutWorkspace(h.ctx, workspace.Workspace{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	acmeWS := auth.Caller{Token: auth.Token{Level: auth.Workspace, Workspace: "acme"}}
	fullParent := h.session() // opened with full access, in acme
	otherParent, err := h.app.Chat.CreateSession(h.ctx, fullCaller, chat.NewSession{Workspace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	missing := (&molt.SortableIDs{}).NewID()
	count := func() int {
		t.Helper()
		p, err := h.store.ListSessions(h.ctx, "acme", page.Query{Limit: page.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	before := count()

	var details []string
	for _, parent := range []string{otherParent.ID, missing} {
		_, err := h.app.Chat.CreateSession(h.ctx, fullCaller, chat.NewSession{Workspace: "acme", Parent: parent})
		var me *molt.Error
		if !errors.As(err, &me) || me.Code != molt.EINVALID || me.Field != "parent" {
			t.Fatalf("parent %s: %v, want EINVALID naming parent", parent, err)
		}
		details = append(details, strings.ReplaceAll(me.Message, parent, "ID"))
	}
	if details[0] != details[1] {
		t.Errorf("a parent in another workspace reads %q, a missing one %q", details[0], details[1])
	}
	// A workspace token may not hang a sub-session under a full session.
	if _, err := h.app.Chat.CreateSession(h.ctx, acmeWS, chat.NewSession{Workspace: "acme", Parent: fullParent.ID}); molt.ErrorCode(err) != molt.EFORBIDDEN {
		t.Fatalf("workspace token under a full parent: %v, want EFORBIDDEN", err)
	}
	if got := count(); got != before {
		t.Fatalf("%d sessions created by refused calls", got-before)
	}
	// The ordinary case still works.
	wsParent, err := h.app.Chat.CreateSession(h.ctx, acmeWS, chat.NewSession{Workspace: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := h.app.Chat.CreateSession(h.ctx, acmeWS, chat.NewSession{Workspace: "acme", Parent: wsParent.ID})
	if err != nil || sub.Parent != wsParent.ID || sub.Access != "workspace" {
		t.Fatalf("sub-session %+v, %v", sub, err)
	}
	if sub, err := h.app.Chat.CreateSession(h.ctx, fullCaller, chat.NewSession{Workspace: "acme", Parent: fullParent.ID, External: true}); err != nil || !sub.External || sub.Parent != fullParent.ID {
		t.Fatalf("external sub-session %+v, %v", sub, err)
	}
}
