// Package awsbackend builds the adapters molt runs on in AWS: DynamoDB, S3 and SQS
// (on AWS_ENDPOINT_URL when set: LocalStack or the Go emulator), creates them
// for development (Bootstrap), and gives each Lambda function its handler
// (MustAPI, MustTicker, MustWorker: the whole of functions/<name>/main.go).
package awsbackend

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/app/modelenv"
	"github.com/molt-dev/molt/internal/awsenv"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/lambdainvoke"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/s3blob"
	"github.com/molt-dev/molt/internal/search"
	"github.com/molt-dev/molt/internal/smtoken"
	"github.com/molt-dev/molt/internal/sqsqueue"
	"github.com/molt-dev/molt/internal/supervisor"
)

// EnvSearXNGFunction names the SearXNG function (its name or ARN) that
// web_search and GET /api/search invoke through the Lambda API; template.yaml
// sets it for the functions granted lambda:InvokeFunction on it.
const EnvSearXNGFunction = "MOLT_SEARXNG_FUNCTION"

// NewApp builds an App on the AWS adapters: what every Lambda function runs on.
// With MOLT_SEARXNG_FUNCTION set, SearXNG is that function, reached through
// lambda:InvokeFunction (lambdainvoke.Transport) unless MOLT_SEARXNG_URL names
// an instance. Campaign tokens are read as RemoteTokens says; on Lambda the
// remotes are called through RemoteHTTP (no private addresses).
func NewApp(ctx context.Context, cfg app.Config, logger *slog.Logger) (*app.App, error) {
	if fn := strings.TrimSpace(os.Getenv(EnvSearXNGFunction)); fn != "" && cfg.Search.SearXNGURL == "" {
		awsCfg, err := awsenv.Load(ctx)
		if err != nil {
			return nil, err
		}
		cfg.Search.SearXNGTransport = SearXNGTransport(awsCfg, fn, logger)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	d, err := Open(ctx, cfg, clock, ids)
	if err != nil {
		return nil, err
	}
	d.Clock, d.IDs = clock, ids
	if d.Model, err = modelenv.FromEnv(ctx, os.Getenv, awsenv.Load); err != nil {
		return nil, err
	}
	d.Models = modelenv.Named(os.Getenv, awsenv.Load)
	onLambda := os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != ""
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return nil, err
	}
	tokens, schemes := RemoteTokens(awsCfg, onLambda)
	d.RemoteToken, cfg.Supervisor.TokenSchemes = tokens.Token, schemes
	if onLambda {
		d.RemoteHTTP = RemoteHTTP(nil)
		if cfg.Supervisor.Tick == 0 {
			cfg.Supervisor.Tick = TickInterval
		}
	}
	return app.New(cfg, d, logger), nil
}

// TickInterval is the ticker function's schedule in template.yaml (rate(1
// minute)): on Lambda a campaign's heartbeat rounds up to it (molt serve
// keeps the supervisor's default, its own --tick's).
const TickInterval = time.Minute

// RemoteTokens returns the aws backend's reader of campaign tokens and the
// token_ref schemes it reads: secretsmanager:<secret> through Secrets
// Manager (each secret cached smtoken.DefaultTTL per process), and, unless
// onLambda, env:NAME too (molt serve on the aws backend: the operator's own
// environment). A Lambda function's environment is the deployment's own
// configuration, never a remote's token, so env: is refused there.
func RemoteTokens(awsCfg aws.Config, onLambda bool) (*smtoken.Resolver, []string) {
	o := smtoken.Options{}
	schemes := []string{supervisor.SchemeSecretsManager}
	if !onLambda {
		o.Fallback = delegate.EnvToken
		schemes = append([]string{supervisor.SchemeEnv}, schemes...)
	}
	return smtoken.New(secretsmanager.NewFromConfig(awsCfg), o), schemes
}

// RemoteHTTP is the Lambda functions' client of remote agents: every dial
// refuses a non-public address (the dial guard of web_fetch), so a campaign's
// card URL cannot reach the Lambda runtime API on loopback, the VPC or a
// metadata address. allow also permits these addresses (tests only).
func RemoteHTTP(allow func(netip.Addr) bool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: search.GuardedTransport(allow)}
}

// Open builds the AWS adapters for the table, bucket and queues cfg names.
func Open(ctx context.Context, cfg app.Config, clock molt.Clock, ids molt.IDs) (app.Deps, error) {
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return app.Deps{}, err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	return app.Deps{
		Store:     dynamo.New(dynamodb.NewFromConfig(awsCfg, DynamoOptions()), cfg.Table, dynamo.Options{Clock: clock, IDs: ids}),
		Blobs:     s3blob.New(s3.NewFromConfig(awsCfg, s3blob.ClientOptions()), cfg.Bucket),
		Queue:     sqsqueue.New(sqsClient, cfg.Queues),
		Receivers: Receivers(sqsClient, cfg.Queues),
	}, nil
}

// Receivers opens the SQS queue of a kind, from urls (app.Config.Queues: kind →
// queue URL), for the workers of `molt serve` on aws. A kind without a URL is an
// error naming the variable that configures it.
func Receivers(api sqsqueue.API, urls map[string]string) func(kind string) (queue.Receiver, error) {
	return func(kind string) (queue.Receiver, error) {
		url, ok := urls[kind]
		if !ok {
			return nil, fmt.Errorf("no queue configured for %s (set %s%s)", kind, app.EnvQueuePrefix, strings.ToUpper(kind))
		}
		return sqsqueue.NewReceiver(api, url), nil
	}
}

// DynamoOptions adjusts the DynamoDB client for the endpoint in use: local
// emulators send no CRC32 response checksum, so validating it there only logs a
// warning on every response. Against AWS nothing changes.
func DynamoOptions() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		if awsenv.Endpoint() != "" {
			o.DisableValidateResponseChecksum = true
		}
	}
}

// SearXNGTransport carries SearXNG requests to function (a name or ARN)
// through the Lambda Invoke API.
func SearXNGTransport(awsCfg aws.Config, function string, logger *slog.Logger) *lambdainvoke.Transport {
	client := lambda.NewFromConfig(awsCfg, lambdainvoke.ClientOptions(lambdainvoke.DefaultMaxPayload))
	return lambdainvoke.New(client, function, lambdainvoke.Options{Logger: logger})
}
