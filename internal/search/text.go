package search

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// skipped elements hold no readable text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true, atom.Canvas: true,
	atom.Head: true, atom.Nav: true, atom.Form: true, atom.Button: true, atom.Select: true,
}

// blocks end a line of text.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Br: true, atom.Li: true, atom.Ul: true, atom.Ol: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Tr: true, atom.Table: true, atom.Section: true, atom.Article: true, atom.Main: true,
	atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Blockquote: true, atom.Pre: true,
	atom.Hr: true, atom.Dt: true, atom.Dd: true, atom.Dl: true, atom.Figure: true, atom.Figcaption: true,
	atom.Td: true, atom.Th: true, atom.Caption: true, atom.Details: true, atom.Summary: true,
}

// htmlText reduces an HTML document to its title and readable text: scripts,
// styles, navigation and forms dropped, one line per block, headings marked
// with "#", list items with "-", whitespace collapsed.
func htmlText(body []byte) (title, text string) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return "", ""
	}
	var lines []string
	var cur strings.Builder
	flush := func() {
		if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			cur.WriteString(n.Data)
			return
		case html.ElementNode:
			if n.DataAtom == atom.Title && title == "" {
				title = textOf(n)
			}
			if skipped[n.DataAtom] {
				return
			}
			if blocks[n.DataAtom] {
				flush()
				switch n.DataAtom {
				case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
					cur.WriteString(strings.Repeat("#", int(n.Data[1]-'0')) + " ")
				case atom.Li:
					cur.WriteString("- ")
				}
			}
			if n.DataAtom == atom.Td || n.DataAtom == atom.Th {
				cur.WriteString(" ")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && blocks[n.DataAtom] {
			flush()
		}
	}
	// The title lives in head, which walk skips for text.
	var findTitle func(n *html.Node)
	findTitle = func(n *html.Node) {
		if title != "" {
			return
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Title {
			title = textOf(n)
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			findTitle(c)
		}
	}
	findTitle(doc)
	walk(doc)
	flush()
	// Drop bare "#"/"-" markers left by empty blocks.
	out := lines[:0]
	for _, l := range lines {
		if strings.Trim(l, "#- ") != "" {
			out = append(out, l)
		}
	}
	return title, strings.Join(out, "\n")
}
