package applies

import (
	"context"
	"fmt"
	"time"

	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/work"
)

// View is an apply as the admin API shows it (GET /api/evolution/applies/{id}).
type View struct {
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Workspace  string   `json:"workspace"`
	ApprovedBy string   `json:"approved_by"`
	Runs       []RunRef `json:"runs"`
	// Attempts is the claims used (each claim or takeover counts).
	Attempts int `json:"attempts"`
	// Reason is the item's reason; FailureReason why it failed (or, while
	// syncing, why its last publish did not finish).
	Reason         string           `json:"reason,omitempty"`
	FailureReason  string           `json:"failure_reason,omitempty"`
	Merge          *MergeSummary    `json:"merge,omitempty"`
	Regress        []RegressEntry   `json:"regress,omitempty"`
	Manifest       *ManifestSummary `json:"manifest,omitempty"`
	Published      []string         `json:"published"`
	Unchanged      []string         `json:"unchanged,omitempty"`
	SkippedDeletes []string         `json:"skipped_deletes,omitempty"`
	Level          string           `json:"level,omitempty"`
	Score          *evolution.Score `json:"score,omitempty"`
	Observation    string           `json:"observation,omitempty"`
	Rollback       *RollbackResult  `json:"rollback,omitempty"`
	AppliedAt      *time.Time       `json:"applied_at,omitempty"`
	NotifiedAt     *time.Time       `json:"notified_at,omitempty"`
	ArchivedAt     *time.Time       `json:"archived_at,omitempty"`
	CreatedAt      time.Time        `json:"created_at"`
	UpdatedAt      time.Time        `json:"updated_at"`
}

// RunRef is a source run of an apply with its current status.
type RunRef struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// ManifestSummary is the rollback snapshot's manifest as the API shows it.
type ManifestSummary struct {
	CapturedAt  time.Time      `json:"captured_at"`
	Attempt     int            `json:"attempt"`
	Files       []ManifestFile `json:"files"`
	CreatedDirs []string       `json:"created_dirs"`
	Overwrites  int            `json:"overwrites"`
	New         int            `json:"new"`
	// Readable is false when the manifest cannot be read back (a rollback would
	// answer no_snapshot).
	Readable bool `json:"readable"`
}

// View returns an apply's view; ENOTFOUND when absent.
func (s *Service) View(ctx context.Context, id string) (View, error) {
	it, d, err := s.Get(ctx, id)
	if err != nil {
		return View{}, err
	}
	v := View{ID: it.ID, Status: string(it.Status), Workspace: d.Workspace, ApprovedBy: d.ApprovedBy,
		Runs: make([]RunRef, 0, len(d.Runs)), Attempts: it.Attempts, Reason: it.Reason,
		FailureReason: d.FailureReason, Merge: d.Merge, Regress: d.Regress, Published: d.Published,
		Unchanged: d.Unchanged, SkippedDeletes: d.SkippedDeletes, Level: d.Level, Score: d.Score,
		Observation: d.Observation, Rollback: d.Rollback, AppliedAt: d.AppliedAt, NotifiedAt: d.NotifiedAt,
		ArchivedAt: d.ArchivedAt, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
	if v.Published == nil {
		v.Published = []string{}
	}
	if it.Status == StatusFailed || it.Status == StatusTimeout {
		v.FailureReason = it.Reason
	}
	for _, rid := range d.Runs {
		ref := RunRef{ID: rid, Status: "deleted"}
		if r, err := s.store.GetItem(ctx, work.KindRun, rid); err == nil {
			ref.Status = string(r.Status)
		} else if molt.ErrorCode(err) != molt.ENOTFOUND {
			return View{}, fmt.Errorf("read run %s: %w", rid, err)
		}
		v.Runs = append(v.Runs, ref)
	}
	if d.Snapshot != nil {
		ms := &ManifestSummary{CapturedAt: d.Snapshot.CapturedAt, Attempt: d.Snapshot.Attempt,
			Files: []ManifestFile{}, CreatedDirs: d.Snapshot.CreatedDirs}
		if ms.CreatedDirs == nil {
			ms.CreatedDirs = []string{}
		}
		m, err := readManifest(ctx, s.blobs, id, d.Snapshot.ManifestSHA256)
		switch {
		case err == nil:
			ms.Readable, ms.Files = true, m.Files
			for _, f := range m.Files {
				if f.Kind == KindOverwrite {
					ms.Overwrites++
				} else {
					ms.New++
				}
			}
		case molt.ErrorReason(err) != CodeNoSnapshot:
			return View{}, err
		}
		v.Manifest = ms
	}
	return v, nil
}
