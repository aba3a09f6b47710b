package evolution

import (
	"sort"
	"strings"
)

// DataBlock is one delimited block of data in a prompt built by this package:
//
//	<data name="transcript">
//	…content…
//	</data>
//
// Attributes are double-quoted with &quot; &lt; &gt; &amp; escaped. Inside the
// content every "<data" and "</data" (any case) and every "<\" is neutralised by a
// backslash after the "<" ("<\data", "<\/data", "<\\"), so no content can close or
// open a block; ParseDataBlocks undoes it exactly.
type DataBlock struct {
	Name    string
	Attrs   map[string]string
	Content string
}

// WriteDataBlock appends b to sb: the opening tag on its own line (attributes
// sorted), the escaped content, a newline and the closing tag on its own line,
// then a blank line.
func WriteDataBlock(sb *strings.Builder, b DataBlock) {
	sb.WriteString(`<data name="`)
	sb.WriteString(escapeAttr(b.Name))
	sb.WriteString(`"`)
	keys := make([]string, 0, len(b.Attrs))
	for k := range b.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sb.WriteString(" " + k + `="` + escapeAttr(b.Attrs[k]) + `"`)
	}
	sb.WriteString(">\n")
	sb.WriteString(escapeData(b.Content))
	sb.WriteString("\n</data>\n\n")
}

// ParseDataBlocks returns the data blocks of text, in order, with their content
// and attributes unescaped. A block whose closing tag is missing is ignored.
func ParseDataBlocks(text string) []DataBlock {
	var out []DataBlock
	for pos := 0; pos < len(text); {
		i := strings.Index(text[pos:], "<data ")
		if i < 0 {
			break
		}
		start := pos + i
		if start > 0 && text[start-1] != '\n' {
			pos = start + 1
			continue
		}
		eol := strings.IndexByte(text[start:], '\n')
		if eol < 0 {
			break
		}
		tag := text[start : start+eol]
		body := start + eol + 1
		end := strings.Index(text[body-1:], "\n</data>")
		if end < 0 || !strings.HasSuffix(tag, ">") {
			pos = body
			continue
		}
		content := text[body : body-1+end]
		name, attrs := parseTag(strings.TrimSuffix(strings.TrimPrefix(tag, "<data "), ">"))
		out = append(out, DataBlock{Name: name, Attrs: attrs, Content: unescapeData(content)})
		pos = body - 1 + end + len("\n</data>")
	}
	return out
}

// FindData returns the content of the first block named name.
func FindData(blocks []DataBlock, name string) (string, bool) {
	for _, b := range blocks {
		if b.Name == name {
			return b.Content, true
		}
	}
	return "", false
}

func parseTag(s string) (string, map[string]string) {
	attrs := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ")
		eq := strings.Index(s, `="`)
		if eq < 0 {
			break
		}
		key := s[:eq]
		rest := s[eq+2:]
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		attrs[key] = unescapeAttr(rest[:q])
		s = rest[q+1:]
	}
	name := attrs["name"]
	delete(attrs, "name")
	return name, attrs
}

var (
	attrEscaper   = strings.NewReplacer("&", "&amp;", `"`, "&quot;", "<", "&lt;", ">", "&gt;", "\n", " ", "\r", " ")
	attrUnescaper = strings.NewReplacer("&quot;", `"`, "&lt;", "<", "&gt;", ">", "&amp;", "&")
)

func escapeAttr(s string) string   { return attrEscaper.Replace(s) }
func unescapeAttr(s string) string { return attrUnescaper.Replace(s) }

// escapeData neutralises the data delimiters in s (see DataBlock).
func escapeData(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '<' {
			b.WriteByte(c)
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, `\`):
			b.WriteString(`<\\`)
			i++ // the backslash is written
		case hasFoldPrefix(rest, "data") || hasFoldPrefix(rest, "/data"):
			b.WriteString(`<\`)
		default:
			b.WriteByte('<')
		}
	}
	return b.String()
}

// unescapeData undoes escapeData: "<\\" is "<\", and "<\" followed by anything
// else is "<".
func unescapeData(s string) string {
	if !strings.Contains(s, `<\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '<' && i+1 < len(s) && s[i+1] == '\\' {
			if i+2 < len(s) && s[i+2] == '\\' {
				b.WriteString(`<\`)
				i += 2
			} else {
				b.WriteByte('<')
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasFoldPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
