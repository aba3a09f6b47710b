package delegate

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// mask marks the bytes of message that can never select a target: fenced
// and inline code, quoted text (straight and typographic quotes, and quoted
// lines), URLs, e-mail addresses and file names or paths.
func mask(message string) []bool {
	m := make([]bool, len(message)+1)
	set := func(a, b int) {
		for i := a; i < b && i < len(message); i++ {
			m[i] = true
		}
	}
	for _, re := range spanRes {
		for _, loc := range re.FindAllStringIndex(message, -1) {
			set(loc[0], loc[1])
		}
	}
	// Quoted lines (Markdown "> …").
	off := 0
	for _, line := range strings.SplitAfter(message, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), ">") {
			set(off, off+len(line))
		}
		off += len(line)
	}
	maskQuotes(message, set)
	// File names and paths: a whitespace-delimited chunk with a slash, or a
	// name with an extension.
	for _, loc := range chunkRe.FindAllStringIndex(message, -1) {
		c := strings.TrimRight(message[loc[0]:loc[1]], ".,;:!?)]}\"'")
		// A leading slash alone is a command ("/to", "/evo"), not a path.
		if strings.ContainsAny(strings.TrimPrefix(c, "/"), "/\\") || fileRe.MatchString(c) {
			set(loc[0], loc[0]+len(c))
		}
	}
	return m
}

var (
	spanRes = []*regexp.Regexp{
		regexp.MustCompile("(?s)```.*?(```|$)"),
		regexp.MustCompile("(?s)~~~.*?(~~~|$)"),
		regexp.MustCompile("`[^`\n]*`"),
		regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://\S+`),
		regexp.MustCompile(`(?i)\bwww\.\S+`),
		regexp.MustCompile(`[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(\.[\p{L}\p{N}-]+)+`),
	}
	chunkRe = regexp.MustCompile(`\S+`)
	fileRe  = regexp.MustCompile(`^[\p{L}\p{N}_.-]*[\p{L}\p{N}_-]\.[A-Za-z][A-Za-z0-9]{0,5}$`)
)

// quote pairs: opening → closing.
var quotePairs = map[rune]rune{'"': '"', '“': '”', '«': '»', '„': '“', '‚': '‘', '‘': '’', '\'': '\''}

// maskQuotes marks quoted spans. A quote opens only at the start of a word
// (so the apostrophes of "don't" or "l'agent" open nothing) and closes at the
// next matching quote on the same line, or at the end of the line.
func maskQuotes(s string, set func(a, b int)) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		closeR, ok := quotePairs[r]
		if !ok || (i > 0 && !opens(s, i)) {
			i += n
			continue
		}
		j := i + n
		end := -1
		for j < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[j:])
			if r2 == '\n' {
				break
			}
			if r2 == closeR && (r != '\'' || closes(s, j+n2)) {
				end = j + n2
				break
			}
			j += n2
		}
		if end < 0 {
			if r == '\'' {
				i += n // a lone apostrophe quotes nothing
				continue
			}
			end = j
		}
		set(i, end)
		i = end
	}
}

// opens: the byte before i is a space or punctuation that can precede a quote.
func opens(s string, i int) bool {
	p, _ := utf8.DecodeLastRuneInString(s[:i])
	return strings.ContainsRune(" \t\n([{:;,—–-", p)
}

// closes: a closing apostrophe-quote is followed by the end, a space or
// punctuation.
func closes(s string, j int) bool {
	if j >= len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[j:])
	return strings.ContainsRune(" \t\n.,;:!?)]}", r)
}
