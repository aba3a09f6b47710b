package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
)

// The fixed contract between the template, the Makefile and the code.
const (
	Runtime     = "provided.al2023"
	Arch        = "arm64"
	Handler     = "bootstrap"
	BuildMethod = "makefile"

	// MaxReceiveCount is how often a wake-up may be received before it is
	// dead-lettered.
	MaxReceiveCount = 5
	// VisibilityFactor: a queue's visibility timeout is at least this many times
	// its consumer's timeout.
	VisibilityFactor = 6
	// DeadLetterRetention is how long (seconds) a dead-letter queue keeps a
	// message: 14 days, the most SQS allows.
	DeadLetterRetention = 14 * 24 * 60 * 60

	// ArchivePrefix is the only artifact prefix a bucket lifecycle rule may
	// expire: retention (internal/applies) zips a finished run's or apply's
	// artifacts there and deletes the zip ArchivePurgeDays later. Everything else
	// lives as long as its row: a run awaiting review, a rollback snapshot while
	// its apply exists.
	ArchivePrefix = "archive/"
	// ArchivePurgeDays is when the tick purges an archive (applies.Config.PurgeAfter);
	// a lifecycle expiry is a backstop and must not come earlier.
	ArchivePurgeDays = 30
)

// Problem is one rule the repository breaks.
type Problem struct {
	Where string // "template.yaml ApiFunction", "events/api-health.json", "functions/foo"
	What  string
}

func (p Problem) String() string { return p.Where + ": " + p.What }

// Options say where things are; the zero value is the repository layout under Root.
type Options struct {
	Root string // holds template.yaml, Makefile, functions/ and events/
	// Make is the make command; "" looks "make" up on the PATH. The Makefile
	// rules are skipped (and reported as a problem) when there is none.
	Make string
	// SkipMake leaves the Makefile rules out (tests of the other rules use it:
	// running make is the slow part).
	SkipMake bool
	// Kinds are the kinds of work the code registers (internal/app.Kinds):
	// each needs its worker function. nil skips that rule.
	Kinds []string
}

// checker collects problems.
type checker struct {
	opts     Options
	tpl      *template
	problems []Problem
	// functions maps a logical id to its folder name under functions/.
	functions map[string]string
	// dirs lists the folders under functions/ that hold a main.go.
	dirs []string
}

func (c *checker) addf(where, format string, args ...any) {
	c.problems = append(c.problems, Problem{Where: where, What: fmt.Sprintf(format, args...)})
}

// Check applies every rule to the repository at opts.Root and returns the
// problems found, sorted. The error is for what could not be read at all (no
// template, YAML that does not parse).
func Check(opts Options) ([]Problem, error) {
	tpl, err := loadTemplate(filepath.Join(opts.Root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	mains, err := filepath.Glob(filepath.Join(opts.Root, "functions", "*", "main.go"))
	if err != nil {
		return nil, err
	}
	c := &checker{opts: opts, tpl: tpl, functions: map[string]string{}}
	for _, m := range mains {
		c.dirs = append(c.dirs, filepath.Base(filepath.Dir(m)))
	}
	sort.Strings(c.dirs)

	c.checkTransform()
	c.checkFunctions()
	c.checkMake()
	c.checkEnvironment()
	c.checkPolicies()
	c.checkInvokes()
	c.checkSecrets()
	c.checkRemoteTokens()
	c.checkFunctionURLs()
	c.checkTable()
	c.checkBuckets()
	c.checkQueues()
	c.checkKinds()
	if err := c.checkEvents(); err != nil {
		return nil, err
	}
	sort.SliceStable(c.problems, func(i, j int) bool { return c.problems[i].String() < c.problems[j].String() })
	return c.problems, nil
}

func (c *checker) checkTransform() {
	t := c.tpl.CF.Transform
	if t == nil || t.String == nil || *t.String != "AWS::Serverless-2016-10-31" {
		c.addf("template.yaml", "Transform must be AWS::Serverless-2016-10-31")
	}
}

// globalFunction returns Globals.Function, or an empty one.
func (c *checker) globalFunction() *global.Function {
	if g, ok := c.tpl.CF.Globals["Function"].(*global.Function); ok {
		return g
	}
	return &global.Function{}
}

// sortedFunctions returns the template's functions by logical id.
func (c *checker) sortedFunctions() ([]string, map[string]*serverless.Function) {
	fns := c.tpl.CF.GetAllServerlessFunctionResources()
	ids := make([]string, 0, len(fns))
	for id := range fns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, fns
}

// FolderOf returns the functions/ folder a logical id stands for: the id without
// its "Function" suffix, CamelCase turned into kebab-case (RunWorkerFunction →
// run-worker), as the Makefile's build-%Function rule does. ok is false when the id
// does not end in "Function".
func FolderOf(logicalID string) (string, bool) {
	base, ok := strings.CutSuffix(logicalID, "Function")
	if !ok || base == "" {
		return "", false
	}
	var b strings.Builder
	rs := []rune(base)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])) {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String(), true
}

