package applies

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/work"
)

// RetentionResult counts what one retention pass did.
type RetentionResult struct {
	Archived int  `json:"archived"` // items whose artifacts were zipped (archived_at set)
	Purged   int  `json:"purged"`   // items deleted with their archive and snapshot
	Raced    int  `json:"raced"`    // items that changed while the pass looked at them
	Skipped  bool `json:"skipped,omitempty"`
}

// retained is a kind retention looks after: its terminal statuses and what
// belongs to an item of it in the blob store.
type retained struct {
	kind     work.Kind
	terminal []work.Status
	// prefix holds everything of an item (deleted at purge); archived reports
	// the keys under it that are archived (the rest stays until purge).
	prefix   func(id string) string
	archived func(id, key string) bool
	// ttl: an archived item never becomes active again, so DynamoDB's TTL may
	// delete it (a backstop of the tick's purge).
	ttl bool
}

// retainedKinds: runs (every artifact; an archived run is not retryable, so it
// never becomes active again), applies (the attempt folders; the rollback
// snapshot stays with the apply until it is purged) and rollback items (no
// artifacts).
var retainedKinds = []retained{
	{kind: work.KindRun, terminal: []work.Status{runApplied, runRolledBack, "rejected", "skipped", "failed", "timeout"},
		prefix:   func(id string) string { return "runs/" + id + "/" },
		archived: func(string, string) bool { return true }, ttl: true},
	{kind: work.KindApply, terminal: []work.Status{StatusApplied, StatusFailed, StatusTimeout, StatusRolledBack},
		prefix: prefix, archived: isAttemptKey, ttl: true},
	{kind: KindRollback, terminal: []work.Status{rollbackDone, rollbackFailed, work.StatusTimeout},
		prefix: func(string) string { return "" }, ttl: true},
}

// retentionGate runs the pass at most once per interval in one process.
type retentionGate struct {
	mu   sync.Mutex
	last time.Time
}

// Retain is the tick's retention step: at most once per Config.RetentionEvery in
// this process it runs RetainNow.
func (s *Service) Retain(ctx context.Context) (RetentionResult, error) {
	s.retain.mu.Lock()
	now := s.now()
	if !s.retain.last.IsZero() && now.Sub(s.retain.last) < s.cfg.RetentionEvery {
		s.retain.mu.Unlock()
		return RetentionResult{Skipped: true}, nil
	}
	s.retain.last = now
	s.retain.mu.Unlock()
	return s.RetainNow(ctx)
}

// RetainNow runs one retention pass. A run, apply or rollback
// item terminal for Config.ArchiveAfter (by its last update) has its artifacts
// zipped into archive/<kind>-<id>.zip, then archived_at set in its data and on
// the item (work.Item.ArchivedAt, with an expiry for DynamoDB's TTL on kinds
// that never become active again), then the originals deleted.
// Config.PurgeAfter after archived_at the zip, whatever else it has in the blob
// store (an apply's rollback snapshot) and the item are deleted. Active items
// are never touched; every write is conditional on the item being unchanged
// since the pass read it.
//
// The pass asks the store only for what is due: per terminal status, the items
// not archived and last updated ArchiveAfter ago or more, and the items
// archived PurgeAfter ago or more (work.ListQuery.UpdatedBy and ArchivedBy,
// index ranges on both adapters), so its cost follows the work it does, not
// the history kept. At most retainPages pages of each per pass; the next pass
// goes on.
func (s *Service) RetainNow(ctx context.Context) (RetentionResult, error) {
	var res RetentionResult
	now := s.now()
	archiveBy, purgeBy := now.Add(-s.cfg.ArchiveAfter), now.Add(-s.cfg.PurgeAfter)
	for _, k := range retainedKinds {
		for _, st := range k.terminal {
			err := s.eachDue(ctx, work.ListQuery{Kind: k.kind, Status: st, UpdatedBy: archiveBy}, func(it work.Item) error {
				at := archivedAt(it.Data)
				if at == nil {
					return s.archive(ctx, k, it, now, &res)
				}
				// Archived before the store kept the archive time (or it was
				// cleared): record it, so the item moves to the listing by
				// archive time, and purge it if that is due already.
				got, err := s.proto.UpdateSeen(ctx, it, work.Edit{ArchivedAt: at, KeepUpdatedAt: true})
				if code := molt.ErrorCode(err); code == molt.ECONFLICT || code == molt.ENOTFOUND {
					res.Raced++
					return nil
				}
				if err != nil {
					return fmt.Errorf("record archived_at: %w", err)
				}
				if !at.After(purgeBy) {
					return s.purge(ctx, k, got, &res)
				}
				return nil
			})
			if err != nil {
				return res, err
			}
			err = s.eachDue(ctx, work.ListQuery{Kind: k.kind, Status: st, ArchivedBy: purgeBy}, func(it work.Item) error {
				// The data's archive time decides (the store's may be
				// rounded down, by a migration).
				if at := archivedAt(it.Data); at != nil && !at.After(purgeBy) {
					return s.purge(ctx, k, it, &res)
				}
				return nil
			})
			if err != nil {
				return res, err
			}
		}
	}
	if res.Archived+res.Purged > 0 {
		s.log.InfoContext(ctx, "retention", slog.Int("archived", res.Archived), slog.Int("purged", res.Purged),
			slog.Int("raced", res.Raced))
	}
	return res, nil
}

