package localbackend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
)

// sleepyModel answers every request after a fixed delay, like a slow provider.
type sleepyModel struct{ delay time.Duration }

func (m sleepyModel) Name() string { return "sleepy" }

func (m sleepyModel) Generate(ctx context.Context, _ model.Request) (model.Response, error) {
	select {
	case <-time.After(m.delay):
		return model.Response{Text: "slow reply"}, nil
	case <-ctx.Done():
		return model.Response{}, model.Fail(model.ReasonTimeout, "cancelled", ctx.Err())
	}
}

// BenchmarkSlowModelReplies measures chat throughput on `molt serve`'s real
// wiring (HTTP API, in-process queues, consumers as wide as the budget,
// SQLite) with a model that takes 0.5 s per answer: 20 sessions post a
// message, wait for its reply and post the next, with MOLT_TURN_BUDGET 16.
// The ideal is budget/delay = 32 replies/s; it reports replies/s and the ratio
// to that ideal.
func BenchmarkSlowModelReplies(b *testing.B) {
	const (
		sessions = 20
		budget   = 16
		delay    = 500 * time.Millisecond
	)
	cfg := app.ConfigFromEnv(nil)
	cfg.DataDir = b.TempDir()
	cfg.Chat.Budget = budget
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	d, err := localbackend.Open(cfg, clock, ids)
	if err != nil {
		b.Fatal(err)
	}
	d.Clock, d.IDs, d.Model = clock, ids, sleepyModel{delay: delay}
	a := app.New(cfg, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- a.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", Tick: time.Hour, Out: io.Discard,
			Ready: func(addr string) { ready <- addr }})
	}()
	base := "http://" + <-ready
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, "admin-token"))
	if err != nil {
		b.Fatal(err)
	}
	admin := strings.TrimSpace(string(secret))
	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if code, body := call("PUT", "/api/workspaces/acme", ""); code != 201 {
		b.Fatalf("workspace: %d %s", code, body)
	}
	sids := make([]string, sessions)
	for i := range sids {
		code, body := call("POST", "/api/workspaces/acme/sessions", `{"agent":"main"}`)
		var s struct{ ID string }
		if code != 201 || json.Unmarshal(body, &s) != nil {
			b.Fatalf("session: %d %s", code, body)
		}
		sids[i] = s.ID
	}
	// replies waits until session sid holds n assistant replies.
	replies := func(sid string, n int) {
		deadline := time.Now().Add(time.Minute)
		for {
			_, body := call("GET", "/api/sessions/"+sid+"/messages?after=0", "")
			if strings.Count(string(body), `"role":"assistant"`) >= n {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("session %s: no reply %d", sid, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	rounds := 3
	b.ResetTimer()
	var total int
	var elapsed time.Duration
	for b.Loop() {
		start := time.Now()
		var wg sync.WaitGroup
		for _, sid := range sids {
			wg.Go(func() {
				for r := 0; r < rounds; r++ {
					if code, body := call("POST", "/api/sessions/"+sid+"/messages", fmt.Sprintf(`{"text":"message %d"}`, r)); code != 202 {
						b.Errorf("post: %d %s", code, body)
						return
					}
					_, body := call("GET", "/api/sessions/"+sid+"/messages?after=0", "")
					replies(sid, strings.Count(string(body), `"role":"user"`))
				}
			})
		}
		wg.Wait()
		elapsed += time.Since(start)
		total += sessions * rounds
	}
	b.StopTimer()
	perSec := float64(total) / elapsed.Seconds()
	ideal := float64(budget) / delay.Seconds()
	b.ReportMetric(perSec, "replies/s")
	b.ReportMetric(perSec/ideal, "ratio-to-ideal")
	b.Logf("%d replies in %v: %.1f replies/s with a %v model, %d sessions, budget %d (ideal %.0f/s, ratio %.2f)",
		total, elapsed.Round(time.Millisecond), perSec, delay, sessions, budget, ideal, perSec/ideal)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
