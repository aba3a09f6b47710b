package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/faults"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/workspace"
)

// afterMetaWrite runs hook once, right after the first write of a workspace's
// META item through it: the moment a DeleteWorkspace has taken the workspace
// away and starts cleaning up its partition.
type afterMetaWrite struct {
	dynamo.API
	once sync.Once
	hook func()
}

func isMeta(k map[string]types.AttributeValue) bool {
	pk, _ := k["pk"].(*types.AttributeValueMemberS)
	sk, _ := k["sk"].(*types.AttributeValueMemberS)
	return pk != nil && sk != nil && pk.Value == "WS#acme" && sk.Value == "META"
}

func (a *afterMetaWrite) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := a.API.UpdateItem(ctx, in, o...)
	if isMeta(in.Key) {
		a.once.Do(a.hook)
	}
	return out, err
}

func (a *afterMetaWrite) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := a.API.DeleteItem(ctx, in, o...)
	if isMeta(in.Key) {
		a.once.Do(a.hook)
	}
	return out, err
}

// TestDeleteWorkspaceRacingRecreate: the DynamoDB adapter deletes a workspace's
// partition in several requests after the workspace itself. A workspace of the
// same name created (and written to) meanwhile must not lose what was written to
// it: every write made during the clean-up is either refused or survives it, and
// the surface's file counter matches its files.
func TestDeleteWorkspaceRacingRecreate(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clock := molt.NewManualClock(epoch)
	ids := &molt.SortableIDs{Clock: clock}
	other := dynamo.New(client, table, dynamo.Options{Clock: clock, IDs: ids})
	if _, _, err := other.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"USER.md", "INDEX.md"} {
		if _, err := other.PutFile(ctx, workspace.File{Workspace: "acme", Path: p, Content: []byte("old " + p)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.CreateSession(ctx, session.Session{Workspace: "acme", Agent: "main", Access: session.AccessFull}); err != nil {
		t.Fatal(err)
	}

	var (
		recreated  bool
		keptFiles  []string
		keptSess   string
		hookErrors []error
	)
	api := &afterMetaWrite{API: client}
	api.hook = func() {
		clock.Advance(time.Second)
		if _, _, err := other.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err == nil {
			recreated = true
		} else if molt.ErrorCode(err) != molt.ECONFLICT {
			hookErrors = append(hookErrors, err)
		}
		for _, p := range []string{"USER.md", "INSTRUCTIONS.md"} {
			if _, err := other.PutFile(ctx, workspace.File{Workspace: "acme", Path: p, Content: []byte("new " + p)}); err == nil {
				keptFiles = append(keptFiles, p)
			} else if molt.ErrorCode(err) != molt.ENOTFOUND {
				hookErrors = append(hookErrors, err)
			}
		}
		if ss, err := other.CreateSession(ctx, session.Session{Workspace: "acme", Agent: "main", Access: session.AccessFull}); err == nil {
			keptSess = ss.ID
		} else if molt.ErrorCode(err) != molt.ENOTFOUND {
			hookErrors = append(hookErrors, err)
		}
	}
	deleter := dynamo.New(api, table, dynamo.Options{Clock: clock, IDs: ids})
	if err := deleter.DeleteWorkspace(ctx, "acme"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if len(hookErrors) > 0 {
		t.Fatalf("writes during the clean-up failed oddly: %v", hookErrors)
	}
	t.Logf("during the clean-up: re-created %v, files written %v, session %q", recreated, keptFiles, keptSess)

	files, err := other.ListFiles(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = string(f.Content)
	}
	for _, p := range keptFiles {
		if got[p] != "new "+p {
			t.Errorf("file %s written to the re-created workspace during the clean-up: %q after it, want kept", p, got[p])
		}
	}
	for p, c := range got {
		if c == "old "+p {
			t.Errorf("file %s of the deleted workspace survived its deletion", p)
		}
	}
	if keptSess != "" {
		if _, err := other.GetSession(ctx, keptSess); err != nil {
			t.Errorf("session created in the re-created workspace during the clean-up: %v, want kept", err)
		}
	}
	counter, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "WS#acme"}, "sk": &types.AttributeValueMemberS{Value: "FILES"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := "0"
	if v, ok := counter.Item["n"].(*types.AttributeValueMemberN); ok {
		n = v.Value
	}
	if want := len(files); n != strconv.Itoa(want) {
		t.Errorf("file counter %s, want %d (the files there)", n, want)
	}

	// Afterwards the name is free again and the workspace starts empty.
	if _, _, err := other.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatalf("re-create after the delete: %v", err)
	}
	if _, err := other.PutFile(ctx, workspace.File{Workspace: "acme", Path: "INSTRUCTIONS.md"}); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteWorkspaceDiedPartWay: a deletion that stopped after marking the
// workspace leaves it absent to readers and closed to writes; the name is taken
// again only once the deletion is finished, by a second DeleteWorkspace or, when
// the mark is stale (its Lambda surely dead), by PutWorkspace itself.
func TestDeleteWorkspaceDiedPartWay(t *testing.T) {
	t.Parallel()
	for _, finish := range []string{"delete", "stale"} {
		t.Run(finish, func(t *testing.T) {
			t.Parallel()
			client, table := newTable(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			clock := molt.NewManualClock(epoch)
			ids := &molt.SortableIDs{Clock: clock}
			inj := &faults.Injector{}
			s := dynamo.New(dynamo.WithFaults(client, inj), table, dynamo.Options{Clock: clock, IDs: ids})
			if _, _, err := s.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutFile(ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: []byte("old")}); err != nil {
				t.Fatal(err)
			}
			inj.Next(faults.None, faults.Before) // the mark lands, the first batch of deletes fails
			if err := s.DeleteWorkspace(ctx, "acme"); err == nil {
				t.Fatal("delete with a failed batch reported success")
			}
			wantCode(t, errOnly(s.GetWorkspace(ctx, "acme")), molt.ENOTFOUND)
			if pg, err := s.ListWorkspaces(ctx, page.Query{}); err != nil || len(pg.Items) != 0 {
				t.Fatalf("workspaces being deleted listed: %+v %v", pg.Items, err)
			}
			wantCode(t, errOnly(s.PutFile(ctx, workspace.File{Workspace: "acme", Path: "USER.md", Content: []byte("new")})), molt.ENOTFOUND)
			wantCode(t, errOnly(s.CreateSession(ctx, session.Session{Workspace: "acme", Agent: "main", Access: session.AccessFull})), molt.ENOTFOUND)
			_, _, err := s.PutWorkspace(ctx, workspace.Workspace{Name: "acme"})
			if molt.ErrorReason(err) != dynamo.ReasonDeleting {
				t.Fatalf("re-create while the deletion may still run: %v, want %s", err, dynamo.ReasonDeleting)
			}
			switch finish {
			case "delete":
				wantCode(t, s.DeleteWorkspace(ctx, "acme"), molt.ENOTFOUND)
			case "stale":
				clock.Advance(16 * time.Minute)
			}
			if _, created, err := s.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil || !created {
				t.Fatalf("re-create after the deletion: created %v, %v", created, err)
			}
			if fs, err := s.ListFiles(ctx, "acme"); err != nil || len(fs) != 0 {
				t.Fatalf("re-created workspace has files %+v %v", fs, err)
			}
		})
	}
}

func errOnly[T any](_ T, err error) error { return err }
