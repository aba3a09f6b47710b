package evolution

import (
	"fmt"
	"sort"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Merge is the __apply_agent__'s answer: the merged content of each overlapping
// file.
type Merge struct {
	Files []PatchFile `json:"files"`
	Notes string      `json:"notes,omitempty"`
}

type wireMerge struct {
	Files []PatchFile `json:"files"`
	Notes string      `json:"notes"`
}

// ParseMerge reads an __apply_agent__ answer: exactly one fenced ```json block (or
// a bare JSON object) {"files": [{"path", "content"}], "notes"?}, decoded strictly.
// It needs at least one file; every path must pass workspace.ValidatePath and
// appear once, each content at most workspace.MaxFileSize bytes. When want is not
// empty the answer must give exactly those paths. Errors are EINVALID with Reason
// ReasonMergeInvalid and Field naming what is wrong.
func ParseMerge(text string, want ...string) (Merge, error) {
	d := scanMarkdown(text)
	raw, why := findJSON(text, d, -1, -1)
	if why != "" {
		return Merge{}, mergeErr("", "the merge answer %s", why)
	}
	var w wireMerge
	if err := decodeStrict(raw, &w); err != nil {
		return Merge{}, mergeErr("", "the merge JSON is invalid: %s", err)
	}
	if len(w.Files) == 0 {
		return Merge{}, mergeErr("files", "the merge has no files")
	}
	seen := map[string]bool{}
	for i, f := range w.Files {
		field := fmt.Sprintf("files[%d]", i)
		if err := workspace.ValidatePath(f.Path); err != nil {
			return Merge{}, mergeErr(field+".path", "%s.path: %s", field, errMessage(err))
		}
		if seen[f.Path] {
			return Merge{}, mergeErr(field+".path", "%s.path %q appears twice", field, f.Path)
		}
		seen[f.Path] = true
		if len(f.Content) > workspace.MaxFileSize {
			return Merge{}, mergeErr(field+".content", "%s.content of %q is %d bytes, at most %d allowed", field, f.Path, len(f.Content), workspace.MaxFileSize)
		}
	}
	if len(want) > 0 {
		var missing, extra []string
		wanted := map[string]bool{}
		for _, p := range want {
			wanted[p] = true
			if !seen[p] {
				missing = append(missing, p)
			}
		}
		for p := range seen {
			if !wanted[p] {
				extra = append(extra, p)
			}
		}
		sort.Strings(extra)
		switch {
		case len(missing) > 0:
			return Merge{}, mergeErr("files", "the merge misses %s", strings.Join(missing, ", "))
		case len(extra) > 0:
			return Merge{}, mergeErr("files", "the merge gives paths it was not asked for: %s", strings.Join(extra, ", "))
		}
	}
	return Merge{Files: w.Files, Notes: clip(w.Notes, MaxNotes)}, nil
}

func mergeErr(field, format string, args ...any) error {
	return &molt.Error{Code: molt.EINVALID, Reason: ReasonMergeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// SplitOverlaps merges patches (in run order) that do not overlap: a path written
// by one patch only, or by several with byte-equal content, goes to clean with
// that content; a path written with different contents by several patches is
// listed in overlapping (sorted), for the __apply_agent__. Deletes are not merged.
func SplitOverlaps(patches []Patch) (clean map[string]string, overlapping []string) {
	clean = map[string]string{}
	conflict := map[string]bool{}
	for _, p := range patches {
		for _, f := range p.Files {
			if prev, ok := clean[f.Path]; ok && prev != f.Content {
				conflict[f.Path] = true
			}
			if !conflict[f.Path] {
				clean[f.Path] = f.Content
			}
		}
	}
	for path := range conflict {
		delete(clean, path)
		overlapping = append(overlapping, path)
	}
	sort.Strings(overlapping)
	return clean, overlapping
}

// UnionMerge merges several new versions of one file, each written against base,
// line by line and deterministically: a base line is kept unless some version
// deletes it; the lines each version inserts at a place of base are inserted
// there, in version order, skipping lines an earlier version already inserted at
// that place (counted with multiplicity). Two versions that each add rules to the
// same list therefore keep both rules, once each. It is what the offline model's
// __apply_agent__ answers; a real merge of contradicting edits needs the agent.
func UnionMerge(base string, versions []string) string {
	a := splitLines(base)
	inserts := make([][]string, len(a)+1)
	deleted := make([]bool, len(a))
	for _, v := range versions {
		mine := make([][]string, len(a)+1)
		lines := splitLines(v)
		for _, op := range diffLines(a, lines) {
			switch op.kind {
			case '-':
				deleted[op.a] = true
			case '+':
				mine[op.a] = append(mine[op.a], lines[op.b])
			}
		}
		for at, lines := range mine {
			have := map[string]int{}
			for _, l := range inserts[at] {
				have[l]++
			}
			for _, l := range lines {
				if have[l] > 0 {
					have[l]--
					continue
				}
				inserts[at] = append(inserts[at], l)
			}
		}
	}
	var b strings.Builder
	for i := range a {
		for _, l := range inserts[i] {
			writeMergedLine(&b, l)
		}
		if !deleted[i] {
			writeMergedLine(&b, a[i])
		}
	}
	for _, l := range inserts[len(a)] {
		writeMergedLine(&b, l)
	}
	return b.String()
}

// writeMergedLine writes l, first ending a previous line that lacked its newline
// (a version's last line may have none while another version adds after it).
func writeMergedLine(b *strings.Builder, l string) {
	if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(l)
}
