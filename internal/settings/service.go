package settings

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
)

// UpdateTries bounds how often Service.Update reads, merges and writes when
// other writes keep coming first. Each lost try means another update landed;
// between tries it waits a random while, growing with the try (at most
// maxBackoff), so that steady writers do not starve one another.
const UpdateTries = 10

const maxBackoff = 50 * time.Millisecond

// backoff waits a random duration below min(2^try ms, maxBackoff), or until ctx
// ends.
func backoff(ctx context.Context, try int) error {
	d := min(time.Millisecond<<try, maxBackoff)
	t := time.NewTimer(rand.N(d) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Service reads and updates the settings on behalf of a caller: it checks the
// caller's access and makes every partial update a write conditional on the
// revision it merged into, so no concurrent update is lost.
type Service struct {
	Store Store
}

// Authorize returns the access check every method makes: EFORBIDDEN unless c has
// full access. A transport calls it to refuse before it reads a request body.
func (s *Service) Authorize(c auth.Caller) error { return checkAccess(c) }

func checkAccess(c auth.Caller) error {
	if !c.IsFull() {
		return &molt.Error{Code: molt.EFORBIDDEN, Message: "settings need a full token"}
	}
	return nil
}

// Get returns the settings with their revision. EFORBIDDEN unless c has full
// access.
func (s *Service) Get(ctx context.Context, c auth.Caller) (Settings, int64, error) {
	if err := checkAccess(c); err != nil {
		return Settings{}, 0, err
	}
	st, rev, err := s.Store.ReadSettings(ctx)
	if err != nil {
		return Settings{}, 0, fmt.Errorf("read settings: %w", err)
	}
	return st, rev, nil
}

// Update applies a partial update (see Merge) to the stored settings and returns
// the result with its revision. When another write lands between its read and
// its write, it reads and merges again, so concurrent updates of different keys
// all take effect. EFORBIDDEN unless c has full access, EINVALID (naming the
// key) for a bad patch, ECONFLICT/ReasonChanged when the settings changed
// under each of UpdateTries tries.
func (s *Service) Update(ctx context.Context, c auth.Caller, patch []byte) (Settings, int64, error) {
	return s.update(ctx, c, patch, nil)
}

// UpdateIf is Update for a caller that has seen one of the revisions revs (an
// If-Match list): it writes only over the revision it read, if that is one of
// revs, and never merges into a later one. ECONFLICT with reason ReasonChanged
// when the stored revision is not among revs or moves on before the write.
func (s *Service) UpdateIf(ctx context.Context, c auth.Caller, patch []byte, revs []int64) (Settings, int64, error) {
	if revs == nil {
		revs = []int64{}
	}
	return s.update(ctx, c, patch, revs)
}

// update merges patch and writes; want == nil retries on a conflict, else the
// revision read must be one of want and a conflict is final.
func (s *Service) update(ctx context.Context, c auth.Caller, patch []byte, want []int64) (Settings, int64, error) {
	if err := checkAccess(c); err != nil {
		return Settings{}, 0, err
	}
	var err error
	for try := 0; try < UpdateTries; try++ {
		cur, rev, rerr := s.Store.ReadSettings(ctx)
		if rerr != nil {
			return Settings{}, 0, fmt.Errorf("read settings: %w", rerr)
		}
		if want != nil && !slices.Contains(want, rev) {
			return Settings{}, 0, changed(rev)
		}
		next, merr := Merge(cur, patch)
		if merr != nil {
			return Settings{}, 0, merr
		}
		var nrev int64
		nrev, err = s.Store.PutSettingsIf(ctx, next, rev)
		if err == nil {
			return next, nrev, nil
		}
		if code := molt.ErrorCode(err); code != molt.ECONFLICT && code != molt.EINVALID {
			// The outcome is unknown (a response lost after the write landed,
			// say): the write is ours if exactly what we wrote is stored at the
			// revision it would have made.
			if got, grev, gerr := s.Store.ReadSettings(ctx); gerr == nil && grev == rev+1 && got == next {
				return next, grev, nil
			}
		}
		if molt.ErrorReason(err) != ReasonChanged || want != nil {
			return Settings{}, 0, fmt.Errorf("put settings: %w", err)
		}
		if try+1 < UpdateTries {
			if berr := backoff(ctx, try); berr != nil {
				return Settings{}, 0, fmt.Errorf("put settings: %w", berr)
			}
		}
	}
	return Settings{}, 0, fmt.Errorf("put settings after %d tries: %w", UpdateTries, err)
}

func changed(rev int64) error {
	return &molt.Error{Code: molt.ECONFLICT, Reason: ReasonChanged,
		Message: fmt.Sprintf("the settings changed (now revision %d): read them again", rev)}
}
