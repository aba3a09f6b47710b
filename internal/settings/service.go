package settings

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// UpdateTries bounds how often Service.Update reads, merges and writes when
// other writes keep coming first. Each lost try means another update landed;
// between tries it waits a random while, growing with the try (at most
// maxBackoff), so that steady writers do not starve one another. Four
// writers updating without pause on a slow store (the emulator on a loaded
// machine) once lost ten tries in a row; 25 make that vanishingly rare, and
// bound an update's wait at about a second.
const UpdateTries = 25

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

// WorkspaceService reads and updates workspaces' overrides of the settings on
// behalf of a caller: any caller that may read a workspace reads its
// overrides, only a full one changes them, and every partial update is a write
// conditional on the revision it merged into, so no concurrent update is lost.
// A workspace the caller may not read is ENOTFOUND, like one that does not
// exist.
type WorkspaceService struct {
	Store interface {
		WorkspaceStore
		GetSettings(ctx context.Context) (Settings, error)
	}
}

// WorkspaceSettings is what GET /api/workspaces/{ws}/settings shows: the
// workspace's overrides (null: inherited), the values in effect (the override
// over the global value) and the overrides' revision.
type WorkspaceSettings struct {
	Overrides
	Effective EffectiveSettings `json:"effective"`
	Revision  int64             `json:"-"`
}

// EffectiveSettings are the settings in effect for one workspace.
type EffectiveSettings struct {
	Naming Naming `json:"naming"`
}

// Effective returns the naming settings in effect for workspace ws: its
// overrides over global. ENOTFOUND when ws does not exist.
func Effective(ctx context.Context, s WorkspaceStore, ws string, global Naming) (Naming, error) {
	o, _, err := s.ReadWorkspaceSettings(ctx, ws)
	if err != nil {
		return Naming{}, fmt.Errorf("read settings of workspace %s: %w", ws, err)
	}
	return o.Naming.Apply(global), nil
}

func authorizeWorkspace(c auth.Caller, ws string, write bool) error {
	if err := workspace.Authorize(c, ws, write); err != nil {
		return err
	}
	if ws == workspace.Global {
		return molt.NotFound(`"global" is the shared surface, not a workspace: its settings are /api/settings`)
	}
	return nil
}

// AuthorizeWorkspace returns the access check of Get (write false) or Update
// (write true) of ws's overrides. A transport calls it to refuse before it
// reads a request body.
func (s *WorkspaceService) AuthorizeWorkspace(c auth.Caller, ws string, write bool) error {
	return authorizeWorkspace(c, ws, write)
}

// Get returns ws's overrides with the settings in effect. ENOTFOUND when the
// workspace does not exist or c may not read it.
func (s *WorkspaceService) Get(ctx context.Context, c auth.Caller, ws string) (WorkspaceSettings, error) {
	if err := authorizeWorkspace(c, ws, false); err != nil {
		return WorkspaceSettings{}, err
	}
	o, rev, err := s.Store.ReadWorkspaceSettings(ctx, ws)
	if err != nil {
		return WorkspaceSettings{}, fmt.Errorf("read settings of workspace %s: %w", ws, err)
	}
	return s.view(ctx, o, rev)
}

func (s *WorkspaceService) view(ctx context.Context, o Overrides, rev int64) (WorkspaceSettings, error) {
	g, err := s.Store.GetSettings(ctx)
	if err != nil {
		return WorkspaceSettings{}, fmt.Errorf("read settings: %w", err)
	}
	return WorkspaceSettings{Overrides: o, Effective: EffectiveSettings{Naming: o.Naming.Apply(g.Naming)},
		Revision: rev}, nil
}

// Update applies a partial update (see MergeOverrides) to ws's overrides and
// returns the result. When another write lands between its read and its write
// it reads and merges again, so concurrent updates of different keys all take
// effect. ENOTFOUND when the workspace does not exist or c may not read it,
// EFORBIDDEN unless c has full access, EINVALID (naming the key) for a bad
// patch, ECONFLICT/ReasonChanged when the overrides changed under each of
// UpdateTries tries.
func (s *WorkspaceService) Update(ctx context.Context, c auth.Caller, ws string, patch []byte) (WorkspaceSettings, error) {
	return s.update(ctx, c, ws, patch, nil)
}

// UpdateIf is Update for a caller that has seen one of the revisions revs (an
// If-Match list): it writes only over the revision it read, if that is one of
// revs, and never merges into a later one. ECONFLICT with reason ReasonChanged
// when the stored revision is not among revs or moves on before the write.
func (s *WorkspaceService) UpdateIf(ctx context.Context, c auth.Caller, ws string, patch []byte, revs []int64) (WorkspaceSettings, error) {
	if revs == nil {
		revs = []int64{}
	}
	return s.update(ctx, c, ws, patch, revs)
}

// update merges patch and writes; want == nil retries on a conflict, else the
// revision read must be one of want and a conflict is final.
func (s *WorkspaceService) update(ctx context.Context, c auth.Caller, ws string, patch []byte, want []int64) (WorkspaceSettings, error) {
	if err := authorizeWorkspace(c, ws, true); err != nil {
		return WorkspaceSettings{}, err
	}
	var err error
	for try := 0; try < UpdateTries; try++ {
		cur, rev, rerr := s.Store.ReadWorkspaceSettings(ctx, ws)
		if rerr != nil {
			return WorkspaceSettings{}, fmt.Errorf("read settings of workspace %s: %w", ws, rerr)
		}
		if want != nil && !slices.Contains(want, rev) {
			return WorkspaceSettings{}, changed(rev)
		}
		next, merr := MergeOverrides(cur, patch)
		if merr != nil {
			return WorkspaceSettings{}, merr
		}
		var nrev int64
		nrev, err = s.Store.PutWorkspaceSettingsIf(ctx, ws, next, rev)
		if err == nil {
			return s.view(ctx, next, nrev)
		}
		if code := molt.ErrorCode(err); code != molt.ECONFLICT && code != molt.EINVALID && code != molt.ENOTFOUND {
			// The outcome is unknown: the write is ours if exactly what we
			// wrote is stored at the revision it would have made.
			if got, grev, gerr := s.Store.ReadWorkspaceSettings(ctx, ws); gerr == nil && grev == rev+1 && got.Equal(next) {
				return s.view(ctx, next, grev)
			}
		}
		if molt.ErrorReason(err) != ReasonChanged || want != nil {
			return WorkspaceSettings{}, fmt.Errorf("put settings of workspace %s: %w", ws, err)
		}
		if try+1 < UpdateTries {
			if berr := backoff(ctx, try); berr != nil {
				return WorkspaceSettings{}, fmt.Errorf("put settings of workspace %s: %w", ws, berr)
			}
		}
	}
	return WorkspaceSettings{}, fmt.Errorf("put settings of workspace %s after %d tries: %w", ws, UpdateTries, err)
}
