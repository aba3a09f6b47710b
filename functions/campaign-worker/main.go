// Command campaign-worker is the Lambda function behind the campaign queue:
// each SQS wake-up names a campaign, whose heartbeat pass it claims and runs
// (internal/supervisor): the remote agent's card and readback, the intents
// and writes of a controller, the material events. It reports partial batch
// failures.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/supervisor"
)

func main() { lambda.Start(awsbackend.MustWorker(supervisor.KindCampaign)) }
