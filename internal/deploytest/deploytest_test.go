package deploytest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/deploytest"
)

// root is the repository root, seen from this package.
const root = "../.."

// TestRepository applies every rule to the repository itself.
func TestRepository(t *testing.T) {
	t.Parallel()
	problems, err := deploytest.Check(deploytest.Options{Root: root, Kinds: app.Kinds()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckCatches breaks a copy of the repository one rule at a time: each rule
// must report the break.
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
		{"folder without a function", add("functions/notice-worker/main.go", "package main\n"),
			"functions/notice-worker: no function in template.yaml declares it (want NoticeWorkerFunction)"},
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
		{"dead-letter retention", replace(tpl, "MessageRetentionPeriod: 1209600", "MessageRetentionPeriod: 345600", 1),
			"TurnDeadLetterQueue: a dead-letter queue keeps messages 1209600 s"},
		{"queue not encrypted", replace(tpl, "SqsManagedSseEnabled: true", "SqsManagedSseEnabled: false", 1),
			"TurnQueue: not encrypted at rest"},
		{"dead-letter queue without alarm", replace(tpl, "Value: !GetAtt TurnDeadLetterQueue.QueueName", "Value: !GetAtt TurnQueue.QueueName", 1),
			"TurnDeadLetterQueue: dead-letter queue without an alarm"},
		{"no partial batch failures", replace(tpl, "FunctionResponseTypes: [ReportBatchItemFailures]", "MaximumBatchingWindowInSeconds: 1", 1),
			"FunctionResponseTypes must include ReportBatchItemFailures"},
		{"short visibility timeout", replace(tpl, "VisibilityTimeout: 5400", "VisibilityTimeout: 900", 1),
			"TurnQueue's VisibilityTimeout 900s is under 6 × the function's Timeout 900s"},
		{"unconsumed queue", replace(tpl, "Queue: !GetAtt TurnQueue.Arn", "Queue: !GetAtt TurnDeadLetterQueue.Arn", 1),
			"consumes TurnDeadLetterQueue, a dead-letter queue"},
		{"missing worker function", cut(tpl, "  RunWorkerFunction:\n", "  # ---- applies"),
			"functions/run-worker: no function in template.yaml declares it (want RunWorkerFunction)"},
		{"worker without an SQS event source", replace(tpl, "          Type: SQS\n          Properties:\n            Queue: !GetAtt TurnQueue.Arn\n",
			"          Type: Schedule\n          Properties:\n            Schedule: rate(1 minute)\n", 1),
			"TurnWorkerFunction: a worker needs an SQS event source"},
		{"worker woken by another kind's queue", replace(tpl, "MOLT_QUEUE_RUN: !Ref RunQueue", "MOLT_QUEUE_RUN: !Ref ApplyQueue", 1),
			"RunWorkerFunction: consumes [RunQueue], but MOLT_QUEUE_RUN names ApplyQueue"},
		{"worker nobody can wake", replace(tpl, "        MOLT_QUEUE_APPLY: !Ref ApplyQueue\n", "", 1),
			"ApplyWorkerFunction: MOLT_QUEUE_APPLY is missing"},
		{"queue variable without a worker", replace(tpl, "        MOLT_QUEUE_TURN: !Ref TurnQueue\n", "        MOLT_QUEUE_TURN: !Ref TurnQueue\n        MOLT_QUEUE_NOTICE: !Ref TurnDeadLetterQueue\n", 1),
			"MOLT_QUEUE_NOTICE names a queue, but no NoticeWorkerFunction consumes it"},
		{"send to any queue", replace(tpl, "Resource:\n                - !GetAtt TurnQueue.Arn\n                - !GetAtt RunQueue.Arn\n                - !GetAtt ApplyQueue.Arn\n                - !GetAtt NamingQueue.Arn\n                - !GetAtt CampaignQueue.Arn\n", "Resource: \"*\"\n", 1),
			`ApiFunction Policies[0] Statement Wake: Resource "*" for sqs:SendMessage`},
		{"any object of the bucket", replace(tpl, `- !Sub "${ArtifactsBucket.Arn}/runs/*"`, `- "*"`, 1),
			`ApiFunction Policies[0] Statement ArtifactsRead: Resource "*" for s3:GetObject`},
		{"model in every region without the profile condition", replace(tpl,
			"                Condition:\n                  StringLike:\n                    bedrock:InferenceProfileArn: !Sub \"arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/*\"\n", "", 1),
			"TurnWorkerFunction Policies[0] Statement ModelThroughProfile: Resource arn:${AWS::Partition}:bedrock:*::foundation-model/* needs a Condition on bedrock:InferenceProfileArn"},
		{"more than invoking the model", replace(tpl, "- bedrock:InvokeModel # Converse", "- bedrock:CreateModelCustomizationJob", 1),
			"bedrock:CreateModelCustomizationJob granted on arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/*: only"},
		{"model for a function without one", replace(tpl, "            # Re-sends lost wake-ups and wakes requeued or resumed items, every kind.\n",
			"            - Sid: Model\n              Effect: Allow\n              Action: [bedrock:InvokeModel]\n"+
				"              Resource: !Sub \"arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/*\"\n", 1),
			"TickerFunction Policies[0]: bedrock:InvokeModel granted to a function that configures no model (MOLT_MODEL)"},
		{"Fn::If on an unknown condition", replace(tpl, "              - UseBedrock\n", "              - UseBedrok\n", 1),
			"Fn::If on UseBedrok, which is not a condition of the template"},
		{"lifecycle expires runs", replace(tpl, "Prefix: archive/", "Prefix: runs/", 1),
			`lifecycle rule archives-after-purge: expires objects under "runs/"`},
		{"lifecycle expires everything", replace(tpl, "            Prefix: archive/\n", "", 1),
			`lifecycle rule archives-after-purge: expires objects under ""`},
		{"lifecycle expires archives before the purge", replace(tpl, "ExpirationInDays: 32", "ExpirationInDays: 7", 1),
			"ExpirationInDays 7 is before the tick's purge"},
		{"ttl attribute", replace(tpl, "AttributeName: expires_at", "AttributeName: ttl", 1),
			"TTL must be enabled on expires_at"},
		{"point-in-time recovery", replace(tpl, "PointInTimeRecoveryEnabled: true", "PointInTimeRecoveryEnabled: false", 1),
			"point-in-time recovery must be on"},
		{"encryption at rest", replace(tpl, "SSEEnabled: true", "SSEEnabled: false", 1),
			"SSESpecification.SSEEnabled must be true"},
		{"index projection", replace(tpl, "Projection: {ProjectionType: ALL}", "Projection: {ProjectionType: KEYS_ONLY}", 1),
			"gsi1 must project ALL"},
		{"age index missing", replace(tpl, "IndexName: gsi4", "IndexName: gsi9", 1),
			"index gsi4 is missing"},
		{"age index key", replace(tpl, "- {AttributeName: gsi4sk, KeyType: RANGE}", "- {AttributeName: gsi2sk, KeyType: RANGE}", 1),
			"gsi4 key must be gsi2pk (HASH), gsi4sk (RANGE)"},
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
		{"SQS event for a function without a queue", func(t *testing.T, files map[string]string) {
			t.Helper()
			files["events/api-wake.json"] = files["events/run-worker-wake.json"]
		}, "events/api-wake.json: is an SQS event, but ApiFunction receives [API Gateway HTTP API (payload 2.0) request]"},
		{"function URL event for the API", func(t *testing.T, files map[string]string) {
			t.Helper()
			files["events/api-card.json"] = files["events/a2a-stream-card.json"]
		}, "events/api-card.json: is an Lambda function URL request, but ApiFunction receives [API Gateway HTTP API (payload 2.0) request]"},
		{"streaming function without a URL", replace(tpl, "      FunctionUrlConfig:\n        AuthType: NONE\n        InvokeMode: RESPONSE_STREAM\n", "", 1),
			"A2aStreamFunction: functions/a2a-stream starts lambdaurl: declare FunctionUrlConfig"},
		{"function URL buffered", replace(tpl, "InvokeMode: RESPONSE_STREAM", "InvokeMode: BUFFERED", 1),
			"A2aStreamFunction: FunctionUrlConfig.InvokeMode must be RESPONSE_STREAM"},
		{"function URL auth type", replace(tpl, "AuthType: NONE", "AuthType: OPEN", 1),
			"A2aStreamFunction: FunctionUrlConfig.AuthType must be NONE or AWS_IAM"},
		{"function URL without an output", replace(tpl, "    Value: !GetAtt A2aStreamFunctionUrl.FunctionUrl\n", "    Value: none\n", 1),
			"A2aStreamFunction: no output gives its URL"},
		{"function URL on a function that does not stream", replace(tpl, "      Timeout: 29 # API Gateway gives up after 30 s\n", "      Timeout: 29 # API Gateway gives up after 30 s\n      FunctionUrlConfig: {AuthType: NONE, InvokeMode: RESPONSE_STREAM}\n", 1),
			"ApiFunction: FunctionUrlConfig on a function whose main does not start lambdaurl"},
		// The SearXNG image function and who may invoke it.
		{"search grant missing", replace(tpl, "            # GET /api/search: the private SearXNG, that function only.\n            - Sid: Search\n              Effect: Allow\n              Action:\n                - lambda:InvokeFunction\n              Resource: !GetAtt SearxngFunction.Arn\n", "", 1),
			"ApiFunction: MOLT_SEARXNG_FUNCTION names SearxngFunction, but no statement always grants lambda:InvokeFunction on !GetAtt SearxngFunction.Arn"},
		{"search grant on every function", replace(tpl, "Resource: !GetAtt SearxngFunction.Arn", `Resource: "*"`, 1),
			"ApiFunction Policies[0] Statement Search: lambda:InvokeFunction on *: grant it on !GetAtt <image function>.Arn exactly"},
		{"search grant on every version and alias", replace(tpl, "Resource: !GetAtt SearxngFunction.Arn", `Resource: !Sub "${SearxngFunction.Arn}:*"`, 1),
			"ApiFunction Policies[0] Statement Search: lambda:InvokeFunction on"},
		{"search grant on every function of the account", replace(tpl, "Resource: !GetAtt SearxngFunction.Arn",
			`Resource: !Sub "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:*"`, 1),
			"ApiFunction Policies[0] Statement Search: lambda:InvokeFunction on"},
		{"search grant on another function", replace(tpl, "Resource: !GetAtt SearxngFunction.Arn", "Resource: !GetAtt TickerFunction.Arn", 1),
			"ApiFunction Policies[0] Statement Search: lambda:InvokeFunction on {{GetAtt TickerFunction.Arn}}: grant it on !GetAtt <image function>.Arn exactly (one of [SearxngFunction])"},
		{"search grant under a condition only", replace(tpl, "            - Sid: Search\n              Effect: Allow\n              Action:\n                - lambda:InvokeFunction\n              Resource: !GetAtt SearxngFunction.Arn\n",
			"            - !If\n              - UseBedrock\n              - Sid: Search\n                Effect: Allow\n                Action:\n                  - lambda:InvokeFunction\n                Resource: !GetAtt SearxngFunction.Arn\n              - !Ref AWS::NoValue\n", 1),
			"ApiFunction: MOLT_SEARXNG_FUNCTION names SearxngFunction, but no statement always grants"},
		{"more Lambda than invoking", replace(tpl, "- lambda:InvokeFunction", "- lambda:UpdateFunctionCode", 1),
			"lambda:UpdateFunctionCode granted: lambda:InvokeFunction is the only Lambda action"},
		{"search grant to a function that does not search", replace(tpl, "            # Re-sends lost wake-ups and wakes requeued or resumed items, every kind.\n",
			"            - Sid: Search\n              Effect: Allow\n              Action: [lambda:InvokeFunction]\n              Resource: !GetAtt SearxngFunction.Arn\n", 1),
			"TickerFunction: lambda:InvokeFunction granted to a function that does not search"},
		{"search function variable missing", replace(tpl, "          # web_search reaches SearXNG through lambda:InvokeFunction.\n          MOLT_SEARXNG_FUNCTION: !Ref SearxngFunction\n", "", 1),
			"TurnWorkerFunction: MOLT_SEARXNG_FUNCTION is missing"},
		{"search function variable names a zip function", replace(tpl, "MOLT_SEARXNG_FUNCTION: !Ref SearxngFunction", "MOLT_SEARXNG_FUNCTION: !Ref TickerFunction", 1),
			"ApiFunction: MOLT_SEARXNG_FUNCTION must be !Ref of an image function"},
		{"search function variable for everyone", replace(tpl, "        MOLT_LOG_LEVEL: !Ref LogLevel\n", "        MOLT_LOG_LEVEL: !Ref LogLevel\n        MOLT_SEARXNG_FUNCTION: !Ref SearxngFunction\n", 1),
			"RunWorkerFunction: MOLT_SEARXNG_FUNCTION is set, but functions/run-worker does not search"},
		{"image function with a public URL", replace(tpl, "      PackageType: Image\n", "      PackageType: Image\n      FunctionUrlConfig: {AuthType: NONE}\n", 1),
			"SearxngFunction: an image function has no function URL"},
		{"image function with an API route", replace(tpl, "      PackageType: Image\n", "      PackageType: Image\n      Events:\n        Search:\n          Type: HttpApi\n          Properties: {ApiId: !Ref HttpApi, Path: /searxng, Method: GET}\n", 1),
			"SearxngFunction: an image function has no event source ([Search])"},
		{"image function with a runtime from Globals", replace(tpl, "    Architectures: [arm64]\n", "    Architectures: [arm64]\n    Runtime: provided.al2023\n", 1),
			"SearxngFunction: an image function has no Runtime, Handler or Layers"},
		{"image function without its Dockerfile", replace(tpl, "DockerContext: ./infra/searxng", "DockerContext: ./infra/searx", 1),
			"SearxngFunction: Metadata.DockerContext ./infra/searx holds no Dockerfile"},
		{"image function without a tag", replace(tpl, "      DockerTag: searxng-v1\n", "", 1),
			"SearxngFunction: Metadata.DockerTag is missing"},
		{"SearXNG without its secret", replace(tpl, `          SEARXNG_SECRET: !Sub "{{resolve:secretsmanager:${SearxngSecret}:SecretString}}"`, "          SEARXNG_BASE_URL: http://localhost/", 1),
			"SearxngFunction: SEARXNG_SECRET is missing"},
		{"SearXNG secret as a value", replace(tpl, `SEARXNG_SECRET: !Sub "{{resolve:secretsmanager:${SearxngSecret}:SecretString}}"`, "SEARXNG_SECRET: ultrasecretkey", 1),
			"SearxngFunction: SEARXNG_SECRET must be a Secrets Manager reference"},
		// Kinds of work and the campaign worker's remote tokens.
		{"registered kind without a worker", func(t *testing.T, files map[string]string) {
			t.Helper()
			remove("functions/campaign-worker/main.go")(t, files)
			cut(tpl, "  CampaignWorkerFunction:\n", "  # ---- web search")(t, files)
		}, `kind "campaign" is registered but has no CampaignWorkerFunction`},
		{"worker of no registered kind", func(t *testing.T, files map[string]string) {
			t.Helper()
			files["functions/notice-worker/main.go"] = "package main\n"
			replace(tpl, "  CampaignWorkerFunction:\n", "  NoticeWorkerFunction:\n    Type: AWS::Serverless::Function\n    Metadata: {BuildMethod: makefile}\n    Properties: {CodeUri: ., Runtime: provided.al2023, Handler: bootstrap}\n  CampaignWorkerFunction:\n", 1)(t, files)
		}, `functions/notice-worker: no kind "notice" is registered`},
		{"worker without its sample", remove("events/campaign-worker-wake.json"),
			"functions/campaign-worker: no events/campaign-worker-wake.json"},
		{"tick cannot wake campaigns", replace(tpl, "                - !GetAtt NamingQueue.Arn\n                - !GetAtt CampaignQueue.Arn\n                - !GetAtt DecisionQueue.Arn\n\n  # ---- turns", "                - !GetAtt NamingQueue.Arn\n                - !GetAtt DecisionQueue.Arn\n\n  # ---- turns", 1),
			"TickerFunction: no statement always grants sqs:SendMessage on CampaignQueue: the tick re-sends campaign wake-ups"},
		{"tick cannot wake decisions", replace(tpl, "                - !GetAtt CampaignQueue.Arn\n                - !GetAtt DecisionQueue.Arn\n\n  # ---- turns", "                - !GetAtt CampaignQueue.Arn\n\n  # ---- turns", 1),
			"TickerFunction: no statement always grants sqs:SendMessage on DecisionQueue: the tick re-sends decision wake-ups"},
		{"no decision worker", cut(tpl, "  DecisionWorkerFunction:\n", "\n  # ---- web search"),
			`kind "decision" is registered but has no DecisionWorkerFunction`},
		{"campaign worker without its secret grant", cut(tpl, "            # The remotes' tokens: only the secrets under MOLT_REMOTE_SECRET_PREFIX.\n", "\n  # ---- decisions"),
			"CampaignWorkerFunction: functions/campaign-worker reads remote tokens, but no statement always grants secretsmanager:GetSecretValue on the secrets under molt/${AWS::StackName}/remotes/"},
		{"secret grant on every secret", replace(tpl, "secret:molt/${AWS::StackName}/remotes/*", "secret:*", 1),
			"Statement RemoteTokens: secretsmanager:GetSecretValue on {{Sub arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:*}}: grant it on"},
		{"secret grant outside the prefix", replace(tpl, "secret:molt/${AWS::StackName}/remotes/*", "secret:molt/${AWS::StackName}/*", 1),
			"grant it on !Sub \"arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:molt/${AWS::StackName}/remotes/*\" exactly"},
		{"more than reading secrets", replace(tpl, "- secretsmanager:GetSecretValue", "- secretsmanager:PutSecretValue", 1),
			"secretsmanager:PutSecretValue granted: secretsmanager:GetSecretValue is the only Secrets Manager action"},
		{"secret grant to a function that reads no token", replace(tpl, "            # Re-sends lost wake-ups and wakes requeued or resumed items, every kind.\n",
			"            - Sid: Secrets\n              Effect: Allow\n              Action: [secretsmanager:GetSecretValue]\n"+
				"              Resource: !Sub \"arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:molt/${AWS::StackName}/remotes/*\"\n", 1),
			"TickerFunction Policies[0] Statement Secrets: [secretsmanager:GetSecretValue] granted to a function that reads no remote token"},
		{"secret prefix variable missing", replace(tpl, "        MOLT_REMOTE_SECRET_PREFIX: !Sub \"molt/${AWS::StackName}/remotes/\"\n", "", 1),
			"CampaignWorkerFunction: MOLT_REMOTE_SECRET_PREFIX must name the secrets' prefix"},
		{"secret prefix with a wildcard", replace(tpl, "MOLT_REMOTE_SECRET_PREFIX: !Sub \"molt/${AWS::StackName}/remotes/\"", "MOLT_REMOTE_SECRET_PREFIX: \"*/\"", 1),
			"CampaignWorkerFunction: MOLT_REMOTE_SECRET_PREFIX must name the secrets' prefix"},
		{"worker sample of another kind", func(t *testing.T, files map[string]string) {
			t.Helper()
			files["events/turn-worker-run.json"] = files["events/run-worker-wake.json"]
		}, "events/turn-worker-run.json: no record is a turn wake-up"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := repository(t)
			tc.mutate(t, files)
			// Only the Makefile cases run make: it is the slow part.
			skipMake := !strings.Contains(tc.want, "make") && !strings.Contains(tc.want, "GOARCH")
			problems, err := deploytest.Check(deploytest.Options{Root: write(t, files), SkipMake: skipMake, Kinds: app.Kinds()})
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

// TestGrants reads what the template grants each function, as functest checks
// the calls a function makes against it.
func TestGrants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fn, action, id, path string
		want                 bool
	}{
		{"TurnWorkerFunction", "dynamodb:GetItem", "Table", "", true},
		{"TurnWorkerFunction", "dynamodb:GetItem", "Table", "/index/gsi1", false},
		{"TurnWorkerFunction", "dynamodb:BatchWriteItem", "Table", "", false},
		{"TurnWorkerFunction", "s3:PutObject", "ArtifactsBucket", "/runs/01X/snapshot/meta.json", true},
		{"TurnWorkerFunction", "s3:PutObject", "ArtifactsBucket", "/applies/01X/MANIFEST.json", false},
		{"TurnWorkerFunction", "s3:GetObject", "ArtifactsBucket", "/runs/01X/snapshot/meta.json", false},
		{"TurnWorkerFunction", "sqs:SendMessage", "RunQueue", "", true},
		{"TurnWorkerFunction", "sqs:SendMessage", "ApplyQueue", "", false},
		{"RunWorkerFunction", "dynamodb:Query", "Table", "/index/gsi2", true},
		{"RunWorkerFunction", "dynamodb:DeleteItem", "Table", "", false},
		{"ApplyWorkerFunction", "dynamodb:ConditionCheckItem", "Table", "", true},
		{"ApplyWorkerFunction", "s3:ListBucket", "ArtifactsBucket", "", true},
		{"ApplyWorkerFunction", "s3:ListBucket", "ArtifactsBucket", "/applies/x", false},
		{"TickerFunction", "dynamodb:Query", "Table", "", false},
		{"TickerFunction", "s3:PutObject", "ArtifactsBucket", "/archive/run-01X.zip", true},
		{"TickerFunction", "s3:PutObject", "ArtifactsBucket", "/runs/01X/x", false},
		{"ApiFunction", "s3:DeleteObject", "ArtifactsBucket", "/archive/apply-01X.zip", true},
		{"ApiFunction", "sqs:SendMessage", "TurnDeadLetterQueue", "", false},
		{"ApiFunction", "lambda:InvokeFunction", "SearxngFunction", "", true},
		{"ApiFunction", "lambda:InvokeFunction", "SearxngFunction", ":1", false},
		{"TurnWorkerFunction", "lambda:InvokeFunction", "SearxngFunction", "", true},
		{"RunWorkerFunction", "lambda:InvokeFunction", "SearxngFunction", "", false},
		{"A2aStreamFunction", "lambda:InvokeFunction", "SearxngFunction", "", false},
		{"TickerFunction", "lambda:InvokeFunction", "SearxngFunction", "", false},
		{"TickerFunction", "sqs:SendMessage", "CampaignQueue", "", true},
		{"ApiFunction", "sqs:SendMessage", "CampaignQueue", "", true},
		{"CampaignWorkerFunction", "dynamodb:UpdateItem", "Table", "", true},
		{"CampaignWorkerFunction", "dynamodb:DeleteItem", "Table", "", false},
		{"CampaignWorkerFunction", "dynamodb:Query", "Table", "/index/gsi2", false},
		{"CampaignWorkerFunction", "sqs:SendMessage", "CampaignQueue", "", true},
		{"CampaignWorkerFunction", "sqs:SendMessage", "TurnQueue", "", false},
		{"CampaignWorkerFunction", "s3:GetObject", "ArtifactsBucket", "/runs/x", false},
	}
	grants := map[string][]deploytest.Grant{}
	for _, c := range cases {
		if _, ok := grants[c.fn]; !ok {
			g, err := deploytest.Grants(root, c.fn)
			if err != nil {
				t.Fatal(err)
			}
			grants[c.fn] = g
		}
		if got := deploytest.Allows(grants[c.fn], c.action, c.id, c.path); got != c.want {
			t.Errorf("%s: %s on %s%s allowed = %v, want %v", c.fn, c.action, c.id, c.path, got, c.want)
		}
	}
	// The model's statements are conditional (UseBedrock): never counted as granted.
	for fn, gs := range grants {
		for _, g := range gs {
			for _, a := range g.Actions {
				if strings.HasPrefix(a, "bedrock:") {
					t.Errorf("%s: %s counted as always granted (statement %s)", fn, a, g.Sid)
				}
			}
		}
	}
	// Remote tokens: the campaign worker reads its stack's remote secrets only.
	for _, c := range []struct {
		fn, id string
		want   bool
	}{
		{"CampaignWorkerFunction", "molt/prod/remotes/peer", true},
		{"CampaignWorkerFunction", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:molt/prod/remotes/peer-AbCdEf", true},
		{"CampaignWorkerFunction", "molt/staging/remotes/peer", false},
		{"CampaignWorkerFunction", "molt/prod/openai", false},
		{"ApiFunction", "molt/prod/remotes/peer", false},
		{"TickerFunction", "molt/prod/remotes/peer", false},
	} {
		g, err := deploytest.Grants(root, c.fn)
		if err != nil {
			t.Fatal(err)
		}
		if got := deploytest.AllowsSecret(g, c.id, "prod"); got != c.want {
			t.Errorf("%s: read secret %s in stack prod allowed = %v, want %v", c.fn, c.id, got, c.want)
		}
	}
	if _, err := deploytest.Grants(root, "NoSuchFunction"); err == nil {
		t.Error("Grants of an undeclared function: no error")
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
// stand-in main.go per function folder (the Makefile's rules run with a fake go)
// that keeps only whether the real one starts lambdaurl.
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
		stub := "package main\n"
		if b, err := os.ReadFile(m); err == nil && strings.Contains(string(b), deploytest.LambdaURLImport) {
			stub += "\nimport _ " + deploytest.LambdaURLImport + "\n"
		}
		files[filepath.Join("functions", filepath.Base(filepath.Dir(m)), "main.go")] = stub
	}
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

// cut removes a file's text from the first from up to (not including) the next to.
func cut(file, from, to string) func(*testing.T, map[string]string) {
	return func(t *testing.T, files map[string]string) {
		t.Helper()
		s := files[file]
		i := strings.Index(s, from)
		j := strings.Index(s[max(i, 0):], to)
		if i < 0 || j < 0 {
			t.Fatalf("%s has no %q … %q to cut", file, from, to)
		}
		files[file] = s[:i] + s[i+j:]
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
