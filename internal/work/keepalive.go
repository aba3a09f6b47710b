package work

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

// KeepAlive heartbeats claim c every interval in the background until the returned
// stop is called (stop waits for the heartbeat goroutine to end) or ctx ends. When
// a heartbeat finds the claim lost it calls onLost — the Executor cancels the
// attempt's context with ErrClaimLost, so every model call in flight is aborted —
// and stops: the owner must then write nothing more. Other heartbeat failures are
// logged and retried at the next interval (the claim goes stale only after several
// missed beats). Work runs under an Executor, which calls it; it is exported for
// its tests.
func (p *Protocol) KeepAlive(ctx context.Context, c Claim, every time.Duration, onLost func(), log *slog.Logger) (stop func()) {
	return p.keepAlive(ctx, c, every, onLost, log)
}

func (p *Protocol) keepAlive(ctx context.Context, c Claim, every time.Duration, onLost func(), log *slog.Logger) (stop func()) {
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
				onLost()
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

// Owns reads the claimed item and returns ELOSTCLAIM unless claim c still holds
// it (same attempts and token, still active); ENOTFOUND counts as lost. It
// writes nothing: a read is how an owner confirms its claim between
// heartbeats.
func (p *Protocol) Owns(ctx context.Context, c Claim) error {
	it, err := p.Backend.GetItem(ctx, c.Kind, c.ID)
	switch {
	case molt.ErrorCode(err) == molt.ENOTFOUND:
		return lost(c, "confirm")
	case err != nil:
		return fmt.Errorf("confirm %s %s: %w", c.Kind, c.ID, err)
	case !it.Active || it.Token != c.Token || it.Attempts != c.Attempts:
		return lost(c, "confirm")
	}
	return nil
}
