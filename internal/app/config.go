package app

import (
	"errors"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/naming"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/search"
	"github.com/molt-dev/molt/internal/supervisor"
)

// Backends.
const (
	BackendLocal = "local" // SQLite file, in-process queues, blob folder
	BackendAWS   = "aws"   // DynamoDB, SQS, S3
)

// Config names the adapters to build.
type Config struct {
	Backend string            // BackendLocal or BackendAWS
	DataDir string            // local: where molt.db and blobs live
	Table   string            // aws: DynamoDB table
	Bucket  string            // aws: S3 bucket
	Queues  map[string]string // aws: work kind → SQS queue URL
	// Chat tunes the turn runtime (zero fields: defaults); see chat.Config.
	Chat chat.Config
	// Runs tunes the evolution run worker (zero fields: defaults); see runs.Config.
	Runs runs.Config
	// Applies tunes rollback and retention (zero fields: defaults); see applies.Config.
	Applies applies.Config
	// A2AWait bounds a blocking A2A SendMessage (default 25 s, under API
	// Gateway's 30 s); A2AStreamURL is the base URL of the streaming function
	// URL, listed in agent cards.
	A2AWait      time.Duration
	A2AStreamURL string
	// Naming tunes the naming worker (zero fields: defaults); see naming.Config.
	Naming naming.Config
	// RequestTimeout is every API request's deadline (MOLT_REQUEST_TIMEOUT;
	// zero: httpapi.DefaultRequestTimeout, 25 s).
	RequestTimeout time.Duration
	// Supervisor tunes the campaign supervisor (zero fields: defaults); see
	// supervisor.Config. Deployment is MOLT_DEPLOYMENT.
	Supervisor supervisor.Config
	// Search configures web search and fetch (zero: auto without SearXNG, i.e.
	// DuckDuckGo); see search.ConfigFromEnv for its variables.
	Search search.Config
	// SQLiteSync is the local store's durability (MOLT_SQLITE_SYNC): SyncFull
	// (the default, for "") or SyncNormal; see sqlite.Sync.
	SQLiteSync string

	envErr error // a malformed tuning variable, reported by Validate
}

// Environment variables read by ConfigFromEnv.
const (
	EnvBackend     = "MOLT_BACKEND"
	EnvData        = "MOLT_DATA"
	EnvTable       = "MOLT_TABLE"
	EnvBucket      = "MOLT_BUCKET"
	EnvQueuePrefix = "MOLT_QUEUE_" // MOLT_QUEUE_TURN=https://… (kind upper-cased)

	EnvTurnBudget    = "MOLT_TURN_BUDGET"    // turns running at once (default 32)
	EnvTurnTimeout   = "MOLT_TURN_TIMEOUT"   // heartbeat staleness of a turn, e.g. 3m
	EnvCompactTokens = "MOLT_COMPACT_TOKENS" // transcript tokens that trigger compaction
	EnvA2AWait       = "MOLT_A2A_WAIT"       // the bound of a blocking A2A send, e.g. 25s
	EnvA2AStreamURL  = "MOLT_A2A_STREAM_URL" // the streaming function URL's base

	EnvRequestTimeout = "MOLT_REQUEST_TIMEOUT" // deadline of an API request, e.g. 25s
	EnvSQLiteSync     = "MOLT_SQLITE_SYNC"     // local store durability: full (default) or normal
	EnvDeployment     = "MOLT_DEPLOYMENT"      // this deployment's name: campaigns' default controller is molt-<name>
	// EnvRemoteSecretPrefix: the prefix of the Secrets Manager secret names
	// campaigns' token_ref may name (template.yaml's RemoteSecretPrefix, the
	// prefix of the campaign worker's secretsmanager:GetSecretValue grant).
	EnvRemoteSecretPrefix = "MOLT_REMOTE_SECRET_PREFIX"
)

// The values of MOLT_SQLITE_SYNC.
const (
	SyncFull   = "full"   // fsync at every commit (the default)
	SyncNormal = "normal" // fsync at checkpoints: the last acknowledged writes can be lost on power loss
)

