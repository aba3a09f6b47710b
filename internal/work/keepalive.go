package work

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// KeepAlive heartbeats claim c every interval in the background until the returned
// stop is called (stop waits for the heartbeat goroutine to end) or ctx ends. When
// a heartbeat finds the claim lost it sets lost and calls cancel — the owner's
// context, so every model call in flight is aborted — and stops: the owner must
// then write nothing more. Other heartbeat failures are logged and retried at the
// next interval (the claim goes stale only after several missed beats).
func (p *Protocol) KeepAlive(ctx context.Context, c Claim, every time.Duration, lost *atomic.Bool, cancel context.CancelFunc, log *slog.Logger) (stop func()) {
	if every <= 0 {
		every = time.Minute
	}
	if log == nil {
		log = slog.Default()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := p.Heartbeat(ctx, c)
			switch {
			case molt.IsLostClaim(err):
				lost.Store(true)
				cancel()
				return
			case err != nil && ctx.Err() == nil:
				log.WarnContext(ctx, "heartbeat failed", slog.String("error", err.Error()))
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
