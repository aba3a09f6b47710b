package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

func (e *env) content(ws, path string) string {
	e.t.Helper()
	f, err := e.s.GetFile(e.ctx, ws, path)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return "<absent>"
	}
	if err != nil {
		e.t.Fatalf("get %s/%s: %v", ws, path, err)
	}
	return string(f.Content)
}

func shaOf(content string) string { return workspace.NewFile("", "", []byte(content), epoch).SHA256 }

// testFileConditions: PutFileIf and DeleteFileIf write only when their Match
// holds for the stored file, and of writers racing over one version exactly one
// wins.
func testFileConditions(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	const p = "INSTRUCTIONS.md"
	absent := workspace.Match{Absent: true}
	exists := workspace.Match{Exists: true}
	is := func(c ...string) workspace.Match {
		var m workspace.Match
		for _, s := range c {
			m.SHA256 = append(m.SHA256, shaOf(s))
		}
		return m
	}
	put := func(content string, m workspace.Match) error {
		_, err := e.s.PutFileIf(e.ctx, file("acme", p, content), m)
		return err
	}
	failed := func(what string, err error) {
		t.Helper()
		if molt.ErrorCode(err) != molt.ECONFLICT || molt.ErrorReason(err) != workspace.ReasonPrecondition {
			t.Fatalf("%s: %v, want %s", what, err, workspace.ReasonPrecondition)
		}
	}

	// Absent file: If-Match of any kind fails, If-None-Match: * creates.
	failed("put if-match on absent", put("x", is("x")))
	failed("put if-match * on absent", put("x", exists))
	failed("delete if-match on absent", e.s.DeleteFileIf(e.ctx, "acme", p, is("x")))
	failed("delete if-match * on absent", e.s.DeleteFileIf(e.ctx, "acme", p, exists))
	if got := e.content("acme", p); got != "<absent>" {
		t.Fatalf("a failed precondition wrote %q", got)
	}
	if err := put("v1", absent); err != nil {
		t.Fatalf("create if absent: %v", err)
	}
	failed("create if absent over v1", put("v1b", absent))
	// Existing file: the current hash (one of a list) matches, a stale one fails.
	if err := put("v2", is("other", "v1")); err != nil {
		t.Fatalf("put if v1: %v", err)
	}
	failed("put if v1 over v2", put("v3", is("v1")))
	if err := put("v3", exists); err != nil {
		t.Fatalf("put if exists: %v", err)
	}
	if err := put("v4", workspace.Match{}); err != nil {
		t.Fatalf("unconditional put: %v", err)
	}
	if got := e.content("acme", p); got != "v4" {
		t.Fatalf("content = %q, want v4", got)
	}
	failed("delete if v3 over v4", e.s.DeleteFileIf(e.ctx, "acme", p, is("v3")))
	failed("delete if absent over v4", e.s.DeleteFileIf(e.ctx, "acme", p, absent))
	if got := e.content("acme", p); got != "v4" {
		t.Fatalf("a failed delete precondition deleted: %q", got)
	}
	if err := e.s.DeleteFileIf(e.ctx, "acme", p, is("v4")); err != nil {
		t.Fatalf("delete if v4: %v", err)
	}
	wantCode(t, e.s.DeleteFileIf(e.ctx, "acme", p, workspace.Match{}), molt.ENOTFOUND)
	// The workspace check comes first, as for PutFile.
	_, err := e.s.PutFileIf(e.ctx, file("ghost", p, "x"), absent)
	wantCode(t, err, molt.ENOTFOUND)

	// Racers over one version: exactly one wins.
	const racers = 6
	race := func(what string, m workspace.Match, content func(i int) string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = put(content(i), m)
			}()
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("%s: racers %d and %d both wrote", what, winner, i)
			case err == nil:
				winner = i
			default:
				failed(fmt.Sprintf("%s: racer %d", what, i), err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no racer won", what)
		}
		if got := e.content("acme", p); got != content(winner) {
			t.Fatalf("%s: content %q, want the winner's %q", what, got, content(winner))
		}
	}
	race("create", absent, func(i int) string { return fmt.Sprintf("new %d", i) })
	cur := e.content("acme", p)
	race("update", is(cur), func(i int) string { return fmt.Sprintf("next %d", i) })

	// A lost response is not reported as a failed precondition of its own write.
	cur = e.content("acme", p)
	e.faults.Next(faults.After)
	err = put("after lost response", is(cur))
	e.checkFaultsUsed()
	if molt.ErrorReason(err) == workspace.ReasonPrecondition {
		t.Fatalf("put with a lost response reported as a failed precondition: %v", err)
	}
	if got := e.content("acme", p); got != "after lost response" {
		t.Fatalf("content after lost response = %q", got)
	}
	e.faults.Next(faults.After)
	err = e.s.DeleteFileIf(e.ctx, "acme", p, is("after lost response"))
	e.checkFaultsUsed()
	if molt.ErrorReason(err) == workspace.ReasonPrecondition {
		t.Fatalf("delete with a lost response reported as a failed precondition: %v", err)
	}
	if got := e.content("acme", p); got != "<absent>" {
		t.Fatalf("content after delete with a lost response = %q", got)
	}
}

// testListSurface: both stored layers of a surface in one call, each sorted by
// path, with content, and nothing of another workspace.
func testListSurface(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	e.putWorkspace("other")
	for _, f := range []workspace.File{
		file(workspace.Global, "USER.md", "g user"), file(workspace.Global, "INSTRUCTIONS.md", "g rules"),
		file("acme", "skills/s/SKILL.md", "a skill"), file("acme", "INDEX.md", "a index"),
		file("other", "INDEX.md", "o index"),
	} {
		if _, err := e.s.PutFile(e.ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	names := func(fs []workspace.File) string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Workspace+":"+f.Path+"="+string(f.Content))
		}
		return fmt.Sprint(out)
	}
	for _, tc := range []struct{ ws, global, own string }{
		{"acme", "[global:INSTRUCTIONS.md=g rules global:USER.md=g user]", "[acme:INDEX.md=a index acme:skills/s/SKILL.md=a skill]"},
		{workspace.Global, "[global:INSTRUCTIONS.md=g rules global:USER.md=g user]", "[]"},
		{"ghost", "[global:INSTRUCTIONS.md=g rules global:USER.md=g user]", "[]"},
	} {
		g, o, err := e.s.ListSurface(e.ctx, tc.ws)
		if err != nil {
			t.Fatalf("list surface of %s: %v", tc.ws, err)
		}
		if names(g) != tc.global || names(o) != tc.own {
			t.Errorf("surface of %s = %s + %s, want %s + %s", tc.ws, names(g), names(o), tc.global, tc.own)
		}
	}
	_, _, err := e.s.ListSurface(e.ctx, "Bad Name")
	wantCode(t, err, molt.EINVALID)
}
