package app_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundaries: the composition root stays straight. internal/app
// links no AWS SDK (the aws backend builds its clients and receivers), and
// internal/model, the port to language models, depends on no feature that
// uses it (the offline model's evolution answers are wired by the root).
func TestImportBoundaries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pkgs   []string
		banned string
	}{
		{[]string{"github.com/molt-dev/molt/internal/app"}, "github.com/aws/aws-sdk-go-v2"},
		{[]string{"github.com/molt-dev/molt/internal/model/..."}, "github.com/molt-dev/molt/internal/evolution"},
		{[]string{"github.com/molt-dev/molt/internal/model/..."}, "github.com/molt-dev/molt/internal/chat"},
	}
	for _, c := range cases {
		args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, c.pkgs...)
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go %v: %v", args, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == c.banned || strings.HasPrefix(dep, c.banned+"/") {
				t.Errorf("%v depends on %s", c.pkgs, dep)
			}
		}
	}
}
