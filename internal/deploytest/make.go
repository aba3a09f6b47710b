package deploytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// fakeGo stands in for the go command while the Makefile runs: it records how it
// was called (environment that matters and arguments, separated by \x1f) and
// builds nothing, so the rules are checked in milliseconds.
const fakeGo = `#!/bin/sh
printf 'FAKEGO\037GOOS=%s GOARCH=%s CGO_ENABLED=%s' "$GOOS" "$GOARCH" "$CGO_ENABLED"
for a in "$@"; do printf '\037%s' "$a"; done
printf '\n'
`

// goCall is one recorded go invocation.
type goCall struct {
	Env  string   // "GOOS=linux GOARCH=arm64 CGO_ENABLED=0"
	Args []string // "build", "-trimpath", …
}

// output returns the value after the -o flag.
func (g goCall) output() string {
	if i := slices.Index(g.Args, "-o"); i >= 0 && i+1 < len(g.Args) {
		return g.Args[i+1]
	}
	return ""
}

// withoutOutput returns the arguments with the -o value blanked.
func (g goCall) withoutOutput() []string {
	a := slices.Clone(g.Args)
	if i := slices.Index(a, "-o"); i >= 0 && i+1 < len(a) {
		a[i+1] = "OUT"
	}
	return a
}

// checkMake runs the Makefile's rules with a fake go command: `make
// build-<LogicalId>` (what sam build runs) must build ./functions/<folder> for
// linux/arm64 into $(ARTIFACTS_DIR)/bootstrap with exactly the command `make
// bootstraps` (and so `make build`) uses.
func (c *checker) checkMake() {
	if len(c.functions) == 0 || c.opts.SkipMake {
		return
	}
	if !fileExists(filepath.Join(c.opts.Root, "Makefile")) {
		c.addf("Makefile", "missing")
		return
	}
	mk := c.opts.Make
	if mk == "" {
		p, err := exec.LookPath("make")
		if err != nil {
			c.addf("Makefile", "make is not installed: cannot check the build-<LogicalId> rules")
			return
		}
		mk = p
	}
	tmp, err := os.MkdirTemp("", "deploytest-make-")
	if err != nil {
		c.addf("Makefile", "temp dir: %v", err)
		return
	}
	defer os.RemoveAll(tmp)
	gobin := filepath.Join(tmp, "go")
	if err := os.WriteFile(gobin, []byte(fakeGo), 0o755); err != nil {
		c.addf("Makefile", "write fake go: %v", err)
		return
	}

	// The reference: how `make build` builds each bootstrap.
	ref := map[string]goCall{}
	calls, out, err := c.runMake(mk, gobin, "bootstraps", "BUILD_DIR="+filepath.Join(tmp, "build"), "ARCH="+Arch)
	if err != nil {
		c.addf("Makefile", "make bootstraps: %v\n%s", err, out)
	}
	for _, call := range calls {
		if n := len(call.Args); n > 0 {
			ref[strings.TrimPrefix(call.Args[n-1], "./functions/")] = call
		}
	}

	ids, _ := c.sortedFunctions()
	for i, id := range ids {
		dir, ok := c.functions[id]
		if !ok {
			continue
		}
		where := "Makefile build-" + id
		art := filepath.Join(tmp, fmt.Sprintf("artifacts-%d", i))
		calls, out, err := c.runMake(mk, gobin, "build-"+id, "ARTIFACTS_DIR="+art)
		if err != nil {
			c.addf(where, "make build-%s failed (sam build runs it): %v\n%s", id, err, out)
			continue
		}
		if len(calls) != 1 {
			c.addf(where, "ran go %d times, want one go build", len(calls))
			continue
		}
		call := calls[0]
		if call.Env != "GOOS=linux GOARCH="+Arch+" CGO_ENABLED=0" {
			c.addf(where, "go build runs with %s, want GOOS=linux GOARCH=%s CGO_ENABLED=0", call.Env, Arch)
		}
		if got, want := call.output(), filepath.Join(art, "bootstrap"); got != want {
			c.addf(where, "writes %q, want $(ARTIFACTS_DIR)/bootstrap", got)
		}
		if n := len(call.Args); n == 0 || call.Args[0] != "build" || call.Args[n-1] != "./functions/"+dir {
			c.addf(where, "runs go %v, want go build … ./functions/%s", call.Args, dir)
		}
		args := strings.Join(call.Args, " ")
		for _, want := range []string{"-tags lambda.norpc", "-trimpath", "-s -w", "internal/buildinfo.Version=", "internal/buildinfo.SHA="} {
			if !strings.Contains(args, want) {
				c.addf(where, "go build lacks %q: %s", want, args)
			}
		}
		if r, ok := ref[dir]; !ok {
			c.addf(where, "make bootstraps does not build functions/%s", dir)
		} else if !slices.Equal(r.withoutOutput(), call.withoutOutput()) || r.Env != call.Env {
			c.addf(where, "builds differently from make build:\n  sam:  %s %v\n  make: %s %v", call.Env, call.withoutOutput(), r.Env, r.withoutOutput())
		}
	}
}

// runMake runs make in the root with GO pointing at the fake go command and
// returns the go invocations it recorded and make's output.
func (c *checker) runMake(mk, gobin string, args ...string) ([]goCall, []byte, error) {
	// VERSION and SHA are fixed so make does not ask git: the stamping flags are
	// still there to compare.
	cmd := exec.Command(mk, append([]string{"-s", "--no-print-directory", "GO=" + gobin, "VERSION=v0.0.0-check", "SHA=0000000"}, args...)...)
	cmd.Dir = c.opts.Root
	// A make above us (make test) must not hand its jobserver or flags down.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" && k != "MAKEFILES" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var calls []goCall
	for _, line := range strings.Split(stdout.String(), "\n") {
		rest, ok := strings.CutPrefix(line, "FAKEGO\x1f")
		if !ok {
			continue
		}
		fields := strings.Split(rest, "\x1f")
		calls = append(calls, goCall{Env: fields[0], Args: fields[1:]})
	}
	return calls, append(stdout.Bytes(), stderr.Bytes()...), err
}
