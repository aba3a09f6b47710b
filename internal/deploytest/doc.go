// Package deploytest checks the deployment description against the code: that
// template.yaml declares exactly the functions under functions/, each built by the
// Makefile the way `make build` builds it, for provided.al2023 on arm64; that every
// IAM statement names template resources (or Bedrock's models, for functions that
// configure one) and exact actions; that queues are encrypted and have dead-letter
// queues, alarms and long enough visibility timeouts, and that each worker is woken
// by the queue its MOLT_QUEUE_<KIND> names, that every registered kind of work
// (Options.Kinds) has its worker and the tick may wake each; that only the
// functions that call remote agents read secrets, and only their stack's remote
// secrets (RemoteTokenFolders, AllowsSecret); that lifecycle rules expire only
// archives; that the table is the one internal/dynamo is written to; and that every
// sample in events/ is a real event of a function that receives that kind of event.
//
// Check does the work; its test runs it on the repository and on broken copies of
// it, so each rule is seen to fail. Grants and Allows read what a function's
// policies grant, so a test that watches the calls a function makes (internal/
// functest) can check each against its policy.
package deploytest