// retainPages bounds the pages of 100 one retention pass lists per kind,
// status and phase (archive, purge).
const retainPages = 20

// eachDue calls fn for each item q lists (oldest first) that is still in q's
// status and not claimed, over at most retainPages pages.
func (s *Service) eachDue(ctx context.Context, q work.ListQuery, fn func(work.Item) error) error {
	q.Page = page.Query{Limit: 100}
	for pages := 0; pages < retainPages; pages++ {
		pg, err := s.store.ListItems(ctx, q)
		if err != nil {
			return fmt.Errorf("list %s %s: %w", q.Kind, q.Status, err)
		}
		for _, it := range pg.Items {
			if it.Active || it.Status != q.Status {
				continue
			}
			if err := fn(it); err != nil {
				return fmt.Errorf("retain %s %s: %w", q.Kind, it.ID, err)
			}
		}
		if pg.Next == "" {
			return nil
		}
		q.Page.Cursor = pg.Next
	}
	return nil
}

func (s *Service) archive(ctx context.Context, k retained, it work.Item, now time.Time, res *RetentionResult) error {
	var keys []string
	if p := k.prefix(it.ID); p != "" {
		all, err := s.blobs.List(ctx, p)
		if err != nil {
			return fmt.Errorf("list artifacts: %w", err)
		}
		for _, key := range all {
			if k.archived(it.ID, key) {
				keys = append(keys, key)
			}
		}
	}
	zkey := archiveKey(string(k.kind), it.ID)
	if len(keys) > 0 {
		// A pass that died after writing the zip left it: keep what it holds.
		entries := map[string][]byte{}
		if old, err := s.blobs.Get(ctx, zkey); err == nil {
			if entries, err = unzip(old); err != nil {
				return fmt.Errorf("read %s: %w", zkey, err)
			}
		} else if molt.ErrorCode(err) != molt.ENOTFOUND {
			return fmt.Errorf("read %s: %w", zkey, err)
		}
		for _, key := range keys {
			b, err := s.blobs.Get(ctx, key)
			if molt.ErrorCode(err) == molt.ENOTFOUND {
				// Listed a moment ago, gone now: another pass archived it
				// (its zip may have landed after this one read the zip), or
				// it is being deleted. Writing what is left would overwrite
				// that archive with less.
				res.Raced++
				return nil
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", key, err)
			}
			entries[key] = b
		}
		z, err := zipEntries(entries)
		if err != nil {
			return err
		}
		if err := s.blobs.Put(ctx, zkey, z); err != nil {
			return fmt.Errorf("write %s: %w", zkey, err)
		}
	}
	data, err := stampArchived(it.Data, now)
	if err != nil {
		return err
	}
	// The stamp keeps updated_at: it is not a change of the item's state.
	edit := work.Edit{Data: data, ArchivedAt: &now, KeepUpdatedAt: true}
	if k.ttl {
		edit.ExpiresAt = work.Ptr(now.Add(s.cfg.PurgeAfter + s.cfg.ExpiryGrace))
	}
	_, err = s.proto.UpdateSeen(ctx, it, edit)
	switch molt.ErrorCode(err) {
	case molt.ENOTFOUND:
		res.Raced++
		if len(keys) > 0 {
			// Deleted meanwhile (its run was): the zip just written is all
			// that is left of it, and nothing else would ever remove it.
			if derr := s.blobs.Delete(ctx, zkey); derr != nil {
				return fmt.Errorf("delete %s of a deleted item: %w", zkey, derr)
			}
		}
		return nil
	case molt.ECONFLICT:
		res.Raced++ // it changed (a retry, a rollback): the originals stay
		return nil
	}
	if err != nil {
		return fmt.Errorf("stamp archived_at: %w", err)
	}
	for _, key := range keys {
		if err := s.blobs.Delete(ctx, key); err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	res.Archived++
	return nil
}

func (s *Service) purge(ctx context.Context, k retained, it work.Item, res *RetentionResult) error {
	// Read it once more: the blobs go first, and only for an item still as seen.
	cur, err := s.store.GetItem(ctx, it.Kind, it.ID)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.OpID != it.OpID || cur.Active {
		res.Raced++
		return nil
	}
	if err := s.blobs.Delete(ctx, archiveKey(string(k.kind), it.ID)); err != nil {
		return fmt.Errorf("delete archive: %w", err)
	}
	if p := k.prefix(it.ID); p != "" {
		keys, err := s.blobs.List(ctx, p)
		if err != nil {
			return fmt.Errorf("list %s: %w", p, err)
		}
		for _, key := range keys {
			if err := s.blobs.Delete(ctx, key); err != nil {
				return fmt.Errorf("delete %s: %w", key, err)
			}
		}
	}
	err = s.proto.DeleteSeen(ctx, it)
	if code := molt.ErrorCode(err); code == molt.ECONFLICT || code == molt.ENOTFOUND {
		res.Raced++
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete item: %w", err)
	}
	res.Purged++
	return nil
}

// archivedAt reads archived_at from any item's JSON data.
func archivedAt(data []byte) *time.Time {
	var v struct {
		ArchivedAt *time.Time `json:"archived_at"`
	}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v.ArchivedAt
}

// ArchivedAt reports when an item's artifacts were archived (nil: not archived).
func ArchivedAt(it work.Item) *time.Time { return archivedAt(it.Data) }

// stampArchived sets archived_at in an item's JSON data, keeping every other key.
func stampArchived(data []byte, at time.Time) ([]byte, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("item data is not a JSON object: %w", err)
		}
	}
	v, _ := json.Marshal(at.UTC())
	m["archived_at"] = v
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(out) > work.MaxData {
		return nil, fmt.Errorf("item data over the limit with archived_at")
	}
	return out, nil
}

func zipEntries(entries map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(entries))
	for k := range entries {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			return nil, fmt.Errorf("zip %s: %w", name, err)
		}
		if _, err := w.Write(entries[name]); err != nil {
			return nil, fmt.Errorf("zip %s: %w", name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("zip: %w", err)
	}
	return buf.Bytes(), nil
}

// unzip returns a zip's entries by name.
func unzip(b []byte) (map[string][]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		if strings.Contains(f.Name, "..") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(rc, 64<<20))
		rc.Close()
		if err != nil {
			return nil, err
		}
		out[f.Name] = data
	}
	return out, nil
}

// ReadArchive returns the entries of an item's archive (kind "run" or "apply").
func (s *Service) ReadArchive(ctx context.Context, kind work.Kind, id string) (map[string][]byte, error) {
	b, err := s.blobs.Get(ctx, archiveKey(string(kind), id))
	if err != nil {
		return nil, err
	}
	return unzip(b)
}
