package applies

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/work"
)

// sourceRun is one approved run of an apply: its item, data and current patch,
// and the effective content of the surface it drafted against (nil when that
// snapshot is not readable).
type sourceRun struct {
	item  work.Item
	data  runs.Data
	patch evolution.Patch
	base  map[string]string
}

// loadRun reads run id and its latest attempt's patch (runs/<id>/attempt-<n>/
// patch.json, n the attempt of its result: never an older attempt's). ECONFLICT
// reason run_missing when the run, its result or its patch is gone.
func (s *Service) loadRun(ctx context.Context, id string) (sourceRun, error) {
	missing := func(format string, args ...any) error {
		return &molt.Error{Code: molt.ECONFLICT, Reason: ReasonRunMissing, Message: fmt.Sprintf(format, args...)}
	}
	it, err := s.store.GetItem(ctx, work.KindRun, id)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return sourceRun{}, missing("run %s is gone", id)
	}
	if err != nil {
		return sourceRun{}, fmt.Errorf("read run %s: %w", id, err)
	}
	d, err := runs.ParseData(it.Data)
	if err != nil {
		return sourceRun{}, missing("run %s has no readable data", id)
	}
	if d.Result == nil || d.Result.Patch == nil || d.Result.Attempt < 1 {
		return sourceRun{}, missing("run %s has no patch", id)
	}
	b, err := s.blobs.Get(ctx, runs.AttemptKey(id, d.Result.Attempt, runs.ArtifactPatch))
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return sourceRun{}, missing("the patch of run %s (attempt %d) is gone", id, d.Result.Attempt)
	}
	if err != nil {
		return sourceRun{}, fmt.Errorf("read patch of run %s: %w", id, err)
	}
	var p evolution.Patch
	if err := json.Unmarshal(b, &p); err != nil {
		return sourceRun{}, missing("the patch of run %s is unreadable", id)
	}
	src := sourceRun{item: it, data: d, patch: p}
	var sc runs.SurfaceContext
	if b, err := s.blobs.Get(ctx, runs.SnapshotKey(id, runs.ArtifactSurface)); err == nil && json.Unmarshal(b, &sc) == nil {
		src.base = make(map[string]string, len(sc.Files))
		for _, f := range sc.Files {
			src.base[f.Path] = f.Content
		}
	}
	return src, nil
}
