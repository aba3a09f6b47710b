// Package functest runs each Lambda function the way Lambda does, without Docker:
// its bootstrap, built by the Makefile's own rule (`make bootstraps`, the flags of
// `make build`) for this machine's architecture, runs under the Lambda Runtime
// Interface Emulator (MOLT_RIE, installed by `make tools`) against the AWS emulator
// (AWS_ENDPOINT_URL), with the table, bucket and queues template.yaml declares
// created there, and is invoked with the samples in events/ — the path `sam local
// invoke` takes. TestPipeline carries work through the API and the workers: the API's
// wake-ups are received from the real queues and become the workers' SQS events.
//
// Every function's AWS calls go through a recording proxy; when a test ends each
// call is checked against the function's policy in template.yaml
// (deploytest.Grants), so a permission the code needs and the template lacks
// fails here rather than in the deployed function.
//
// The tests skip when MOLT_RIE or AWS_ENDPOINT_URL is missing, and fail instead
// under CI=true. `make test` sets both. BenchmarkColdStart reports each bootstrap's
// size and the time from starting the emulator to the first answer.
package functest
