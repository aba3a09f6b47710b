// Package app wires molt together: it builds the adapters a configuration names
// (SQLite, in-process queues and a blob folder for `molt serve`; DynamoDB, SQS and
// S3 on Lambda or with MOLT_BACKEND=aws), and exposes the handlers each entry
// point needs — the HTTP API, the tick, the queue workers — so `molt serve`, the
// Lambda functions and `molt invoke` all run the same code.
package app
