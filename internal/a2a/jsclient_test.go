package a2a_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/chat"
)

// TestJSSDKInterop runs testdata/jsclient/client.mjs, the official
// @a2a-js/sdk 1.3.0 client (A2A v1.0), against molt serve: card from the
// base URL, blocking and non-blocking send, get with history, list, cancel
// (of a running task too), subscribe and streaming. The first task molt runs
// is held until the test ends, so the script can cancel it while it works.
// `make test` installs the modules (npm ci); under CI=true a missing node or
// missing modules fail the test instead of skipping it.
func TestJSSDKInterop(t *testing.T) {
	dir := filepath.Join("testdata", "jsclient")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the JS SDK interop needs node and %s/node_modules (make test runs npm ci there): %v", dir, err)
		}
		t.Skipf("no node or no %s/node_modules (run make test, or npm ci there): %v", dir, err)
	}
	hold := make(chan struct{})
	held := make(chan string, 1)
	e := setupWith(t, func(tc chat.TurnContext) error {
		select {
		case held <- tc.Turn.ID:
			<-hold
			return errors.New("held")
		default:
			return nil
		}
	})
	defer close(hold)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MOLT_API="+e.base, "MOLT_AGENT=acme/main", "MOLT_TOKEN="+e.admin)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	oks := 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "ok "):
			oks++
		case strings.HasPrefix(l, "FAIL "):
			t.Error(l)
		}
	}
	if err != nil || oks == 0 {
		t.Errorf("node client.mjs: %v\n%s", err, out)
	}
	t.Logf("%d checks passed", oks)
}
