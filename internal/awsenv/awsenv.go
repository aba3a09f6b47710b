// Package awsenv loads the AWS SDK configuration molt's functions and commands use:
// the default credential chain and region, with AWS_ENDPOINT_URL (honoured by the
// SDK itself) pointing every client at LocalStack or the Go emulator when set.
package awsenv

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Load returns the SDK configuration. With AWS_ENDPOINT_URL set and no
// credentials in the environment, it uses static "test" credentials (what local
// emulators accept) and region us-east-1 unless AWS_REGION says otherwise.
func Load(ctx context.Context) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if Endpoint() != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}

// Endpoint returns AWS_ENDPOINT_URL, or "" when molt talks to real AWS.
func Endpoint() string { return os.Getenv("AWS_ENDPOINT_URL") }
