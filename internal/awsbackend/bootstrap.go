package awsbackend

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/awsenv"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/s3blob"
	"github.com/molt-dev/molt/internal/sqsqueue"
)

// QueueVisibility is the visibility timeout bootstrap gives each queue: at least
// six times the longest worker function timeout in template.yaml (the same rule
// the template follows).
const QueueVisibility = 15 * time.Minute

// Bootstrap creates the table, the bucket and a queue (with its dead-letter queue)
// per registered kind of work on the configured AWS endpoint — LocalStack or the
// Go emulator in development — idempotently, and prints the environment that
// points `molt serve` (MOLT_BACKEND=aws) at them.
func Bootstrap(ctx context.Context, cfg app.Config, kinds []string, out io.Writer) error {
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return err
	}
	if err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg, DynamoOptions()), cfg.Table); err != nil {
		return fmt.Errorf("bootstrap table %s: %w", cfg.Table, err)
	}
	fmt.Fprintf(out, "table %s ready\n", cfg.Table)
	if err := s3blob.EnsureBucket(ctx, s3.NewFromConfig(awsCfg, s3blob.ClientOptions()), cfg.Bucket); err != nil {
		return fmt.Errorf("bootstrap bucket %s: %w", cfg.Bucket, err)
	}
	fmt.Fprintf(out, "bucket %s ready\n", cfg.Bucket)
	sqsClient := sqs.NewFromConfig(awsCfg)
	exports := []string{"MOLT_BACKEND=aws", app.EnvTable + "=" + cfg.Table, app.EnvBucket + "=" + cfg.Bucket}
	for _, kind := range kinds {
		name := cfg.Table + "-" + kind
		url, dlq, err := sqsqueue.Ensure(ctx, sqsClient, name, QueueVisibility)
		if err != nil {
			return fmt.Errorf("bootstrap queue %s: %w", name, err)
		}
		fmt.Fprintf(out, "queue %s ready (dead letters: %s)\n", url, dlq)
		exports = append(exports, app.EnvQueuePrefix+strings.ToUpper(kind)+"="+url)
	}
	fmt.Fprintln(out, "environment for `molt serve` on this endpoint:")
	for _, e := range exports {
		fmt.Fprintf(out, "export %s\n", e)
	}
	return nil
}
