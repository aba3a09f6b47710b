package naming

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTitle bounds an automatic title, in characters (session.MaxTitle bounds
// every title; automatic ones are kept short).
const MaxTitle = 80

// CleanTitle turns a model's answer into a title: its first non-empty line,
// without markup (Markdown emphasis, headings, quotes, code ticks, a
// "Title:" label), whitespace collapsed, cut to MaxTitle characters on a word
// boundary where one is near. "" when nothing usable is left: the job then
// fails with ReasonInvalidOutput.
func CleanTitle(answer string) string {
	answer = strings.ToValidUTF8(answer, "")
	line := ""
	for _, l := range strings.Split(answer, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "```") {
			line = l
			break
		}
	}
	line = strings.TrimLeft(line, "#>-*• \t")
	if k, rest, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(strings.Trim(k, "*_")), "title") {
		line = rest
	}
	line = strings.Map(func(r rune) rune {
		switch {
		case strings.ContainsRune("*_`#<>[]{}|~\"", r):
			return -1
		case unicode.IsControl(r) || unicode.IsSpace(r):
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, line)
	line = strings.Join(strings.Fields(line), " ")
	line = strings.Trim(line, " '.:;,-")
	if utf8.RuneCountInString(line) > MaxTitle {
		r := []rune(line)[:MaxTitle]
		cut := string(r)
		if i := strings.LastIndexByte(cut, ' '); i > MaxTitle/2 {
			cut = cut[:i]
		}
		line = strings.TrimRight(cut, " '.:;,-")
	}
	if strings.IndexFunc(line, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
		return ""
	}
	return line
}
