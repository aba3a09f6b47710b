// Package lambdainvoke carries HTTP requests to a Lambda function through the
// Lambda Invoke API: Transport is an http.RoundTripper that wraps each request
// in an API Gateway v2-shaped event (what the AWS Lambda Web Adapter in front
// of an HTTP server expects) and turns the function's answer back into an
// *http.Response. molt uses it to reach its private SearXNG function, which has
// no public endpoint (search.Config.SearXNGTransport).
//
// Failures are search.Failure reasons, safe to show: function_error (the
// function raised or timed out: Invoke's FunctionError), invoke_failed (the
// Lambda API refused: throttled, access denied, no such function; the error
// code is logged), malformed (the payload is not an API Gateway v2 response)
// and too_large (the payload exceeds Options.MaxPayload). A request whose
// context ended returns the context's error (the search client reports its
// timeout).
package lambdainvoke
