package applies

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Kinds of a manifest file.
const (
	KindOverwrite = "overwrite" // a workspace file existed: its content is backed up
	KindNew       = "new"       // no workspace file existed at that path
)

// Manifest is MANIFEST.json, the rollback snapshot's index (its place among an
// apply's blobs: docs/architecture.md, "Store layouts").
type Manifest struct {
	ApplyID      string         `json:"applyId"`
	Workspace    string         `json:"workspace"`
	SourceRunIDs []string       `json:"sourceRunIds"`
	Attempt      int            `json:"attempt"`
	CapturedAt   time.Time      `json:"capturedAt"`
	Files        []ManifestFile `json:"files"`
	// CreatedDirs are the folders (no trailing slash) that had no workspace file
	// before the apply and have one after, deepest first.
	CreatedDirs []string `json:"createdDirs"`
}

// ManifestFile is one file the apply publishes. Before is the sha256 of the
// workspace file before (null for a new file), After of what is published.
// Unchanged marks a new file byte-equal to the global (or built-in) file it now
// overrides (it
// completes a new workspace override folder: no effective change). A manifest
// file without hashes is unverified: rollback needs force for it.
type ManifestFile struct {
	Rel       string  `json:"rel"`
	Kind      string  `json:"kind"`
	Before    *string `json:"before"`
	After     string  `json:"after"`
	Unchanged bool    `json:"unchanged,omitempty"`
}

// Blob keys of an apply. The snapshot (MANIFEST.json, before/, after/) and the
// rollback's own files (rollback-pre/, ROLLBACK.json) stay while the apply
// exists; the attempt folders are what retention archives.
func prefix(id string) string               { return "applies/" + id + "/" }
func manifestKey(id string) string          { return prefix(id) + "MANIFEST.json" }
func beforeKey(id, rel string) string       { return prefix(id) + "before/" + rel }
func afterKey(id, rel string) string        { return prefix(id) + "after/" + rel }
func rollbackPreKey(id, rel string) string  { return prefix(id) + "rollback-pre/" + rel }
func rollbackKey(id string) string          { return prefix(id) + "ROLLBACK.json" }
func attemptPrefix(id string, n int) string { return fmt.Sprintf("%sattempt-%d/", prefix(id), n) }
func archiveKey(kind, id string) string     { return "archive/" + kind + "-" + id + ".zip" }
func snapshotPrefixes(id string) []string {
	return []string{prefix(id) + "before/", prefix(id) + "after/"}
}
func isAttemptKey(id, key string) bool { return strings.HasPrefix(key, prefix(id)+"attempt-") }
func regressKey(id string, n int, run, name string) string {
	return attemptPrefix(id, n) + "regress/" + run + "/" + name
}

// Hash returns the hex sha256 of b.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// change is one file the apply publishes, with its content.
type change struct {
	ManifestFile
	content []byte
}

