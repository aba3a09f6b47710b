// Package smtoken reads the bearer tokens of remote agents from AWS Secrets
// Manager: a token_ref "secretsmanager:<secret name or ARN>" names a secret
// whose SecretString is the token (GetSecretValue, the AWSCURRENT version).
// The supervisor's campaign worker uses it on the aws backend
// (internal/awsbackend wires it as supervisor.Deps.Token).
//
// A token is held only in memory, for at most Options.TTL per warm process,
// so an idle campaign's heartbeat does not call Secrets Manager every pass;
// it is never logged, stored, or put into an error. Errors are molt.Error
// with code EUNAVAILABLE and a stable Reason (ReasonSecretNotFound, …) that
// the supervisor records on the campaign as the cause of REMOTE_UNAVAILABLE.
package smtoken
