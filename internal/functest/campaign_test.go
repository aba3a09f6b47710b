//go:build linux

package functest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/work"
)

// TestCampaignFunctions runs a campaign through the api and the campaign
// worker as deployed: the api refuses a token_ref the deployment cannot read
// (env: on Lambda, a secret outside the stack's prefix) and stores the
// campaign, waking it on the campaign queue; the worker claims the wake-up,
// reads the remote's token from Secrets Manager (the emulator's), and its dial
// guard refuses the loopback card URL, so the pass ends with the remote
// unavailable (one REMOTE_UNAVAILABLE, a safe reason) and the loopback server
// never sees a request. A second wake-up in the same warm environment reads
// the token from its cache: one GetSecretValue in all. The token is nowhere
// in the table, the responses or the functions' output. Every AWS call is
// checked against the functions' policies (the campaign worker's secret grant
// on molt/<stack>/remotes/ included).
func TestCampaignFunctions(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	ctx := context.Background()
	const token = "remote-token-f00d-5ecret"
	secretName := "molt/" + d.stack + "/remotes/peer"
	sm := secretsmanager.NewFromConfig(awstest.Config(t))
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(secretName),
		SecretString: aws.String(token)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(secretName),
			ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	var hits atomic.Int32
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(remote.Close)

	api, _ := d.function(t, "api")
	worker, rec := d.function(t, "campaign-worker")
	call := func(want int, method, path, body string) map[string]any {
		t.Helper()
		return d.api(t, api, want, method, path, body)
	}
	call(http.StatusCreated, "PUT", "/api/workspaces/acme", `{}`)
	// The deep health check reads every queue, the decision queue included.
	if h := call(http.StatusOK, "GET", "/health?deep=1", ""); h["status"] != "ok" {
		t.Errorf("deep health %v, want ok", h)
	}
	campaign := func(ref string) string {
		return fmt.Sprintf(`{"name":"peer","workspace":"acme","mission":"watch","heartbeat_seconds":1,`+
			`"remote":{"card_url":%q,"token_ref":%q}}`, remote.URL+"/.well-known/agent-card.json", ref)
	}
	for _, ref := range []string{"env:OPENAI_API_KEY", "secretsmanager:molt/other/remotes/peer", "vault:peer"} {
		p := call(http.StatusBadRequest, "POST", "/api/campaigns", campaign(ref))
		if p["field"] != "remote.token_ref" {
			t.Errorf("token_ref %s: %v; want a problem naming remote.token_ref", ref, p)
		}
	}
	created := call(http.StatusCreated, "POST", "/api/campaigns", campaign("secretsmanager:"+secretName))
	id, _ := created["id"].(string)
	if created["controller"] != "molt-"+d.stack {
		t.Errorf("controller %v, want molt-%s (MOLT_DEPLOYMENT)", created["controller"], d.stack)
	}

	// The api's wake-up, from the campaign queue, with a malformed record.
	d.work(t, worker, string(supervisor.KindCampaign), id)
	got := call(http.StatusOK, "GET", "/api/campaigns/"+id, "")
	// The guard's refusal is a failed dial: the card is unavailable, for a safe
	// reason of the card's.
	if why, _ := got["unavailable"].(string); !strings.HasPrefix(why, "card_") {
		t.Errorf("campaign after its pass: unavailable %q, want a card_ reason (the dial guard refused loopback)", why)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback remote got %d requests; the guard must refuse it on Lambda", n)
	}

	// A second pass in the same warm environment: the token from the cache.
	body, _ := json.Marshal(map[string]string{"kind": string(supervisor.KindCampaign), "id": id})
	ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "second", Body: string(body),
		EventSource: "aws:sqs", EventSourceARN: d.queueARNs[string(supervisor.KindCampaign)], AWSRegion: "us-east-1"}}})
	time.Sleep(1100 * time.Millisecond) // past the one-second heartbeat
	if failed := batchResponse(t, worker.invoke(t, ev)); len(failed) != 0 {
		t.Fatalf("second wake-up reported %v as failed", failed)
	}
	if reads := rec.count("secretsmanager:GetSecretValue"); reads != 1 {
		t.Errorf("GetSecretValue calls over two passes: %d, want 1 (the warm environment's cache)", reads)
	}
	evs := call(http.StatusOK, "GET", "/api/campaigns/"+id+"/events", "")["items"].([]any)
	var types []string
	for _, e := range evs {
		types = append(types, fmt.Sprint(e.(map[string]any)["type"]))
	}
	if !slices.Equal(types, []string{supervisor.EventRemoteUnavailable}) {
		t.Errorf("events %v; want exactly one %s", types, supervisor.EventRemoteUnavailable)
	}
	// The event woke a decision (created with it): the decision worker claims
	// it and ends it on the offline model, its calls held to its policy.
	decider, _ := d.function(t, "decision-worker")
	d.work(t, decider, string(supervisor.KindDecision), supervisor.DecisionID(id, 1))
	ds := call(http.StatusOK, "GET", "/api/campaigns/"+id+"/decisions", "")["items"].([]any)
	if len(ds) != 1 {
		t.Fatalf("decisions %v, want the REMOTE_UNAVAILABLE's one", ds)
	}
	if out := fmt.Sprint(ds[0].(map[string]any)["outcome"]); out == "pending" || out == "running" || out == "" {
		t.Errorf("the decision after its worker ran: outcome %q, want it ended", out)
	}
	last, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(call(http.StatusOK, "GET", "/api/campaigns/"+id, "")["last_pass"]))
	if first, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(got["last_pass"])); !last.After(first) {
		t.Errorf("last_pass %v not after the first pass's %v: the second wake-up ran no pass", last, first)
	}

	// The token is nowhere: the table, the functions' output.
	for _, k := range []work.Kind{supervisor.KindCampaign, supervisor.KindEvent, supervisor.KindDecision} {
		pg, err := d.store.ListItems(ctx, work.ListQuery{Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range pg.Items {
			if strings.Contains(string(it.Data), token) {
				t.Errorf("%s %s holds the remote's token", k, it.ID)
			}
		}
	}
	for name, e := range map[string]*emulator{"api": api, "campaign-worker": worker, "decision-worker": decider} {
		if strings.Contains(e.log.String(), token) {
			t.Errorf("the %s function's output holds the remote's token", name)
		}
	}
}

// count returns how many calls needed action.
func (r *recorder) count(action string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c.Action == action {
			n++
		}
	}
	return n
}
