// Package httpapi is molt's UI API as one plain net/http
// handler. The same handler is served by `molt serve` and, through Lambda
// (aws-lambda-go-api-proxy for API Gateway HTTP API payload 2.0, plus named
// stages and malformed events), by the api Lambda.
//
// Every route but /health needs `Authorization: Bearer <secret>`; the secret is
// hashed (auth.Hash) and looked up in the store. Levels:
//
//   - full: everything, every workspace, settings, writes to the global surface;
//   - workspace, readonly: read their own workspace and its files (and the shared
//     global surface that shows through it). Writes need full.
//
// A missing or unknown token is 401, a known token without the right is 403, and a
// resource of another workspace is 404 so that its existence is not revealed.
//
// Errors are application/problem+json documents whose "code" is the stable machine
// code of the *molt.Error (its Reason, else its Code); statusOf is the one table
// that maps codes to HTTP statuses. Unexpected errors are logged once with their
// detail and answered with a generic message.
//
// Surface paths are checked twice: the raw request path is refused (400
// invalid_path) when it has ".", ".." or empty segments — before the router could
// clean or redirect it — and the file path itself must pass workspace.ValidatePath.
// Nothing outside the surface is ever written.
package httpapi
