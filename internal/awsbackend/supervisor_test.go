package awsbackend_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/apptest"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// remoteMolt runs a second molt (molt serve's wiring, SQLite) on loopback
// with a workspace acme; it returns its base URL and a full token of it.
func remoteMolt(t *testing.T) (base, token string) {
	t.Helper()
	base, token, _ = apptest.Remote(t, app.Config{DataDir: t.TempDir(), A2AWait: 5 * time.Second})
	return base, token
}

// TestSupervisorOnAWS: the supervisor on the aws backend's adapters (DynamoDB,
// SQS and Secrets Manager on the emulator) with the Lambda functions' guarded
// client, loopback allowed explicitly, controls a campaign on a second molt
// over real A2A: claim, submit, the task observed to completion (one
// ATTEMPT_COMPLETED, one MISSION_COMPLETED), release. The token, read from
// Secrets Manager, is nowhere in the table.
func TestSupervisorOnAWS(t *testing.T) {
	t.Parallel()
	awsCfg := awstest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base, token := remoteMolt(t)

	cfg := app.Config{Backend: app.BackendAWS, Table: awstest.Name("molt"), Bucket: awstest.Name("molt-art"), Queues: map[string]string{}}
	var out bytes.Buffer
	if err := awsbackend.Bootstrap(ctx, cfg, app.Kinds(), &out); err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(k, app.EnvQueuePrefix) {
			cfg.Queues[strings.ToLower(strings.TrimPrefix(k, app.EnvQueuePrefix))] = v
		}
	}
	prefix := "molt/" + cfg.Table + "/remotes/"
	sm := secretsmanager.NewFromConfig(awsCfg)
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "peer"),
		SecretString: aws.String(token)}); err != nil {
		t.Fatal(err)
	}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	d, err := awsbackend.Open(ctx, cfg, clock, ids)
	if err != nil {
		t.Fatal(err)
	}
	d.Clock, d.IDs = clock, ids
	tokens, schemes := awsbackend.RemoteTokens(awsCfg, true)
	d.RemoteToken = tokens.Token
	d.RemoteHTTP = awsbackend.RemoteHTTP(func(a netip.Addr) bool { return a.IsLoopback() })
	cfg.Supervisor = supervisor.Config{TokenSchemes: schemes, SecretPrefix: prefix, Tick: 2 * time.Second}
	a := app.New(cfg, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer a.Close()
	if _, _, err := a.Store.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	admin := auth.Caller{Token: auth.Token{Level: auth.Full}}
	sup := a.Supervisor
	c, err := sup.Create(ctx, admin, supervisor.Input{Name: "peer", Workspace: "acme", Mission: "say hello",
		Remote:           supervisor.Remote{CardURL: base + "/a2a/acme/main/.well-known/agent-card.json", TokenRef: "secretsmanager:" + prefix + "peer"},
		HeartbeatSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	pass := func() supervisor.Campaign {
		t.Helper()
		if err := sup.Handle(ctx, queue.Message{Kind: string(supervisor.KindCampaign), ID: c.ID}); err != nil {
			t.Fatalf("pass: %v", err)
		}
		got, err := sup.Get(ctx, admin, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if c = pass(); c.Capabilities == nil || !c.Capabilities.Control {
		t.Fatalf("capabilities %+v (unavailable %q), want control", c.Capabilities, c.Unavailable)
	}
	if _, err := sup.Control(ctx, admin, c.ID, supervisor.ActionClaim); err != nil {
		t.Fatal(err)
	}
	if c = pass(); c.Mode != supervisor.ModeController || c.Epoch != 1 {
		t.Fatalf("after claim: mode %s epoch %d", c.Mode, c.Epoch)
	}
	if _, err := sup.Submit(ctx, admin, c.ID, "hello there"); err != nil {
		t.Fatal(err)
	}
	if c = pass(); c.TaskID == "" || c.AttemptsUsed != 1 {
		t.Fatalf("after submit: task %q attempts %d", c.TaskID, c.AttemptsUsed)
	}
	for deadline := time.Now().Add(30 * time.Second); c.State != supervisor.StateCompleted && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		c = pass()
	}
	if c.State != supervisor.StateCompleted {
		t.Fatalf("state %s (task %s), want completed", c.State, c.TaskState)
	}
	// The completed attempt's decision (the offline model's finish, approved
	// by the reviewer) runs on the decision worker; the next pass carries it out.
	for range 10 {
		pg, err := a.Store.ListItems(ctx, work.ListQuery{Kind: supervisor.KindDecision, Status: work.StatusPending, Oldest: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Items) == 0 {
			break
		}
		for _, it := range pg.Items {
			if err := sup.Decider().Handle(ctx, queue.Message{Kind: string(supervisor.KindDecision), ID: it.ID}); err != nil {
				t.Fatalf("decision %s: %v", it.ID, err)
			}
		}
	}
	if c = pass(); c.State != supervisor.StateFinished {
		t.Fatalf("state %s after the decisions, want finished", c.State)
	}
	if _, err := sup.Control(ctx, admin, c.ID, supervisor.ActionRelease); err != nil {
		t.Fatal(err)
	}
	if c = pass(); c.Mode != supervisor.ModeObserver {
		t.Errorf("after release: mode %s", c.Mode)
	}
	evs, err := sup.Events(ctx, admin, c.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	if n[supervisor.EventAttemptCompleted] != 1 || n[supervisor.EventMissionCompleted] != 1 || n[supervisor.EventControlChanged] != 2 {
		t.Errorf("events %v: want one ATTEMPT_COMPLETED, one MISSION_COMPLETED, two CONTROL_CHANGED", n)
	}
	for _, k := range []work.Kind{supervisor.KindCampaign, supervisor.KindEvent, supervisor.KindDecision} {
		pg, err := a.Store.ListItems(ctx, work.ListQuery{Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range pg.Items {
			if strings.Contains(string(it.Data), token) {
				t.Errorf("%s %s holds the remote's token", k, it.ID)
			}
		}
	}
}
