package evolution_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/evolution"
)

func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, old, new, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"append line", "a\nb\n", "a\nb\nc\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n b\n+c\n"},
		{"new file", "", "x\ny\n", "--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"emptied file", "x\n", "", "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-x\n"},
		{"change one line", "a\nb\nc\n", "a\nB\nc\n", "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"insert at top", "a\nb\n", "z\na\nb\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n+z\n a\n b\n"},
		{"no newline at end", "a\nb", "a\nb\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n",
			"--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n"},
		{"hunks joined when 6 apart", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "X\n2\n3\n4\n5\n6\n7\nY\n9\n",
			"--- a/f\n+++ b/f\n@@ -1,9 +1,9 @@\n-1\n+X\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+Y\n 9\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := evolution.UnifiedDiff("a/f", "b/f", c.old, c.new); got != c.want {
				t.Fatalf("UnifiedDiff =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// applyDiff applies a unified diff produced by UnifiedDiff to old, checking every
// context and removed line, as patch(1) would without fuzz.
func applyDiff(t *testing.T, old, diff string) string {
	t.Helper()
	if diff == "" {
		return old
	}
	var oldLines []string
	for s := old; s != ""; {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			oldLines = append(oldLines, s)
			break
		}
		oldLines = append(oldLines, s[:i+1])
		s = s[i+1:]
	}
	header := regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)
	lines := strings.SplitAfter(diff, "\n")
	if !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		t.Fatalf("diff has no file header:\n%s", diff)
	}
	var out []string
	pos := 0 // next old line to copy
	for i := 2; i < len(lines) && lines[i] != ""; {
		m := header.FindStringSubmatch(strings.TrimSuffix(lines[i], "\n"))
		if m == nil {
			t.Fatalf("bad hunk header %q in\n%s", lines[i], diff)
		}
		start, _ := strconv.Atoi(m[1])
		count := 1
		if m[2] != "" {
			count, _ = strconv.Atoi(m[2])
		}
		if count > 0 {
			start-- // 1-based; an empty range names the line before it
		}
		if start < pos {
			t.Fatalf("hunks overlap or go backwards at %q", lines[i])
		}
		out = append(out, oldLines[pos:start]...)
		pos = start
		i++
		for i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			noEOL := i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\ No newline`)
			text := l[1:]
			if noEOL {
				text = strings.TrimSuffix(text, "\n")
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(oldLines) || oldLines[pos] != text {
					t.Fatalf("line %q does not match old line %d in\n%s", l, pos, diff)
				}
				if l[0] == ' ' {
					out = append(out, text)
				}
				pos++
			case '+':
				out = append(out, text)
			default:
				t.Fatalf("bad diff line %q", l)
			}
			i++
			if noEOL {
				i++
			}
		}
	}
	out = append(out, oldLines[pos:]...)
	return strings.Join(out, "")
}

func TestUnifiedDiffApplies(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "d\n", "", "e"}
	gen := func() string {
		var b strings.Builder
		for n := r.IntN(30); n > 0; n-- {
			b.WriteString(words[r.IntN(len(words)-2)])
		}
		if r.IntN(4) == 0 {
			b.WriteString(words[len(words)-1]) // no final newline
		}
		return b.String()
	}
	for i := 0; i < 2000; i++ {
		old, new := gen(), gen()
		d := evolution.UnifiedDiff("a/x", "b/x", old, new)
		if got := applyDiff(t, old, d); got != new {
			t.Fatalf("case %d: applying\n%s\nto %q gave %q, want %q", i, d, old, got, new)
		}
		if (d == "") != (old == new) {
			t.Fatalf("case %d: empty diff %v for old==new %v", i, d == "", old == new)
		}
	}
}

func TestUnifiedDiffLargeFallback(t *testing.T) {
	t.Parallel()
	var a, b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&a, "old %d\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	d := evolution.UnifiedDiff("a/x", "b/x", a.String(), b.String())
	if got := applyDiff(t, a.String(), d); got != b.String() {
		t.Fatalf("large diff does not apply")
	}
}
