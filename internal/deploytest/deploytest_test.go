package deploytest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/deploytest"
)

// root is the repository root, seen from this package.
const root = "../.."

// TestRepository applies every rule to the repository itself.
func TestRepository(t *testing.T) {
	t.Parallel()
	problems, err := deploytest.Check(deploytest.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestWorkedExample uncomments the "#|" lines of template.yaml (a queue, its
// dead-letter queue and alarm, and a worker) and checks the result, so the example
// a new kind of work is copied from stays right.
func TestWorkedExample(t *testing.T) {
	t.Parallel()
	problems, err := deploytest.Check(deploytest.Options{Root: write(t, example(t))})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckCatches breaks the worked example one rule at a time: each rule must
// report the break.
func TestCheckCatches(t *testing.T) {
	t.Parallel()
	const tpl = "template.yaml"
	cases := []struct {
		name   string
		mutate func(t *testing.T, files map[string]string)
		want   string
	}{
		{"runtime", replace(tpl, "Runtime: provided.al2023", "Runtime: provided.al2", 1),
			"Runtime must be provided.al2023"},
		{"architecture", replace(tpl, "Architectures: [arm64]", "Architectures: [x86_64]", 1),
			"Architectures must be [arm64]"},
		{"handler", replace(tpl, "Handler: bootstrap", "Handler: main", 1),
			"Handler must be bootstrap"},
		{"build method", replace(tpl, "BuildMethod: makefile", "BuildMethod: go1.x", 1),
			"ApiFunction: Metadata.BuildMethod must be makefile"},
		{"code uri", replace(tpl, "CodeUri: .", "CodeUri: functions/api", 1),
			"ApiFunction: CodeUri must be ."},
		{"function without a folder", remove("functions/ticker/main.go"),
			"TickerFunction: no functions/ticker/main.go"},
		{"folder without a function", add("functions/naming-worker/main.go", "package main\n"),
			"functions/naming-worker: no function in template.yaml declares it (want NamingWorkerFunction)"},
		{"no sam build rule", replace("Makefile", "build-%Function:", "build-%Fn:", 1),
			"make build-ApiFunction failed"},
		{"sam build differs from make build", replace("Makefile", "$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)", "$(LAMBDA_BUILD) -race -o $(ARTIFACTS_DIR)", -1),
			"builds differently from make build"},
		{"sam build for another architecture", replace("Makefile", "SAM_ARCH  := arm64", "SAM_ARCH  := amd64", 1),
			"want GOOS=linux GOARCH=arm64 CGO_ENABLED=0"},
		{"resource star", replace(tpl, "Resource: !GetAtt Table.Arn", `Resource: "*"`, 1),
			`Resource "*" for dynamodb:GetItem`},
		{"unknown resource", replace(tpl, "!GetAtt Table.Arn", "!GetAtt Tabel.Arn", 1),
			"names Tabel, which is not a resource of the template"},
		{"unknown resource in Sub", replace(tpl, "${Table.Arn}/index/*", "${Tables.Arn}/index/*", 1),
			"names Tables, which is not a resource of the template"},
		{"literal ARN", replace(tpl, "Resource: !GetAtt Table.Arn", "Resource: arn:aws:dynamodb:us-east-1:123456789012:table/molt", 1),
			"is not a resource of this template"},
		{"wildcard action", replace(tpl, "- dynamodb:GetItem", "- dynamodb:*", 1),
			`wildcard action "dynamodb:*"`},
		{"action on the wrong resource", replace(tpl, "Resource: !GetAtt Table.Arn", "Resource: !GetAtt ArtifactsBucket.Arn", 1),
			"dynamodb:GetItem granted on a AWS::S3::Bucket"},
		{"SAM policy template", replace(tpl, "      Policies:\n", "      Policies:\n        - DynamoDBCrudPolicy:\n            TableName: !Ref Table\n", 1),
			"a SAM policy template ([DynamoDBCrudPolicy])"},
		{"managed policy", replace(tpl, "      Policies:\n", "      Policies:\n        - AmazonDynamoDBFullAccess\n", 1),
			"AmazonDynamoDBFullAccess is a managed policy"},
		{"table variable missing", replace(tpl, "        MOLT_TABLE: !Ref Table\n", "", 1),
			"environment variable MOLT_TABLE is missing"},
		{"bucket variable not a reference", replace(tpl, "MOLT_BUCKET: !Ref ArtifactsBucket", "MOLT_BUCKET: my-bucket", 1),
			"MOLT_BUCKET must be !Ref of a AWS::S3::Bucket"},
		{"queue variable names a table", replace(tpl, "MOLT_QUEUE_TURN: !Ref TurnQueue", "MOLT_QUEUE_TURN: !Ref Table", 1),
			"MOLT_QUEUE_TURN must be !Ref of a AWS::SQS::Queue"},
		{"max receive count", replace(tpl, "maxReceiveCount: 5", "maxReceiveCount: 3", 1),
			"RedrivePolicy.maxReceiveCount must be 5"},
		{"no dead-letter queue", replace(tpl, "      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt TurnDeadLetterQueue.Arn\n        maxReceiveCount: 5\n", "", 1),
			"TurnQueue: no dead-letter queue"},
		{"dead-letter queue without alarm", replace(tpl, "Value: !GetAtt TurnDeadLetterQueue.QueueName", "Value: !GetAtt TurnQueue.QueueName", 1),
			"TurnDeadLetterQueue: dead-letter queue without an alarm"},
		{"no partial batch failures", replace(tpl, "FunctionResponseTypes: [ReportBatchItemFailures]", "MaximumBatchingWindowInSeconds: 1", 1),
			"FunctionResponseTypes must include ReportBatchItemFailures"},
		{"short visibility timeout", replace(tpl, "VisibilityTimeout: 5400", "VisibilityTimeout: 900", 1),
			"TurnQueue's VisibilityTimeout 900s is under 6 × the function's Timeout 900s"},
		{"unconsumed queue", replace(tpl, "Queue: !GetAtt TurnQueue.Arn", "Queue: !GetAtt TurnDeadLetterQueue.Arn", 1),
			"consumes TurnDeadLetterQueue, a dead-letter queue"},
		{"ttl attribute", replace(tpl, "AttributeName: expires_at", "AttributeName: ttl", 1),
			"TTL must be enabled on expires_at"},
		{"point-in-time recovery", replace(tpl, "PointInTimeRecoveryEnabled: true", "PointInTimeRecoveryEnabled: false", 1),
			"point-in-time recovery must be on"},
		{"encryption at rest", replace(tpl, "SSEEnabled: true", "SSEEnabled: false", 1),
			"SSESpecification.SSEEnabled must be true"},
		{"index projection", replace(tpl, "Projection: {ProjectionType: ALL}", "Projection: {ProjectionType: KEYS_ONLY}", 1),
			"gsi1 must project ALL"},
		{"public bucket", replace(tpl, "RestrictPublicBuckets: true", "RestrictPublicBuckets: false", 1),
			"PublicAccessBlockConfiguration must set all four blocks to true"},
		{"event not JSON", add("events/api-broken.json", "{"),
			"events/api-broken.json: not valid JSON"},
		{"event of no known shape", add("events/api-odd.json", `{"hello": "world"}`),
			"events/api-odd.json: not a known event"},
		{"event with an unknown field", func(t *testing.T, files map[string]string) {
			t.Helper()
			replace("events/api-health.json", `"version": "2.0",`, `"version": "2.0", "extra": 1,`, 1)(t, files)
		}, "events/api-health.json: not a known event"},
		{"event for a function that does not take it", func(t *testing.T, files map[string]string) {
			t.Helper()
			files["events/ticker-health.json"] = files["events/api-health.json"]
		}, "events/ticker-health.json: is an API Gateway HTTP API (payload 2.0) request, but TickerFunction receives [EventBridge event]"},
		{"event named after no function", func(t *testing.T, files map[string]string) {
			t.Helper()
			files["events/health.json"] = files["events/api-health.json"]
		}, "events/health.json: name it <folder>-<case>.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := example(t)
			tc.mutate(t, files)
			// Only the Makefile cases run make: it is the slow part.
			skipMake := !strings.Contains(tc.want, "make") && !strings.Contains(tc.want, "GOARCH")
			problems, err := deploytest.Check(deploytest.Options{Root: write(t, files), SkipMake: skipMake})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				if strings.Contains(p.String(), tc.want) {
					return
				}
			}
			t.Errorf("no problem contains %q; got %d:", tc.want, len(problems))
			for _, p := range problems {
				t.Log(p)
			}
		})
	}
}

func TestFolderOf(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"ApiFunction": "api", "TickerFunction": "ticker", "RunWorkerFunction": "run-worker",
		"Turn2WorkerFunction": "turn2-worker", "Function": "", "Api": "", "HttpApi": "",
	} {
		got, ok := deploytest.FolderOf(id)
		if got != want || ok != (want != "") {
			t.Errorf("FolderOf(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}

// repository returns the files Check reads: template, Makefile, events, and a
// stand-in main.go per function folder (the Makefile's rules run with a fake go).
func repository(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	read := func(rel string) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		files[rel] = string(b)
	}
	read("template.yaml")
	read("Makefile")
	events, err := filepath.Glob(filepath.Join(root, "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		read(filepath.Join("events", filepath.Base(e)))
	}
	mains, err := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) == 0 {
		t.Fatal("no functions/*/main.go")
	}
	for _, m := range mains {
		files[filepath.Join("functions", filepath.Base(filepath.Dir(m)), "main.go")] = "package main\n"
	}
	return files
}

// example returns the repository with the worked example uncommented and its
// worker's folder present.
func example(t *testing.T) map[string]string {
	t.Helper()
	files := repository(t)
	tpl := files["template.yaml"]
	if strings.Count(tpl, "#| ") < 20 {
		t.Fatal(`template.yaml has lost its worked example ("#|" lines)`)
	}
	tpl = strings.ReplaceAll(tpl, "#| ", "")
	files["template.yaml"] = strings.ReplaceAll(tpl, "#|", "")
	files["functions/turn-worker/main.go"] = "package main\n"
	return files
}

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// replace returns a mutation replacing old by new n times (-1: all) in a file; it
// fails when old is not there, so a case cannot pass by changing nothing.
func replace(file, old, new string, n int) func(*testing.T, map[string]string) {
	return func(t *testing.T, files map[string]string) {
		t.Helper()
		if !strings.Contains(files[file], old) {
			t.Fatalf("%s has no %q to replace", file, old)
		}
		files[file] = strings.Replace(files[file], old, new, n)
	}
}

func add(file, content string) func(*testing.T, map[string]string) {
	return func(t *testing.T, files map[string]string) {
		t.Helper()
		files[file] = content
	}
}

func remove(file string) func(*testing.T, map[string]string) {
	return func(t *testing.T, files map[string]string) {
		t.Helper()
		if _, ok := files[file]; !ok {
			t.Fatalf("no %s to remove", file)
		}
		delete(files, file)
	}
}
