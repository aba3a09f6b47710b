// Package apptest runs a molt for tests as `molt serve` does: an App on the
// local backend (SQLite in a directory) whose API, tick and workers serve on
// a loopback port until the test ends.
package apptest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Options tune Serve; zero fields take the defaults.
type Options struct {
	Clock      molt.Clock    // default the system clock
	AdminToken string        // default a new secret
	Logger     *slog.Logger  // default discards the App's logs
	Tick       time.Duration // the maintenance pass's interval (default serve's)
}

// Serve opens an App on cfg (the local backend in cfg.DataDir) and serves it
// on 127.0.0.1, recovering its data directory's claims first. It returns the
// base URL, the App and stop, which shuts it down and closes the App once (a
// cleanup calls it too).
func Serve(t testing.TB, cfg app.Config, o Options) (base string, a *app.App, stop func()) {
	t.Helper()
	cfg.Backend = app.BackendLocal
	clock := o.Clock
	if clock == nil {
		clock = molt.SystemClock{}
	}
	if o.AdminToken == "" {
		o.AdminToken = auth.NewSecret()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ids := &molt.SortableIDs{Clock: clock}
	d, err := localbackend.Open(cfg, clock, ids)
	if err != nil {
		t.Fatal(err)
	}
	d.Clock, d.IDs = clock, ids
	a = app.New(cfg, d, o.Logger)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", Tick: o.Tick, AdminToken: o.AdminToken, Recover: true,
			Ready: func(addr string) { ready <- addr }})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; _ = a.Close() }) }
	t.Cleanup(stop)
	select {
	case addr := <-ready:
		base = "http://" + addr
	case <-done:
		t.Fatal("molt serve ended before it listened")
	}
	return base, a, stop
}

// Remote is Serve of a molt with a workspace acme, for a supervisor or a
// delegation to call: its base URL, a full token of it and the App.
func Remote(t testing.TB, cfg app.Config) (base, token string, a *app.App) {
	t.Helper()
	base, a, _ = Serve(t, cfg, Options{})
	if _, _, err := a.Store.PutWorkspace(context.Background(), workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	token, _, err := a.CreateToken(context.Background(), auth.Full, "", "supervisor")
	if err != nil {
		t.Fatal(err)
	}
	return base, token, a
}
