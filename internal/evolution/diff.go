package evolution

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines around each hunk.
const diffContext = 3

// maxLCSCells bounds the dynamic-programming table of one diff. A larger changed
// region is shown as all of its old lines removed and all of its new lines added:
// still a correct diff, only not a minimal one.
const maxLCSCells = 4 << 20

type diffOp struct {
	kind byte // ' ' equal, '-' delete, '+' insert
	a, b int  // index into the old (a) and new (b) lines
}

// UnifiedDiff returns a unified diff (3 lines of context, GNU diff's hunk header
// format, "\ No newline at end of file" where a last line lacks one) turning old
// into new, with the file names oldName and newName ("/dev/null" for a file that
// does not exist on that side). It returns "" when old and new are equal.
func UnifiedDiff(oldName, newName, old, new string) string {
	if old == new {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	ops := diffLines(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range hunks(ops) {
		writeHunk(&out, ops[h[0]:h[1]], a, b)
	}
	return out.String()
}

// splitLines splits s into lines that keep their "\n"; only the last line may
// lack one.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// diffLines returns an edit script from a to b: common prefix and suffix are
// matched directly, the middle by a longest common subsequence.
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', i, i})
	}
	ops = append(ops, lcsOps(a[pre:len(a)-suf], b[pre:len(b)-suf], pre, pre)...)
	for i := 0; i < suf; i++ {
		ops = append(ops, diffOp{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return ops
}

func lcsOps(a, b []string, offA, offB int) []diffOp {
	n, m := len(a), len(b)
	var ops []diffOp
	if n*m > maxLCSCells || n == 0 || m == 0 {
		for i := range a {
			ops = append(ops, diffOp{'-', offA + i, offB})
		}
		for j := range b {
			ops = append(ops, diffOp{'+', offA + n, offB + j})
		}
		return ops
	}
	// l[i][j] is the LCS length of a[i:] and b[j:].
	w := m + 1
	l := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				l[i*w+j] = l[(i+1)*w+j+1] + 1
			case l[(i+1)*w+j] >= l[i*w+j+1]:
				l[i*w+j] = l[(i+1)*w+j]
			default:
				l[i*w+j] = l[i*w+j+1]
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', offA + i, offB + j})
			i, j = i+1, j+1
		case j == m || (i < n && l[(i+1)*w+j] >= l[i*w+j+1]):
			ops = append(ops, diffOp{'-', offA + i, offB + j})
			i++
		default:
			ops = append(ops, diffOp{'+', offA + i, offB + j})
			j++
		}
	}
	return ops
}

// hunks returns [from, to) ranges of ops, each a hunk: changes with up to
// diffContext equal lines around them; changes separated by at most
// 2·diffContext equal lines share a hunk.
func hunks(ops []diffOp) [][2]int {
	var out [][2]int
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-diffContext, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, len(ops))
				break
			}
			end = run
		}
		if len(out) > 0 && start < out[len(out)-1][1] {
			start = out[len(out)-1][1]
		}
		out = append(out, [2]int{start, end})
		i = end
	}
	return out
}

func writeHunk(out *strings.Builder, ops []diffOp, a, b []string) {
	na, nb := 0, 0
	for _, op := range ops {
		if op.kind != '+' {
			na++
		}
		if op.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(ops[0].a, na), hunkRange(ops[0].b, nb))
	for _, op := range ops {
		line := ""
		switch op.kind {
		case '+':
			line = b[op.b]
		default:
			line = a[op.a]
		}
		out.WriteByte(op.kind)
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a hunk's range as GNU diff does: "start,count", "start" when
// count is 1, and for an empty range the line before it ("3,0", "0,0").
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
