package evolution

import (
	"strings"
)

// mdBlock is a fenced code block of a Markdown answer.
type mdBlock struct {
	info    string // the info string, lower-cased and trimmed ("json", "")
	content string // the lines between the fences
	start   int    // line index of the opening fence
	end     int    // line index of the closing fence (len(lines) when unclosed)
}

// mdHeading is an ATX heading outside any fenced block.
type mdHeading struct {
	level int
	text  string
	line  int
}

// mdDoc is a Markdown text split into lines, with its fenced blocks and the
// headings outside them.
type mdDoc struct {
	lines    []string
	blocks   []mdBlock
	headings []mdHeading
}

// scanMarkdown splits text (CRLF normalised) into fenced blocks and headings, as
// CommonMark does for backtick and tilde fences: an opening fence of three or more
// backticks (or tildes), indented at most three spaces, closes at a line holding
// only a fence of the same character at least as long. An unclosed fence runs to
// the end of the text.
func scanMarkdown(text string) mdDoc {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	d := mdDoc{lines: strings.Split(text, "\n")}
	for i := 0; i < len(d.lines); i++ {
		line := d.lines[i]
		if ch, n, info, ok := openFence(line); ok {
			b := mdBlock{info: strings.ToLower(strings.TrimSpace(info)), start: i, end: len(d.lines)}
			var body []string
			for j := i + 1; j < len(d.lines); j++ {
				if closesFence(d.lines[j], ch, n) {
					b.end = j
					break
				}
				body = append(body, d.lines[j])
			}
			b.content = strings.Join(body, "\n")
			d.blocks = append(d.blocks, b)
			i = b.end
			continue
		}
		if lvl, txt, ok := atxHeading(line); ok {
			d.headings = append(d.headings, mdHeading{level: lvl, text: txt, line: i})
		}
	}
	return d
}

func indent(line string) (string, bool) {
	n := len(line) - len(strings.TrimLeft(line, " "))
	if n > 3 {
		return "", false
	}
	return line[n:], true
}

func openFence(line string) (ch byte, n int, info string, ok bool) {
	s, ok := indent(line)
	if !ok || len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return 0, 0, "", false
	}
	ch = s[0]
	for n < len(s) && s[n] == ch {
		n++
	}
	if n < 3 {
		return 0, 0, "", false
	}
	info = s[n:]
	if ch == '`' && strings.Contains(info, "`") {
		return 0, 0, "", false
	}
	return ch, n, info, true
}

func closesFence(line string, ch byte, n int) bool {
	s, ok := indent(line)
	if !ok {
		return false
	}
	s = strings.TrimRight(s, " \t")
	if len(s) < n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ch {
			return false
		}
	}
	return true
}

func atxHeading(line string) (int, string, bool) {
	s, ok := indent(line)
	if !ok {
		return 0, "", false
	}
	lvl := 0
	for lvl < len(s) && s[lvl] == '#' {
		lvl++
	}
	if lvl == 0 || lvl > 6 || (lvl < len(s) && s[lvl] != ' ' && s[lvl] != '\t') {
		return 0, "", false
	}
	txt := strings.TrimSpace(s[lvl:])
	txt = strings.TrimSpace(strings.TrimRight(txt, "#"))
	return lvl, txt, true
}

// section returns the lines under the first heading (outside fences) whose text
// equals title case-insensitively, up to the next heading of the same or a higher
// level, and the line range [from, to) the section covers, heading included.
func (d mdDoc) section(title string) (body string, from, to int, ok bool) {
	for i, h := range d.headings {
		if !strings.EqualFold(h.text, title) {
			continue
		}
		to = len(d.lines)
		for _, next := range d.headings[i+1:] {
			if next.level <= h.level {
				to = next.line
				break
			}
		}
		return strings.TrimSpace(strings.Join(d.lines[h.line+1:to], "\n")), h.line, to, true
	}
	return "", 0, 0, false
}

// jsonBlocks returns the content of the fenced blocks outside [skipFrom, skipTo)
// that hold JSON: info string "json", or no info string and content starting
// with "{".
func (d mdDoc) jsonBlocks(skipFrom, skipTo int) []string {
	var out []string
	for _, b := range d.blocks {
		if b.start >= skipFrom && b.start < skipTo {
			continue
		}
		c := strings.TrimSpace(b.content)
		if b.info == "json" || (b.info == "" && strings.HasPrefix(c, "{")) {
			out = append(out, c)
		}
	}
	return out
}

// findJSON returns the one JSON object of an answer: the one JSON fenced block
// outside [skipFrom, skipTo), or, when there is no fenced block there, text (the
// answer without the skipped lines) when it is a bare JSON object. The second
// result says what is wrong when there is no one object.
func findJSON(text string, d mdDoc, skipFrom, skipTo int) (string, string) {
	blocks := d.jsonBlocks(skipFrom, skipTo)
	switch {
	case len(blocks) == 1:
		return blocks[0], ""
	case len(blocks) > 1:
		return "", "has more than one ```json block; answer with exactly one"
	}
	fenced := 0
	for _, b := range d.blocks {
		if b.start < skipFrom || b.start >= skipTo {
			fenced++
		}
	}
	t := strings.TrimSpace(text)
	if fenced == 0 && strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
		return t, ""
	}
	return "", "has no ```json block"
}
