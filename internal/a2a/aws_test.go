package a2a_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// TestCampaignOnDynamo: the campaign rules hold on the DynamoDB adapter (a
// fresh table on the emulator) through the same conditional writes: one of
// racing claims wins, a takeover after expiry is epoch+1, a stale epoch and
// another controller are refused, a repeated request id answers the
// original, a second send while the first task is pending is refused.
func TestCampaignOnDynamo(t *testing.T) {
	awsCfg := awstest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := awstest.Name("molt-a2a")
	if err := dynamo.CreateTable(ctx, db, table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	clock := molt.NewManualClock(time.Now())
	ids := &molt.SortableIDs{Clock: clock}
	st := dynamo.New(db, table, dynamo.Options{Clock: clock, IDs: ids})
	blobs, err := dirblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// No worker runs: a task sent stays submitted.
	a := app.New(app.Config{Backend: app.BackendAWS, Table: table, Bucket: "unused"},
		app.Deps{Store: st, Blobs: blobs, Queue: memqueue.New(), Clock: clock, IDs: ids}, nil)
	if _, _, err := st.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatalf("put workspace: %v", err)
	}
	admin, _, err := a.CreateToken(ctx, auth.Full, "", "admin")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.HTTPHandler())
	t.Cleanup(srv.Close)
	e := &env{t: t, base: srv.URL, admin: admin, app: a}
	other := e.token(auth.Workspace)

	const n = 6
	won := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := e.call(admin, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-" + string(rune('a'+i)),
				"leaseSeconds": 30, "requestId": "claim-" + string(rune('a'+i))})
			won[i] = r.Error == nil
			if r.Error != nil && r.Error.Code != -32015 {
				t.Errorf("claim refused with %d, want -32015", r.Error.Code)
			}
		})
	}
	wg.Wait()
	winner := -1
	for i, w := range won {
		if w {
			if winner >= 0 {
				t.Fatalf("claims %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no claim won")
	}
	ctl := "sup-" + string(rune('a'+winner))
	r := e.call(admin, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": ctl, "leaseSeconds": 30,
		"requestId": "claim-" + string(rune('a'+winner))})
	if got := decode[leaseRes](t, r); r.Error != nil || got.Epoch != 1 || got.Controller != ctl {
		t.Errorf("repeated winning claim: %s %+v", r.Result, r.Error)
	}
	wantCode(t, "renew at a stale epoch", e.call(admin, true, "campaign/renew",
		map[string]any{"campaignId": "c1", "controller": ctl, "epoch": 0, "requestId": "renew-0"}), -32010)
	wantCode(t, "renew by another controller", e.call(other, true, "campaign/renew",
		map[string]any{"campaignId": "c1", "controller": ctl, "epoch": 1, "requestId": "renew-x"}), -32012)

	send := func(token, controller string, epoch int, req string) rpcResp {
		return e.call(token, true, "SendMessage", map[string]any{"message": userMsg("go", nil),
			"configuration": map[string]any{"returnImmediately": true}, "metadata": control("c1", controller, epoch, req, nil)})
	}
	r = send(admin, ctl, 1, "send-1")
	wantOK(t, "send", r)
	first := decode[struct{ Task wireTask }](t, r).Task
	wantCode(t, "a second send while the task is submitted", send(admin, ctl, 1, "send-2"), -32014)
	r = send(admin, ctl, 1, "send-1")
	if again := decode[struct{ Task wireTask }](t, r).Task; r.Error != nil || again.ID != first.ID {
		t.Errorf("repeated send: %s %+v, want task %s", r.Result, r.Error, first.ID)
	}

	clock.Advance(31 * time.Second)
	wantCode(t, "send after the lease expired", send(admin, ctl, 1, "send-3"), -32011)
	r = e.call(other, true, "campaign/claim", map[string]any{"campaignId": "c1", "controller": "sup-z", "requestId": "claim-z"})
	if got := decode[leaseRes](t, r); r.Error != nil || got.Epoch != 2 {
		t.Errorf("claim after expiry: %s %+v, want epoch 2", r.Result, r.Error)
	}
	wantCode(t, "the old controller after the takeover", send(admin, ctl, 1, "send-4"), -32012)
	wantCode(t, "the new controller at the old epoch", send(other, "sup-z", 1, "send-5"), -32010)
}
