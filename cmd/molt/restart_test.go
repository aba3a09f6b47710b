package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// childEnv, when set, makes the test binary run `molt serve` with the
// arguments in MOLT_TEST_ARGS instead of the tests: a real process the test
// can SIGKILL.
const childEnv = "MOLT_TEST_CHILD_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		args := strings.Split(os.Getenv("MOLT_TEST_ARGS"), "\x1f")
		err := run(context.Background(), args, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "molt:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeOpenAI answers chat completions in OpenAI's wire format; while hold is
// set it never answers (the request waits until the client goes away), and
// entered counts the requests that arrived.
type fakeOpenAI struct {
	hold    atomic.Bool
	entered atomic.Int32
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	f.entered.Add(1)
	if f.hold.Load() {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"fake",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"recovered reply"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
}

// startChild starts `molt serve` on dir in a child process.
func startChild(t *testing.T, dir, addr, modelURL string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	return startServe(t, dir, addr, "MOLT_MODEL=openai:fake", "OPENAI_BASE_URL="+modelURL+"/v1",
		"OPENAI_API_KEY=test-key",
		// A turn's claim times out after 10 minutes: a reply within the test's
		// wait can only come from the start-up recovery.
		"MOLT_TURN_TIMEOUT=10m")
}

// startServe starts `molt serve` on dir and addr with a one-second tick in a
// child process, with env added to the test's own environment; the child is
// killed at the test's end.
func startServe(t *testing.T, dir, addr string, env ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1",
		"MOLT_TEST_ARGS="+strings.Join([]string{"serve", "--addr", addr, "--data", dir, "--tick", "1s"}, "\x1f"),
		"MOLT_BACKEND=", "MOLT_ADMIN_TOKEN="), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped child dies only once it runs
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return cmd, out
}

func waitHealthy(t *testing.T, base string, out *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartAfterSIGKILL: `molt serve` is SIGKILLed while its turns wait on
// the model; a second `molt serve` on the same data directory is refused
// while the first runs; after the kill a restart answers every message at
// once — not after the 10-minute claim timeout — each exactly once.
func TestRestartAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts molt serve processes")
	}
	model := &fakeOpenAI{}
	model.hold.Store(true)
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close) // after the children are killed (cleanups run last first)
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	first, out := startChild(t, dir, addr, srv.URL)
	waitHealthy(t, base, out)

	// A second serve on the same data directory is refused, naming the first.
	second := exec.Command(os.Args[0], "-test.run=^$")
	second.Env = append(os.Environ(), childEnv+"=1",
		"MOLT_TEST_ARGS="+strings.Join([]string{"serve", "--addr", freeAddr(t), "--data", dir}, "\x1f"), "MOLT_BACKEND=")
	refusal, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(refusal), "used by another molt serve") ||
		!strings.Contains(string(refusal), fmt.Sprint(first.Process.Pid)) {
		t.Fatalf("a second serve on the same data directory: err %v, output %s", err, refusal)
	}

	secret, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(secret))
	if code, _, body := call(t, "PUT", base+"/api/workspaces/acme", admin, ""); code != 201 {
		t.Fatalf("create workspace = %d %s", code, body)
	}
	const sessions = 3
	var ids []string
	for i := 0; i < sessions; i++ {
		code, _, body := call(t, "POST", base+"/api/workspaces/acme/sessions", admin, `{"agent":"main"}`)
		var s struct{ ID string }
		if code != 201 || json.Unmarshal([]byte(body), &s) != nil {
			t.Fatalf("create session = %d %s", code, body)
		}
		if code, _, body := call(t, "POST", base+"/api/sessions/"+s.ID+"/messages", admin, `{"text":"hello"}`); code != 202 {
			t.Fatalf("post = %d %s", code, body)
		}
		ids = append(ids, s.ID)
	}
	// Every turn is in the model (claimed, its heartbeat fresh) when the
	// process dies.
	deadline := time.Now().Add(20 * time.Second)
	for model.entered.Load() < sessions {
		if time.Now().After(deadline) {
			t.Fatalf("the turns did not reach the model (%d)\n%s", model.entered.Load(), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()

	model.hold.Store(false)
	start := time.Now()
	_, out2 := startChild(t, dir, addr, srv.URL)
	waitHealthy(t, base, out2)
	for _, id := range ids {
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, _, body := call(t, "GET", base+"/api/sessions/"+id+"/messages?after=0", admin, "")
			if n := strings.Count(body, "recovered reply"); n > 0 {
				if n != 1 {
					t.Fatalf("session %s got the reply %d times: %s", id, n, body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s unanswered after the restart:\n%s\n%s", id, body, out2.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("every message answered %v after the restart (claim timeout 10m)", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out2.String(), "recovered the work of the previous run") {
		t.Fatalf("the restart did not log its recovery:\n%s", out2.String())
	}
}
