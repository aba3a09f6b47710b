package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/workspace"
)

func file(ws, path, content string) workspace.File {
	return workspace.File{Workspace: ws, Path: path, Content: []byte(content)}
}

func (e *env) putWorkspace(name string) workspace.Workspace {
	e.t.Helper()
	w, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: name})
	if err != nil {
		e.t.Fatalf("put workspace %s: %v", name, err)
	}
	return w
}

func testWorkspaces(t *testing.T, open Opener) {
	e := setup(t, open)
	w, created, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme", Description: "first"})
	if err != nil || !created || w.Name != "acme" || !w.CreatedAt.Equal(epoch) {
		t.Fatalf("create = %+v %v %v", w, created, err)
	}
	e.clock.Advance(time.Minute)
	w, created, err = e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: "acme", Description: "second"})
	if err != nil || created || !w.CreatedAt.Equal(epoch) || !w.UpdatedAt.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("update = %+v %v %v, want created_at kept", w, created, err)
	}
	got, err := e.s.GetWorkspace(e.ctx, "acme")
	if err != nil || got.Description != "second" {
		t.Fatalf("get = %+v %v", got, err)
	}
	for _, bad := range []string{"", "Acme", "-x", "a b", "../x", strings.Repeat("a", 64), workspace.Global} {
		if _, _, err := e.s.PutWorkspace(e.ctx, workspace.Workspace{Name: bad}); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("put workspace %q: %v, want invalid", bad, err)
		}
	}
	_, err = e.s.GetWorkspace(e.ctx, "nope")
	wantCode(t, err, molt.ENOTFOUND)

	for _, n := range []string{"b1", "b2", "b3", "b4"} {
		e.clock.Advance(time.Second)
		e.putWorkspace(n)
	}
	var names []string
	cursor := ""
	for {
		pg, err := e.s.ListWorkspaces(e.ctx, page.Query{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range pg.Items {
			names = append(names, w.Name)
		}
		if pg.Next == "" {
			break
		}
		cursor = pg.Next
	}
	if strings.Join(names, ",") != "b4,b3,b2,b1,acme" {
		t.Fatalf("workspaces newest first = %v", names)
	}

	if _, err := e.s.PutFile(e.ctx, file("acme", "INSTRUCTIONS.md", "x")); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteWorkspace(e.ctx, "acme"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = e.s.GetWorkspace(e.ctx, "acme")
	wantCode(t, err, molt.ENOTFOUND)
	if files, err := e.s.ListFiles(e.ctx, "acme"); err != nil || len(files) != 0 {
		t.Fatalf("files after delete = %d %v", len(files), err)
	}
	wantCode(t, e.s.DeleteWorkspace(e.ctx, "acme"), molt.ENOTFOUND)
}

func testFiles(t *testing.T, open Opener) {
	e := setup(t, open)
	e.putWorkspace("acme")
	f, err := e.s.PutFile(e.ctx, file("acme", "agents/main/AGENT.md", "be brief"))
	if err != nil {
		t.Fatal(err)
	}
	// sha256("be brief")
	if f.Size != 8 || f.SHA256 != workspace.NewFile("", "", []byte("be brief"), time.Time{}).SHA256 {
		t.Fatalf("file meta = %+v", f)
	}
	got, err := e.s.GetFile(e.ctx, "acme", "agents/main/AGENT.md")
	if err != nil || string(got.Content) != "be brief" || got.SHA256 != f.SHA256 {
		t.Fatalf("get = %+v %v", got, err)
	}
	if _, err := e.s.PutFile(e.ctx, file("acme", "agents/main/AGENT.md", "be briefer")); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.GetFile(e.ctx, "acme", "agents/main/AGENT.md"); string(got.Content) != "be briefer" {
		t.Fatalf("overwrite kept %q", got.Content)
	}
	// Global surface always exists.
	if _, err := e.s.PutFile(e.ctx, file(workspace.Global, "INSTRUCTIONS.md", "global rules")); err != nil {
		t.Fatalf("global put: %v", err)
	}
	// Unknown workspace.
	_, err = e.s.PutFile(e.ctx, file("ghost", "INSTRUCTIONS.md", "x"))
	wantCode(t, err, molt.ENOTFOUND)

	// Bad input: clear errors, nothing written.
	bad := []string{"", "../x", "/abs", "a//b", "INSTRUCTIONS.md/../x", "agents/../USER.md", "secrets.txt",
		"etc/passwd", "agents/main", "prompts/other/x.md", "prompts/all/x.txt", "agents/main/./AGENT.md", "agents\\main\\AGENT.md",
		"agents/main/AGENT.md\x00", ".git/config", "skills/.hidden/SKILL.md"}
	for _, p := range bad {
		_, err := e.s.PutFile(e.ctx, file("acme", p, "evil"))
		if molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("put %q: %v, want invalid", p, err)
		}
	}
	_, err = e.s.PutFile(e.ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: bytes.Repeat([]byte("x"), workspace.MaxFileSize+1)})
	wantCode(t, err, molt.ETOOLARGE)
	files, err := e.s.ListFiles(e.ctx, "acme")
	if err != nil || len(files) != 1 || files[0].Path != "agents/main/AGENT.md" || string(files[0].Content) != "be briefer" {
		t.Fatalf("files after bad input = %+v %v, want only agents/main/AGENT.md", files, err)
	}
	if _, err := e.s.GetFile(e.ctx, "acme", "../x"); molt.ErrorCode(err) != molt.EINVALID {
		t.Fatalf("get ../x: %v, want invalid", err)
	}
	if err := e.s.DeleteFile(e.ctx, "acme", "agents/main/AGENT.md"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.s.DeleteFile(e.ctx, "acme", "agents/main/AGENT.md"), molt.ENOTFOUND)
	if _, err := e.s.GetFile(e.ctx, "acme", "agents/main/AGENT.md"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("deleted file still there: %v", err)
	}
	// Files of one workspace are not visible in another.
	e.putWorkspace("other")
	if fs, _ := e.s.ListFiles(e.ctx, "other"); len(fs) != 0 {
		t.Fatalf("other workspace sees %d files", len(fs))
	}
}

func testTokens(t *testing.T, open Opener) {
	e := setup(t, open)
	secret, tok, err := auth.New(auth.Workspace, "acme", "ci", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.PutToken(e.ctx, tok); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.s.PutToken(e.ctx, tok), molt.ECONFLICT)
	got, err := e.s.TokenByHash(e.ctx, auth.Hash(secret))
	if err != nil || got.Level != auth.Workspace || got.Workspace != "acme" || got.Hash != tok.Hash || got.ID != tok.ID {
		t.Fatalf("token = %+v %v", got, err)
	}
	_, err = e.s.TokenByHash(e.ctx, auth.Hash("molt_unknown"))
	wantCode(t, err, molt.ENOTFOUND)
}

func testSettings(t *testing.T, open Opener) {
	e := setup(t, open)
	s, err := e.s.GetSettings(e.ctx)
	if err != nil || s != settings.Default() {
		t.Fatalf("initial settings = %+v %v, want defaults", s, err)
	}
	s.Evolution.Level = settings.L2
	s.Evolution.MaxConcurrentRun = 4
	if err := e.s.PutSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.GetSettings(e.ctx); got != s {
		t.Fatalf("settings = %+v, want %+v", got, s)
	}
	bad := s
	bad.Evolution.MaxAttempts = 0
	err = e.s.PutSettings(e.ctx, bad)
	wantCode(t, err, molt.EINVALID)
	if got, _ := e.s.GetSettings(e.ctx); got != s {
		t.Fatal("invalid settings were saved")
	}
}
