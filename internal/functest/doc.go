// Package functest runs each Lambda function the way Lambda does, without Docker:
// its bootstrap, built by the Makefile's own rule (`make bootstraps`, the flags of
// `make build`) for this machine's architecture, runs under the Lambda Runtime
// Interface Emulator (MOLT_RIE, installed by `make tools`) against the AWS emulator
// (AWS_ENDPOINT_URL), and is invoked with the samples in events/ — the path `sam
// local invoke` takes.
//
// The tests skip when MOLT_RIE or AWS_ENDPOINT_URL is missing, and fail instead
// under CI=true. `make test` sets both. BenchmarkColdStart reports each bootstrap's
// size and the time from starting the emulator to the first answer.
package functest
