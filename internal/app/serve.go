package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/molt-dev/molt/internal/consumer"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/work"
)

// A worker of `molt serve` takes up to serveBatch ready wake-ups of its kind
// together (their claims in one store round trip, see work.Executor's
// HandleBatch), waiting up to serveGather for more once it has some.
const (
	serveBatch  = 8
	serveGather = time.Millisecond
)

// ServeOptions configure `molt serve`.
type ServeOptions struct {
	Addr       string        // API address, default 127.0.0.1:8080
	Tick       time.Duration // interval of the maintenance pass, default 10s
	AdminToken string        // MOLT_ADMIN_TOKEN, optional
	Out        io.Writer     // where the admin token and the address are printed
	// Ready, when set, is called with the listener's address once it accepts.
	Ready func(addr string)
	// Recover runs App.Recover before the workers start: set it only when this
	// process owns the store exclusively (the local backend under its data
	// directory's lock), never on a store other processes use.
	Recover bool
	// SearXNGProbe, when positive and a SearXNG URL is configured, probes its
	// /config in the background for up to this long and logs whether it is
	// ready; the API serves meanwhile (search falls back while it is not).
	SearXNGProbe time.Duration
}

// Serve runs the API, the tick and every registered worker in this process until
// ctx ends, then shuts down gracefully: the server stops accepting, requests in
// flight finish (up to 15 s), workers release unfinished messages.
func (a *App) Serve(ctx context.Context, o ServeOptions) error {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.Tick <= 0 {
		o.Tick = 10 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if _, err := a.EnsureAdminToken(ctx, o.AdminToken, o.Out); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.Addr, err)
	}
	srv := &http.Server{
		Handler:           a.HTTPHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(o.Out, "molt %s listening on http://%s (backend %s)\n", versionString(), ln.Addr(), a.Config.Backend)
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}

	if o.Recover {
		res, err := a.Recover(ctx)
		if err != nil {
			// Not fatal: the tick's timeouts recover what this pass missed.
			a.Logger.Error("start-up recovery failed", slog.String("error", err.Error()))
		}
		if res.Requeued+res.Expired+res.Resumed+res.Resent > 0 {
			a.Logger.Info("recovered the work of the previous run", slog.Int("requeued", res.Requeued),
				slog.Int("expired", res.Expired), slog.Int("resumed", res.Resumed), slog.Int("resent", res.Resent))
		}
	}

	bg, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { a.tickLoop(bg, o.Tick) })
	if o.SearXNGProbe > 0 && a.Config.Search.SearXNGURL != "" {
		wg.Go(func() { a.ProbeSearXNG(bg, o.SearXNGProbe) })
	}
	set, err := a.Store.GetSettings(ctx)
	if err != nil {
		stop()
		wg.Wait()
		_ = ln.Close()
		return fmt.Errorf("read settings: %w", err)
	}
	for _, w := range a.workers {
		rcv, err := a.Receiver(string(w.Kind))
		if err != nil {
			stop()
			wg.Wait()
			_ = ln.Close()
			return err
		}
		c := &consumer.Consumer{Receiver: rcv, Handler: w.Handler, Log: a.Logger, Workers: Width(w.Policy(set)),
			Batch: serveBatch, Gather: serveGather}
		wg.Go(func() { _ = c.Run(bg) })
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		stop()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	a.Logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	stop()
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// MaxWidth bounds the workers `molt serve` runs for one kind.
const MaxWidth = 256

// Width is how many attempts of a kind `molt serve` runs at once: its budget
// (turns: MOLT_TURN_BUDGET; runs and applies: max_concurrent_run and
// max_concurrent_apply, as the settings are when it starts), at least 2 (a
// wake-up that cannot claim is dropped at once, never holding a worker) and at
// most MaxWidth; an unlimited budget gets MaxWidth. The store enforces the
// budget whatever the width: a budget raised later is used up to the width
// this process started with.
func Width(p work.Policy) int {
	if p.Budget <= 0 {
		return MaxWidth
	}
	return min(max(p.Budget, 2), MaxWidth)
}

// Recover returns every claim left by a previous run of this process to its
// next state at once (work.Maintainer.Recover) and re-sends the wake-ups of all
// pending work. Only for a process that owns its store exclusively.
func (a *App) Recover(ctx context.Context) (work.Result, error) {
	return a.Maintainer().Recover(ctx)
}

// Receiver returns the receiving end of kind's queue: the in-process queue on the
// local backend, else what Deps.Receivers opens (the configured SQS queue on
// aws). Serve's workers consume from it.
func (a *App) Receiver(kind string) (queue.Receiver, error) {
	if a.Local != nil {
		return a.Local.Receiver(kind), nil
	}
	if a.receivers == nil {
		return nil, fmt.Errorf("no queue receivers for %s on backend %s", kind, a.Config.Backend)
	}
	return a.receivers(kind)
}

// tickLoop runs the maintenance pass now and then every interval. Passes never
// overlap within the process; across processes they may, harmlessly.
func (a *App) tickLoop(ctx context.Context, every time.Duration) {
	m := a.Maintainer()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		res, err := a.Tick(ctx, m)
		switch {
		case err != nil && ctx.Err() == nil:
			a.Logger.Error("tick failed", slog.String("error", err.Error()))
		case res.Requeued+res.Expired+res.Resent+res.Notified+res.Archived+res.Purged > 0:
			a.Logger.Info("tick", slog.Int("requeued", res.Requeued), slog.Int("expired", res.Expired),
				slog.Int("resent", res.Resent), slog.Int("raced", res.Raced), slog.Int("notices", res.Notified),
				slog.Int("archived", res.Archived), slog.Int("purged", res.Purged))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
