package evolution_test

import (
	"math/rand/v2"
	"testing"

	"github.com/molt-dev/molt/internal/evolution"
)

func TestUnionMerge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		base     string
		versions []string
		want     string
	}{
		{"no versions", "a\n", nil, "a\n"},
		{"one version", "a\n", []string{"a\nb\n"}, "a\nb\n"},
		{"two rule additions", "# T\n\n## Rules\n\n- x\n\n## Other\n\ny\n",
			[]string{"# T\n\n## Rules\n\n- x\n- a\n\n## Other\n\ny\n", "# T\n\n## Rules\n\n- x\n- b\n\n## Other\n\ny\n"},
			"# T\n\n## Rules\n\n- x\n- a\n- b\n\n## Other\n\ny\n"},
		{"same rule twice", "## Rules\n\n- x\n", []string{"## Rules\n\n- x\n- a\n", "## Rules\n\n- x\n- a\n"}, "## Rules\n\n- x\n- a\n"},
		{"both create the section", "hello\n",
			[]string{"hello\n\n## Rules\n\n- a\n", "hello\n\n## Rules\n\n- b\n"}, "hello\n\n## Rules\n\n- a\n- b\n"},
		{"new file", "", []string{"## Rules\n\n- a\n", "## Rules\n\n- b\n"}, "## Rules\n\n- a\n- b\n"},
		{"edits in different places", "1\n2\n3\n4\n5\n", []string{"1\nX\n3\n4\n5\n", "1\n2\n3\n4\nY\n"}, "1\nX\n3\n4\nY\n"},
		{"base without final newline", "x", []string{"x\n- a\n", "x\n- b\n"}, "x\n- a\n- b\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := evolution.UnionMerge(c.base, c.versions); got != c.want {
				t.Fatalf("UnionMerge = %q, want %q", got, c.want)
			}
		})
	}
}

func TestUnionMergeOneVersionIsThatVersion(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{"a\n", "b\n", "\n", "- x\n", "c"}
	gen := func() string {
		var s string
		for n := r.IntN(12); n > 0; n-- {
			s += words[r.IntN(len(words)-1)]
		}
		if r.IntN(3) == 0 {
			s += words[len(words)-1]
		}
		return s
	}
	for i := 0; i < 2000; i++ {
		base, v := gen(), gen()
		if got := evolution.UnionMerge(base, []string{v}); got != v {
			t.Fatalf("UnionMerge(%q, [%q]) = %q", base, v, got)
		}
		if got := evolution.UnionMerge(base, []string{v, v}); got != v {
			t.Fatalf("UnionMerge(%q, [v, v]) = %q, want v = %q", base, got, v)
		}
	}
}