// diff compares the merged sandbox (workspace path → content) with the live
// workspace files and the lower layers (global, then built-in): the files to publish (sorted by path)
// and the folders they create (deepest first). A path whose sandbox content
// equals the live workspace file is no change. Publish never deletes, so a live
// file the sandbox lacks is not a change either.
func diff(sandbox map[string][]byte, live, lower map[string][]byte) ([]change, []string) {
	var out []change
	for rel, content := range sandbox {
		old, exists := live[rel]
		if exists && bytes.Equal(old, content) {
			continue
		}
		f := ManifestFile{Rel: rel, Kind: KindNew, After: Hash(content)}
		if exists {
			h := Hash(old)
			f.Kind, f.Before = KindOverwrite, &h
		} else if g, ok := lower[rel]; ok && bytes.Equal(g, content) {
			f.Unchanged = true
		}
		out = append(out, change{ManifestFile: f, content: content})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	return out, createdDirs(out, live)
}

// createdDirs returns every folder of a new file that holds no live workspace
// file, deepest first (then by name).
func createdDirs(changes []change, live map[string][]byte) []string {
	had := map[string]bool{}
	for rel := range live {
		for _, d := range parents(rel) {
			had[d] = true
		}
	}
	seen := map[string]bool{}
	var dirs []string
	for _, c := range changes {
		if c.Kind != KindNew {
			continue
		}
		for _, d := range parents(c.Rel) {
			if !had[d] && !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	sortDeepestFirst(dirs)
	return dirs
}

// parents returns the folders of a path, deepest first: "a/b/c.md" → "a/b", "a".
func parents(rel string) []string {
	var out []string
	for i := strings.LastIndex(rel, "/"); i > 0; i = strings.LastIndex(rel[:i], "/") {
		out = append(out, rel[:i])
	}
	return out
}

func sortDeepestFirst(dirs []string) {
	sort.Slice(dirs, func(i, j int) bool {
		di, dj := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/")
		if di != dj {
			return di > dj
		}
		return dirs[i] < dirs[j]
	})
}

// writeSnapshot writes the rollback snapshot of a fresh claim from scratch:
// whatever an earlier attempt or a stale worker left under before/ and after/ is
// deleted, then every overwritten file's live content goes to before/<rel>, every
// published file's content to after/<rel>, and MANIFEST.json last. It returns the
// manifest's bytes (their hash is what the checkpoint commits to).
func writeSnapshot(ctx context.Context, blobs blob.Store, m Manifest, changes []change, live map[string][]byte) ([]byte, error) {
	id := m.ApplyID
	if err := blobs.Delete(ctx, manifestKey(id)); err != nil {
		return nil, fmt.Errorf("clear manifest: %w", err)
	}
	for _, p := range snapshotPrefixes(id) {
		keys, err := blobs.List(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p, err)
		}
		for _, k := range keys {
			if err := blobs.Delete(ctx, k); err != nil {
				return nil, fmt.Errorf("clear %s: %w", k, err)
			}
		}
	}
	for _, c := range changes {
		if c.Kind == KindOverwrite {
			if err := blobs.Put(ctx, beforeKey(id, c.Rel), live[c.Rel]); err != nil {
				return nil, fmt.Errorf("back up %s: %w", c.Rel, err)
			}
		}
		if err := blobs.Put(ctx, afterKey(id, c.Rel), c.content); err != nil {
			return nil, fmt.Errorf("stage %s: %w", c.Rel, err)
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	if err := blobs.Put(ctx, manifestKey(id), b); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	return b, nil
}

// readManifest reads and checks MANIFEST.json: it must decode, belong to the
// apply, hash to wantSHA when that is set, and name only surface paths. Any
// failure is ECONFLICT reason "no_snapshot".
func readManifest(ctx context.Context, blobs blob.Store, id, wantSHA string) (Manifest, error) {
	b, err := blobs.Get(ctx, manifestKey(id))
	if err != nil {
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return Manifest{}, noSnapshot("the manifest of apply %s is missing", id)
		}
		return Manifest{}, fmt.Errorf("read manifest of %s: %w", id, err)
	}
	if wantSHA != "" && Hash(b) != wantSHA {
		return Manifest{}, noSnapshot("the manifest of apply %s is not the one its checkpoint recorded", id)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, noSnapshot("the manifest of apply %s is unreadable", id)
	}
	if m.ApplyID != id {
		return Manifest{}, noSnapshot("the manifest belongs to apply %q", m.ApplyID)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if err := workspace.ValidatePath(f.Rel); err != nil {
			return Manifest{}, noSnapshot("manifest path %q escapes the surface", f.Rel)
		}
		if seen[f.Rel] {
			return Manifest{}, noSnapshot("manifest path %q appears twice", f.Rel)
		}
		seen[f.Rel] = true
		if f.Kind != KindOverwrite && f.Kind != KindNew {
			return Manifest{}, noSnapshot("manifest path %q has kind %q", f.Rel, f.Kind)
		}
	}
	for _, d := range m.CreatedDirs {
		if err := validDir(d); err != nil {
			return Manifest{}, noSnapshot("manifest folder %q escapes the surface", d)
		}
	}
	return m, nil
}

// validDir checks a folder of the surface: one a valid file path can be in.
func validDir(d string) error {
	if d == "" || strings.HasPrefix(d, "/") || strings.HasSuffix(d, "/") {
		return molt.Invalid("dir", "bad folder")
	}
	for _, s := range strings.Split(d, "/") {
		if s == "" || s == "." || s == ".." {
			return molt.Invalid("dir", "bad folder")
		}
	}
	switch d {
	case "agents", "skills", "prompts":
		return nil
	}
	return workspace.ValidatePath(d + "/x.md")
}

func noSnapshot(format string, args ...any) error {
	return &molt.Error{Code: molt.ECONFLICT, Reason: CodeNoSnapshot, Message: fmt.Sprintf(format, args...)}
}
