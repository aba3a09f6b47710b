// Package deploytest checks the deployment description against the code: that
// template.yaml declares exactly the functions under functions/, each built by the
// Makefile the way `make build` builds it, for provided.al2023 on arm64; that every
// IAM statement names template resources and exact actions; that queues have
// dead-letter queues, alarms and long enough visibility timeouts; that the table is
// the one internal/dynamo is written to; and that every sample in events/ is a real
// event of a function that receives that kind of event.
//
// Check does the work; its test runs it on the repository and on broken copies of
// it, so each rule is seen to fail.
package deploytest
