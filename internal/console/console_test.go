package console_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/molt-dev/molt/internal/console"
)

// TestLoadHashesThroughImports: a change to a module changes its hashed name and
// the name of every module that imports it, so an immutable cached copy is never
// served for new code.
func TestLoadHashesThroughImports(t *testing.T) {
	t.Parallel()
	files := func(leaf string) fstest.MapFS {
		return fstest.MapFS{
			"index.html": {Data: []byte(`<script type="module" src="assets/app.js"></script><link rel="stylesheet" href="assets/style.css">`)},
			"app.js":     {Data: []byte(`import { x } from "./leaf.js";` + "\n")},
			"leaf.js":    {Data: []byte(leaf)},
			"style.css":  {Data: []byte(`body{}`)},
		}
	}
	c1, err := console.Load(files("export const x = 1;"))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := console.Load(files("export const x = 2;"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"app.js", "leaf.js"} {
		h1, _ := c1.Hashed(name)
		h2, _ := c2.Hashed(name)
		if h1 == h2 || !strings.HasSuffix(h1, ".js") || !strings.HasPrefix(h1, strings.TrimSuffix(name, ".js")+".") {
			t.Errorf("%s: hashed %q then %q; want a different hashed .js name after the leaf changed", name, h1, h2)
		}
	}
	s1, _ := c1.Hashed("style.css")
	s2, _ := c2.Hashed("style.css")
	if s1 != s2 {
		t.Errorf("style.css changed name (%s, %s) though it did not change", s1, s2)
	}
}

// TestLoadRefusesBrokenReferences: a reference to a missing module or an import
// cycle fails at load (so at test time), not in a browser.
func TestLoadRefusesBrokenReferences(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fstest.MapFS{
		"missing": {"index.html": {Data: []byte(`<script src="assets/app.js"></script>`)}, "app.js": {Data: []byte(`import "./nope.js";`)}},
		"cycle": {"index.html": {Data: []byte(`<script src="assets/a.js"></script>`)},
			"a.js": {Data: []byte(`import "./b.js";`)}, "b.js": {Data: []byte(`import "./a.js";`)}},
		"no index": {"app.js": {Data: []byte(``)}},
	} {
		if _, err := console.Load(fsys); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
}

// TestDefaultLoads: the embedded assets load, every module under its hashed name.
func TestDefaultLoads(t *testing.T) {
	t.Parallel()
	c := console.Default()
	for _, n := range []string{"app.js", "api.js", "chat.js", "evo.js", "files.js", "settings.js", "feed.js", "diff.js", "dom.js", "tokens.js", "style.css"} {
		if _, ok := c.Hashed(n); !ok {
			t.Errorf("no asset %s", n)
		}
	}
}