func (c *checker) checkFunctions() {
	g := c.globalFunction()
	ids, fns := c.sortedFunctions()
	declared := map[string][]string{}
	for _, id := range ids {
		fn := fns[id]
		where := "template.yaml " + id
		if isImage(fn) {
			c.checkImageFunction(id, fn, g)
			continue
		}
		dir, ok := FolderOf(id)
		if !ok {
			c.addf(where, "a function's logical id must be <Folder>Function (ApiFunction for functions/api)")
			continue
		}
		c.functions[id] = dir
		declared[dir] = append(declared[dir], id)
		if !slices.Contains(c.dirs, dir) {
			c.addf(where, "no functions/%s/main.go for it", dir)
		}
		runtime := fn.Runtime
		if runtime == nil {
			runtime = g.Runtime
		}
		if runtime == nil || *runtime != Runtime {
			c.addf(where, "Runtime must be %s (in the function or Globals)", Runtime)
		}
		arch := fn.Architectures
		if arch == nil && g.Architectures != nil {
			arch = *g.Architectures
		}
		if !slices.Equal(arch, []string{Arch}) {
			c.addf(where, "Architectures must be [%s], is %v", Arch, arch)
		}
		handler := fn.Handler
		if handler == nil {
			handler = g.Handler
		}
		if handler == nil || *handler != Handler {
			c.addf(where, "Handler must be %s", Handler)
		}
		if fn.PackageType != nil && *fn.PackageType != "Zip" {
			c.addf(where, "PackageType must be Zip (a bootstrap built by the Makefile)")
		}
		if bm, _ := fn.AWSCloudFormationMetadata["BuildMethod"].(string); bm != BuildMethod {
			c.addf(where, "Metadata.BuildMethod must be %s (sam build runs make build-%s)", BuildMethod, id)
		}
		codeURI := fn.CodeUri
		if codeURI == nil {
			codeURI = g.CodeUri
		}
		if codeURI == nil || codeURI.String == nil || *codeURI.String != "." {
			c.addf(where, "CodeUri must be . (the Makefile is at the repository root)")
		}
	}
	for _, dir := range c.dirs {
		switch n := len(declared[dir]); {
		case n == 0:
			c.addf("functions/"+dir, "no function in template.yaml declares it (want %sFunction)", camel(dir))
		case n > 1:
			c.addf("functions/"+dir, "declared by %d functions: %v", n, declared[dir])
		}
	}
}

// camel is the inverse of FolderOf, without the suffix: run-worker → RunWorker.
func camel(dir string) string {
	var b strings.Builder
	for _, part := range strings.Split(dir, "-") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// timeout returns a function's timeout in seconds (Lambda's default is 3).
func (c *checker) timeout(fn *serverless.Function) int {
	switch g := c.globalFunction(); {
	case fn.Timeout != nil:
		return *fn.Timeout
	case g.Timeout != nil:
		return *g.Timeout
	}
	return 3
}

// environment returns a function's variables merged over Globals'.
func (c *checker) environment(fn *serverless.Function) map[string]string {
	env := map[string]string{}
	if g := c.globalFunction(); g.Environment != nil {
		for k, v := range g.Environment.Variables {
			env[k] = v
		}
	}
	if fn.Environment != nil {
		for k, v := range fn.Environment.Variables {
			env[k] = v
		}
	}
	return env
}

// checkEnvironment checks the variables the code reads (internal/app.ConfigFromEnv).
func (c *checker) checkEnvironment() {
	ids, fns := c.sortedFunctions()
	for _, id := range ids {
		where := "template.yaml " + id
		env := c.environment(fns[id])
		want := map[string]string{"MOLT_TABLE": "AWS::DynamoDB::Table", "MOLT_BUCKET": "AWS::S3::Bucket"}
		for k := range env {
			if strings.HasPrefix(k, "MOLT_QUEUE_") {
				want[k] = "AWS::SQS::Queue"
			}
		}
		for _, k := range sortedKeys(want) {
			v, ok := env[k]
			if !ok {
				c.addf(where, "environment variable %s is missing", k)
				continue
			}
			r, isRef := parseRef(v)
			if !isRef || r.Fn != "Ref" || c.tpl.resourceType(r.Text) != want[k] {
				c.addf(where, "%s must be !Ref of a %s in the template, is %q", k, want[k], v)
			}
		}
		if env["MOLT_LOG_LEVEL"] == "" {
			c.addf(where, "environment variable MOLT_LOG_LEVEL is missing")
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// maybe returns the value of p, or "" when p is nil.
func maybe(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
