package smtoken

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/molt-dev/molt/internal/awserr"
	"github.com/molt-dev/molt/internal/molt"
)

// Scheme is the token_ref prefix this package resolves.
const Scheme = "secretsmanager:"

// DefaultTTL is how long a token read is reused (Options.TTL).
const DefaultTTL = 5 * time.Minute

// Reasons of a token that cannot be read (molt.Error.Reason, EUNAVAILABLE).
// They are safe to store and show: none carries the secret's value.
const (
	ReasonSecretNotFound = "secret_not_found"  // no such secret (or it is scheduled for deletion)
	ReasonSecretDenied   = "secret_denied"     // IAM or the key policy refuses the read
	ReasonSecretEmpty    = "secret_empty"      // no SecretString, or only whitespace
	ReasonSecretError    = "secret_error"      // Secrets Manager failed or was unreachable
	ReasonUnsupported    = "token_unsupported" // not a reference this resolver reads (as delegate.ReasonTokenUnsupported)
)

// API is the Secrets Manager call the resolver makes; *secretsmanager.Client
// satisfies it.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput,
		opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ API = (*secretsmanager.Client)(nil)

// Options tune a Resolver; the zero value is production.
type Options struct {
	// TTL bounds how long a token read is reused (default DefaultTTL; a
	// rotated secret is seen within it). Failures are not cached.
	TTL time.Duration
	// Fallback resolves the references that are not Scheme (e.g.
	// delegate.EnvToken for env:NAME); nil refuses them with ReasonUnsupported.
	Fallback func(ctx context.Context, ref string) (string, error)
	Clock    molt.Clock // nil: the system clock
}

// Resolver reads tokens by reference; it is safe for concurrent use. Build
// one per process (outside a Lambda handler) so its cache lives as long as
// the warm environment.
type Resolver struct {
	api      API
	ttl      time.Duration
	fallback func(context.Context, string) (string, error)
	clock    molt.Clock

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	token string
	at    time.Time
}

// maxEntries bounds the cache: past it, the expired entries are dropped, and
// then all of them.
const maxEntries = 256

// New returns a Resolver on api.
func New(api API, o Options) *Resolver {
	r := &Resolver{api: api, ttl: o.TTL, fallback: o.Fallback, clock: o.Clock, cache: map[string]entry{}}
	if r.ttl <= 0 {
		r.ttl = DefaultTTL
	}
	if r.clock == nil {
		r.clock = molt.SystemClock{}
	}
	return r
}

var (
	nameRe = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)
	arnRe  = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]{1,32}:[0-9]{12}:secret:([A-Za-z0-9/_+=.@-]{1,512})$`)
)

// SecretName returns the secret name a reference's id stands for (the id
// itself, or the name in an ARN, with its random six-character suffix), and
// whether id is a well-formed secret name or ARN.
func SecretName(id string) (string, bool) {
	if m := arnRe.FindStringSubmatch(id); m != nil {
		return m[1], true
	}
	if nameRe.MatchString(id) && !strings.HasPrefix(id, "arn:") {
		return id, true
	}
	return "", false
}

// Token returns the token ref names. Errors: EUNAVAILABLE with one of the
// Reason* constants (the fallback's own errors for other references).
func (r *Resolver) Token(ctx context.Context, ref string) (string, error) {
	id, ok := strings.CutPrefix(ref, Scheme)
	if !ok {
		if r.fallback != nil {
			return r.fallback(ctx, ref)
		}
		return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonUnsupported,
			Message: "this deployment reads remote tokens from Secrets Manager only (secretsmanager:<secret>)"}
	}
	if _, ok := SecretName(id); !ok {
		return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonSecretNotFound,
			Message: "the token reference is not a secret name or ARN"}
	}
	now := r.clock.Now()
	r.mu.Lock()
	e, hit := r.cache[id]
	r.mu.Unlock()
	if hit && now.Sub(e.at) < r.ttl && !now.Before(e.at) {
		return e.token, nil
	}
	out, err := r.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return "", failure(id, err)
	}
	tok := strings.TrimSpace(aws.ToString(out.SecretString))
	if tok == "" {
		return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonSecretEmpty,
			Message: "secret " + id + " has no SecretString"}
	}
	r.put(id, entry{token: tok, at: now})
	return tok, nil
}

func (r *Resolver) put(id string, e entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= maxEntries {
		for k, old := range r.cache {
			if e.at.Sub(old.at) >= r.ttl {
				delete(r.cache, k)
			}
		}
		if len(r.cache) >= maxEntries {
			clear(r.cache)
		}
	}
	r.cache[id] = e
}

// failure maps a GetSecretValue error to a safe molt.Error. The SDK's own
// message is left out: it is no use to the campaign's reader, and only the
// error code is needed to act.
func failure(id string, err error) error {
	reason := ReasonSecretError
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ResourceNotFoundException":
			reason = ReasonSecretNotFound
		case "AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidClientTokenId",
			"DecryptionFailure", "ExpiredTokenException":
			reason = ReasonSecretDenied
		case "InvalidRequestException": // e.g. the secret is scheduled for deletion
			reason = ReasonSecretNotFound
		}
	}
	msg := "secret " + id + ": " + reason
	if awserr.Transient(err) {
		msg += " (transient)"
	}
	return &molt.Error{Code: molt.EUNAVAILABLE, Reason: reason, Message: msg}
}
