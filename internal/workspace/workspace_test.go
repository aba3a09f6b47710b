package workspace_test

import (
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

func TestValidatePath(t *testing.T) {
	t.Parallel()
	good := []string{"INSTRUCTIONS.md", "INDEX.md", "USER.md", "agents/main/AGENT.md", "agents/main/agent.yaml",
		"skills/search/SKILL.md", "skills/search/refs/notes.md", "prompts/bootstrap/00-intro.md", "prompts/all/x.md", "prompts/root/y.md"}
	for _, p := range good {
		if err := workspace.ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", p, err)
		}
	}
	bad := []string{"", "/INSTRUCTIONS.md", "../x", "a//b", "./INDEX.md", "agents/../USER.md", "agents/main/../../x",
		"agents\\main\\AGENT.md", "README.md", "other/x.md", "agents/main", "prompts/all/x.txt", "prompts/else/x.md",
		"prompts/all/sub/x.md", "agents/.git/config", "skills/x/\x01.md", "agents/a/b/c/d/e/f.md", strings.Repeat("a/", 200) + "x",
		"INSTRUCTIONS.md/", "agents/main/AGENT.md\x00.png"}
	for _, p := range bad {
		err := workspace.ValidatePath(p)
		if molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("ValidatePath(%q) = %v, want invalid", p, err)
			continue
		}
		var e *molt.Error
		if me, ok := err.(*molt.Error); ok {
			e = me
		}
		if e == nil || e.Field != "path" {
			t.Errorf("ValidatePath(%q) error does not name the path field: %v", p, err)
		}
	}
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"acme", "a", "a-b-1", "0x", strings.Repeat("a", 63)} {
		if err := workspace.ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", "A", "-a", "a_b", "a.b", strings.Repeat("a", 64), "a b", "é"} {
		if err := workspace.ValidateName(n); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("ValidateName(%q) = %v, want invalid", n, err)
		}
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := func(ws, p, c string) workspace.File { return workspace.NewFile(ws, p, []byte(c), now) }
	global := []workspace.File{
		f("global", "INSTRUCTIONS.md", "global rules"),
		f("global", "INDEX.md", "global index"),
		f("global", "agents/main/AGENT.md", "global main"),
		f("global", "agents/main/agent.yaml", "name: main"),
		f("global", "skills/search/SKILL.md", "global search"),
		f("global", "prompts/all/a.md", "global a"),
		f("global", "prompts/all/b.md", "global b"),
	}
	ws := []workspace.File{
		f("acme", "INSTRUCTIONS.md", "acme rules"),
		f("acme", "agents/main/AGENT.md", "acme main"), // replaces the whole global agents/main folder
		f("acme", "prompts/all/a.md", "acme a"),        // replaces the whole prompts/all folder
	}
	got := workspace.Effective(global, ws)
	var lines []string
	for _, e := range got {
		lines = append(lines, e.Path+"="+string(e.Content)+"@"+e.Scope)
	}
	want := strings.Join([]string{
		"INDEX.md=global index@global",
		"INSTRUCTIONS.md=acme rules@workspace",
		"agents/main/AGENT.md=acme main@workspace",
		"prompts/all/a.md=acme a@workspace",
		"skills/search/SKILL.md=global search@global",
	}, "\n")
	if g := strings.Join(lines, "\n"); g != want {
		t.Fatalf("Effective =\n%s\nwant\n%s", g, want)
	}
	if n := len(workspace.Effective(global, nil)); n != len(global) {
		t.Fatalf("no overrides: %d files, want %d", n, len(global))
	}
}
