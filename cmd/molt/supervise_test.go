package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveProcess starts `molt serve` on dir and addr (startServe) with the
// offline model and env added; it returns the process, its output and its
// admin token once it answers.
func serveProcess(t *testing.T, dir, addr string, env ...string) (*exec.Cmd, *syncBuffer, string) {
	t.Helper()
	cmd, out := startServe(t, dir, addr, append([]string{"MOLT_MODEL=offline"}, env...)...)
	waitHealthy(t, "http://"+addr, out)
	secret, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, out, strings.TrimSpace(string(secret))
}

type campaignView struct {
	ID           string `json:"id"`
	Mode         string `json:"mode"`
	Epoch        int    `json:"epoch"`
	State        string `json:"state"`
	Capabilities *struct {
		Control bool `json:"control"`
	} `json:"capabilities"`
}

// TestTwoServesSupervise is the supervisor's check on two real `molt serve`
// processes on loopback: the first supervises a campaign on the second
// through its card URL; it claims control, submits, sees the task complete as
// exactly one ATTEMPT_COMPLETED and, once its decision (the offline model's
// finish, approved) is carried out, one MISSION_COMPLETED, and releases; it
// claims again, and while it is stopped (SIGSTOP) past its lease another
// controller claims the remote's campaign: resumed, the first becomes an
// observer with exactly one more CONTROL_CHANGED. The remote's token appears
// nowhere in the first's store, output or responses.
func TestTwoServesSupervise(t *testing.T) {
	if testing.Short() {
		t.Skip("starts molt serve processes")
	}
	remoteDir, remoteAddr := t.TempDir(), freeAddr(t)
	_, remoteOut, remoteAdmin := serveProcess(t, remoteDir, remoteAddr)
	remote := "http://" + remoteAddr
	if code, _, body := call(t, "PUT", remote+"/api/workspaces/acme", remoteAdmin, ""); code != 201 {
		t.Fatalf("remote workspace = %d %s", code, body)
	}
	supDir, supAddr := t.TempDir(), freeAddr(t)
	sup, supOut, admin := serveProcess(t, supDir, supAddr, "REMOTE_TOKEN="+remoteAdmin)
	base := "http://" + supAddr
	var responses strings.Builder
	api := func(method, path, body string, want int) string {
		t.Helper()
		code, _, got := call(t, method, base+path, admin, body)
		responses.WriteString(got)
		if code != want {
			t.Fatalf("%s %s = %d %s, want %d\nsupervisor:\n%s", method, path, code, got, want, supOut.String())
		}
		return got
	}
	if code, _, body := call(t, "PUT", base+"/api/workspaces/acme", admin, ""); code != 201 {
		t.Fatalf("workspace = %d %s", code, body)
	}
	var c campaignView
	created := api("POST", "/api/campaigns", `{"name":"hello","workspace":"acme","mission":"say hello",`+
		`"remote":{"card_url":"`+remote+`/a2a/acme/main/.well-known/agent-card.json","token_ref":"env:REMOTE_TOKEN"},`+
		`"heartbeat_seconds":1,"lease_seconds":4}`, 201)
	if err := json.Unmarshal([]byte(created), &c); err != nil || c.ID == "" {
		t.Fatalf("created %s: %v", created, err)
	}
	path := "/api/campaigns/" + c.ID
	wait := func(what string, ok func(campaignView) bool) campaignView {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got campaignView
			if err := json.Unmarshal([]byte(api("GET", path, "", 200)), &got); err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: campaign %+v\nsupervisor:\n%s\nremote:\n%s", what, got, supOut.String(), remoteOut.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	events := func() map[string]int {
		t.Helper()
		var evs struct {
			Items []struct {
				Type string `json:"type"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(api("GET", path+"/events?after=0", "", 200)), &evs); err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, e := range evs.Items {
			n[e.Type]++
		}
		return n
	}

	wait("the card read", func(c campaignView) bool { return c.Capabilities != nil && c.Capabilities.Control })
	api("POST", path+"/control", `{"action":"claim"}`, 202)
	wait("control claimed", func(c campaignView) bool { return c.Mode == "controller" && c.Epoch == 1 })
	api("POST", path+"/submit", `{"text":"say hello to the team"}`, 202)
	wait("the mission finished", func(c campaignView) bool { return c.State == "finished" })
	deadline := time.Now().Add(30 * time.Second)
	for events()["MISSION_COMPLETED"] == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a heartbeat more: nothing is repeated
	if n := events(); n["ATTEMPT_COMPLETED"] != 1 || n["MISSION_COMPLETED"] != 1 || n["CONTROL_CHANGED"] != 1 {
		t.Fatalf("events %v: want one ATTEMPT_COMPLETED, one MISSION_COMPLETED, one CONTROL_CHANGED", n)
	}
	api("POST", path+"/control", `{"action":"release"}`, 202)
	wait("control released", func(c campaignView) bool { return c.Mode == "observer" })

	// Claimed again (epoch 2), then stopped past its 4 s lease while another
	// controller claims the remote's campaign (epoch 3).
	api("POST", path+"/control", `{"action":"claim"}`, 202)
	wait("control claimed again", func(c campaignView) bool { return c.Mode == "controller" && c.Epoch == 2 })
	before := events()["CONTROL_CHANGED"]
	if err := sup.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4500 * time.Millisecond)
	code, body := claimAs(t, remote+"/a2a/acme/main", remoteAdmin, c.ID, "intruder")
	if err := sup.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code != 200 || !strings.Contains(body, `"epoch":3`) {
		t.Fatalf("the other controller's claim = %d %s", code, body)
	}
	wait("control lost", func(c campaignView) bool { return c.Mode == "observer" })
	time.Sleep(1500 * time.Millisecond) // a heartbeat more: the loss is recorded once
	if got := events()["CONTROL_CHANGED"] - before; got != 1 {
		t.Errorf("CONTROL_CHANGED events after the other controller's claim: %d, want 1", got)
	}

	// The remote's token: not in the supervisor's store, output or responses.
	if strings.Contains(responses.String(), remoteAdmin) {
		t.Errorf("a response of the supervisor holds the remote's token")
	}
	if strings.Contains(supOut.String(), remoteAdmin) {
		t.Errorf("the supervisor's output holds the remote's token")
	}
	err := filepath.WalkDir(supDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), remoteAdmin) {
			return fmt.Errorf("%s holds the remote's token", filepath.Base(p))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// claimAs calls campaign/claim on the A2A endpoint as controller.
func claimAs(t *testing.T, endpoint, token, campaign, controller string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"campaign/claim",`+
		`"params":{"campaignId":"`+campaign+`","controller":"`+controller+`","requestId":"`+controller+`-1","leaseSeconds":600}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("A2A-Extensions", "https://github.com/molt-dev/molt/a2a/ext/campaign-control/v1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
