package app_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocReferences: the repository's documentation is in the repository.
// No file cites the design notes kept outside it (DESIGN.md, AWS-NOTES.md), and
// every section of docs/architecture.md a comment names (docs/architecture.md,
// "Section") is a heading there. A citation may wrap: "docs/architecture.md,
// "State\n// machines"" names the section "State machines".
func TestDocReferences(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(arch), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			headings[strings.TrimSpace(h)] = true
		}
	}
	outside := regexp.MustCompile(`DESIGN\.md|AWS-NOTES\.md`)
	cite := regexp.MustCompile(`docs/architecture\.md,\s*(?://\s*)?"([^"]+)"`)
	comment := regexp.MustCompile(`\s*\n\s*//\s*`)
	cited := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" && ext != ".yaml" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == filepath.Join("internal", "app", "docs_test.go") {
			return nil // its comments show the patterns
		}
		if loc := outside.FindIndex(b); loc != nil {
			t.Errorf("%s cites %s, which is not in the repository (point to docs/architecture.md)", rel, b[loc[0]:loc[1]])
		}
		for _, m := range cite.FindAllSubmatch(b, -1) {
			cited++
			section := comment.ReplaceAllString(string(m[1]), " ")
			if !headings[section] {
				t.Errorf("%s cites docs/architecture.md section %q, which has no heading", rel, section)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited == 0 {
		t.Error("no citation of a docs/architecture.md section found: the pattern is out of date")
	}
	for _, h := range []string{"Layers", "Ports and adapters", "The claim protocol", "The attempt executor",
		"State machines", "Invariants and where they are enforced", "Store layouts",
		"AWS facts molt relies on", "Recovery times"} {
		if !headings[h] {
			t.Errorf("docs/architecture.md has no section %q", h)
		}
	}
}