// ConfigFromEnv reads the configuration from environment variables (environ is
// os.Environ()). On Lambda (AWS_LAMBDA_FUNCTION_NAME set) the backend is always aws.
func ConfigFromEnv(environ []string) Config {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	c := Config{
		Backend: env[EnvBackend],
		DataDir: env[EnvData],
		Table:   env[EnvTable],
		Bucket:  env[EnvBucket],
		Queues:  map[string]string{},
	}
	if env["AWS_LAMBDA_FUNCTION_NAME"] != "" {
		c.Backend = BackendAWS
	}
	c.A2AStreamURL = env[EnvA2AStreamURL]
	c.Supervisor.Deployment = strings.TrimSpace(env[EnvDeployment])
	c.Supervisor.SecretPrefix = strings.TrimSpace(env[EnvRemoteSecretPrefix])
	if v := strings.TrimSpace(env[EnvA2AWait]); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 15*time.Minute {
			c.envErr = errors.Join(c.envErr, molt.Invalid(EnvA2AWait, "%s must be a duration between 1s and 15m", EnvA2AWait))
		}
		c.A2AWait = d
	}
	if c.Backend == "" {
		c.Backend = BackendLocal
	}
	if c.DataDir == "" {
		c.DataDir = ".molt"
	}
	if c.Table == "" {
		c.Table = "molt"
	}
	if c.Bucket == "" {
		c.Bucket = "molt-artifacts"
	}
	for k, v := range env {
		if kind, ok := strings.CutPrefix(k, EnvQueuePrefix); ok && v != "" {
			c.Queues[strings.ToLower(kind)] = v
		}
	}
	c.Chat, c.envErr = chatFromEnv(env)
	if v := strings.TrimSpace(env[EnvRequestTimeout]); v != "" && c.envErr == nil {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxRequestTimeout {
			c.envErr = molt.Invalid(EnvRequestTimeout, "%s must be a duration from 1s to %s, such as 25s", EnvRequestTimeout, maxRequestTimeout)
		}
		c.RequestTimeout = d
	}
	c.Search = search.ConfigFromEnv(environ)
	switch v := strings.ToLower(strings.TrimSpace(env[EnvSQLiteSync])); v {
	case "", SyncFull:
		c.SQLiteSync = SyncFull
	case SyncNormal:
		c.SQLiteSync = SyncNormal
	default:
		c.envErr = errors.Join(c.envErr, molt.Invalid(EnvSQLiteSync, "%s must be %q (the default) or %q, not %q",
			EnvSQLiteSync, SyncFull, SyncNormal, env[EnvSQLiteSync]))
	}
	return c
}

// maxRequestTimeout bounds MOLT_REQUEST_TIMEOUT: API Gateway gives up at 30 s.
const maxRequestTimeout = 29 * time.Second

// chatFromEnv reads the turn runtime's tuning variables; unset means default.
func chatFromEnv(env map[string]string) (chat.Config, error) {
	var cc chat.Config
	atoi := func(key string, dst *int) error {
		if v := strings.TrimSpace(env[key]); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return molt.Invalid(key, "%s must be a positive integer", key)
			}
			*dst = n
		}
		return nil
	}
	if err := atoi(EnvTurnBudget, &cc.Budget); err != nil {
		return cc, err
	}
	if err := atoi(EnvCompactTokens, &cc.CompactTokens); err != nil {
		return cc, err
	}
	if v := strings.TrimSpace(env[EnvTurnTimeout]); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cc, molt.Invalid(EnvTurnTimeout, "%s must be a duration such as 3m", EnvTurnTimeout)
		}
		cc.Timeout = d
	}
	return cc, nil
}

// Validate returns EINVALID naming the bad setting.
func (c Config) Validate() error {
	if c.envErr != nil {
		return c.envErr
	}
	if err := c.Chat.Validate(); err != nil {
		return err
	}
	if err := c.Search.Validate(); err != nil {
		return err
	}
	switch c.Backend {
	case BackendLocal:
		if c.DataDir == "" {
			return molt.Invalid(EnvData, "%s is empty", EnvData)
		}
	case BackendAWS:
		if c.Table == "" || c.Bucket == "" {
			return molt.Invalid(EnvTable, "%s and %s are required for the aws backend", EnvTable, EnvBucket)
		}
	default:
		return molt.Invalid(EnvBackend, "%s must be %q or %q", EnvBackend, BackendLocal, BackendAWS)
	}
	return nil
}

// DBPath is the SQLite file of the local backend.
func (c Config) DBPath() string { return filepath.Join(c.DataDir, "molt.db") }

// BlobDir is the blob folder of the local backend.
func (c Config) BlobDir() string { return filepath.Join(c.DataDir, "blobs") }

// QueueKinds lists the kinds with a configured queue, sorted.
func (c Config) QueueKinds() []string {
	ks := make([]string, 0, len(c.Queues))
	for k := range c.Queues {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
