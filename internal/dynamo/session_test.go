package dynamo_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

func (f *fixture) rawKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
}

func (f *fixture) raw(pk, sk string) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.client.GetItem(f.ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: f.rawKey(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		f.t.Fatalf("raw get %s %s: %v", pk, sk, err)
	}
	return out.Item
}

func (f *fixture) rawDelete(pk, sk string) {
	f.t.Helper()
	if _, err := f.client.DeleteItem(f.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: f.rawKey(pk, sk)}); err != nil {
		f.t.Fatalf("raw delete %s %s: %v", pk, sk, err)
	}
}

// partition counts the items under pk.
func (f *fixture) partition(pk string) int {
	f.t.Helper()
	out, err := f.client.Query(f.ctx, &dynamodb.QueryInput{TableName: aws.String(f.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		ConsistentRead:            aws.Bool(true)})
	if err != nil {
		f.t.Fatalf("raw query %s: %v", pk, err)
	}
	return len(out.Items)
}

func appendOp(id string, seq int, text string) session.AppendMessage {
	return session.AppendMessage{Message: session.Message{SessionID: id, Seq: seq, Role: session.RoleUser, Text: text}}
}

// TestSessionItems checks the item layout doc.go describes, the mapping of a
// failed transaction item back to its op, and the clean-up of messages a
// deletion left behind.
func TestSessionItems(t *testing.T) {
	f := setup(t)
	if _, _, err := f.s.PutWorkspace(f.ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.s.CreateSession(f.ctx, session.Session{ID: "s1", Workspace: "acme", Agent: "main", Access: session.AccessFull})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Commit(f.ctx, appendOp(s.ID, 1, "hello")); err != nil {
		t.Fatal(err)
	}
	meta := f.raw("SESSION#s1", "META")
	if g, ok := meta["gsi1pk"].(*types.AttributeValueMemberS); !ok || g.Value != "SESSIONS#acme" {
		t.Fatalf("session META gsi1pk = %#v, want SESSIONS#acme", meta["gsi1pk"])
	}
	if n, ok := meta["next_seq"].(*types.AttributeValueMemberN); !ok || n.Value != "2" {
		t.Fatalf("session META next_seq = %#v, want 2", meta["next_seq"])
	}
	if m := f.raw("SESSION#s1", "MSG#0000000001"); len(m) == 0 {
		t.Fatal("message 1 is not stored under MSG#0000000001")
	}

	// The second op writes two items (META update and message put); a failing op
	// after it is still named by its op index.
	err = f.s.Commit(f.ctx, appendOp(s.ID, 2, "x"),
		work.UpdateItem{Kind: kind, ID: "missing", Set: work.Set{Status: "done", OpID: "o"}})
	if idx := condIndex(t, err); idx != 1 {
		t.Fatalf("failed op index %d, want 1", idx)
	}
	// A message item in the way (left by an interrupted delete) fails the put's
	// condition, named by the append.
	if _, err := f.client.PutItem(f.ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "SESSION#s1"}, "sk": &types.AttributeValueMemberS{Value: "MSG#0000000002"}}}); err != nil {
		t.Fatal(err)
	}
	err = f.s.Commit(f.ctx, work.CreateItem{Item: f.item("c1")}, appendOp(s.ID, 2, "x"))
	if idx := condIndex(t, err); idx != 1 {
		t.Fatalf("failed op index %d, want 1", idx)
	}
	if _, err := f.s.GetItem(f.ctx, kind, "c1"); molt.ErrorCode(err) != molt.ENOTFOUND {
		t.Fatalf("item of a failed commit: %v", err)
	}
	f.rawDelete("SESSION#s1", "MSG#0000000002")

	// One commit may write at most 100 items: 100 appends are 101.
	ops := make([]work.Op, 100)
	for i := range ops {
		ops[i] = appendOp(s.ID, i+2, "x")
	}
	wantCode(t, f.s.Commit(f.ctx, ops...), molt.EINVALID)

	// A deletion that stopped after META: the messages stay until DeleteSession is
	// called again (ENOTFOUND, leftovers removed) ...
	f.rawDelete("SESSION#s1", "META")
	if n := f.partition("SESSION#s1"); n != 1 {
		t.Fatalf("partition has %d items, want the leftover message", n)
	}
	wantCode(t, f.s.DeleteSession(f.ctx, "s1"), molt.ENOTFOUND)
	if n := f.partition("SESSION#s1"); n != 0 {
		t.Fatalf("partition has %d items after the second delete, want 0", n)
	}
	// ... or until a session is created again under that id.
	if _, err := f.s.CreateSession(f.ctx, session.Session{ID: "s1", Workspace: "acme", Agent: "main", Access: session.AccessFull}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Commit(f.ctx, appendOp("s1", 1, "a"), appendOp("s1", 2, "b")); err != nil {
		t.Fatal(err)
	}
	f.rawDelete("SESSION#s1", "META")
	if _, err := f.s.CreateSession(f.ctx, session.Session{ID: "s1", Workspace: "acme", Agent: "main", Access: session.AccessFull}); err != nil {
		t.Fatalf("create over leftovers: %v", err)
	}
	if err := f.s.Commit(f.ctx, appendOp("s1", 1, "fresh")); err != nil {
		t.Fatalf("append after create over leftovers: %v", err)
	}
	ms, err := f.s.ListMessages(f.ctx, "s1", 0, 10)
	if err != nil || len(ms) != 1 || ms[0].Text != "fresh" {
		t.Fatalf("messages = %+v %v, want just the fresh one", ms, err)
	}
}
