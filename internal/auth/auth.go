// Package auth holds bearer tokens: how they are made, stored (only as a SHA-256
// hash) and what each level may do.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Level is what a token may do.
type Level string

// Levels, from most to least privileged.
const (
	Full      Level = "full"      // everything, every workspace
	Workspace Level = "workspace" // one workspace: chat and read its surface
	Readonly  Level = "readonly"  // one workspace: read
)

// Rank orders levels: Full > Workspace > Readonly; unknown is 0.
func (l Level) Rank() int {
	switch l {
	case Full:
		return 3
	case Workspace:
		return 2
	case Readonly:
		return 1
	}
	return 0
}

// Token is a stored token. The secret itself is never stored, only Hash.
type Token struct {
	Hash      string    `json:"-"`
	ID        string    `json:"id"` // first 12 hex characters of Hash, safe to show
	Level     Level     `json:"level"`
	Workspace string    `json:"workspace,omitempty"` // required unless Full
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// LastUsedAt is when the token last authenticated a request, to within
	// TouchEvery; zero when never.
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
	// RevokedAt is when the token was revoked; zero while it is valid. A revoked
	// token stays stored (so the same secret can never be stored again) and
	// never authenticates.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// TouchEvery is how stale LastUsedAt may get: a request records its token's use
// only when the recorded one is older, so use costs at most one write per token
// per TouchEvery.
const TouchEvery = time.Minute

// Prefix starts every token secret, so leaked tokens are easy to scan for.
const Prefix = "molt_"

// NewSecret returns a new random token secret (32 random bytes).
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Hash returns the hex SHA-256 of a secret: what the store keys tokens by. Secrets
// carry 256 random bits, so an unsalted fast hash is enough to make the stored
// value useless to a reader of the table.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// New returns a new secret and the token to store for it. It returns EINVALID when
// the level is unknown, or a workspace-scoped level lacks a valid workspace (or a
// full token names one).
func New(level Level, ws, name string, now time.Time) (string, Token, error) {
	if err := validate(level, ws); err != nil {
		return "", Token{}, err
	}
	if len(name) > 100 {
		return "", Token{}, molt.Invalid("name", "name over 100 characters")
	}
	secret := NewSecret()
	h := Hash(secret)
	return secret, Token{Hash: h, ID: h[:12], Level: level, Workspace: ws, Name: name, CreatedAt: now}, nil
}

func validate(level Level, ws string) error {
	switch level {
	case Full:
		if ws != "" {
			return molt.Invalid("workspace", "a full token is not scoped to a workspace")
		}
		return nil
	case Workspace, Readonly:
		if ws == workspace.Global {
			return molt.Invalid("workspace", "a token cannot be scoped to the global surface")
		}
		return workspace.ValidateName(ws)
	}
	return molt.Invalid("level", "level must be full, workspace or readonly")
}

// Lengths of a secret an operator chooses (MOLT_ADMIN_TOKEN): long enough not to
// be guessed, short enough for ParseBearer.
const (
	MinSecret = 20
	MaxSecret = 200
)

// ValidateSecret returns EINVALID naming field unless secret is one a client can
// present as a bearer token: MinSecret to MaxSecret visible ASCII characters, no
// comma (ParseBearer accepts exactly these). Secrets made by NewSecret pass.
func ValidateSecret(field, secret string) error {
	if len(secret) < MinSecret || len(secret) > MaxSecret {
		return molt.Invalid(field, "%s must be %d to %d characters", field, MinSecret, MaxSecret)
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; c <= ' ' || c > '~' || c == ',' {
			return molt.Invalid(field, "%s must be visible ASCII characters without spaces or commas", field)
		}
	}
	return nil
}

// Plausible reports whether secret has the shape of a token molt could have
// stored: one NewSecret makes (Prefix and base64url characters) or one an
// operator may choose (ValidateSecret). Anything else cannot match a stored
// hash, so it is refused without a store read.
func Plausible(secret string) bool {
	if rest, ok := strings.CutPrefix(secret, Prefix); ok && rest != "" && len(secret) <= MaxSecret {
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return ValidateSecret("token", secret) == nil
			}
		}
		return true
	}
	return ValidateSecret("token", secret) == nil
}

// ParseBearer extracts the secret from an Authorization header value. It returns ""
// when the header is not a well-formed bearer credential.
func ParseBearer(header string) string {
	const p = "bearer "
	if len(header) <= len(p) || !strings.EqualFold(header[:len(p)], p) {
		return ""
	}
	s := strings.TrimSpace(header[len(p):])
	if len(s) > MaxSecret || strings.ContainsAny(s, " \t,") {
		return ""
	}
	return s
}

// Store keeps tokens by hash.
type Store interface {
	// PutToken stores a token; ECONFLICT when its hash exists (revoked or not).
	PutToken(ctx context.Context, t Token) error
	// TokenByHash returns the token, revoked ones included (strongly
	// consistent); ENOTFOUND when no token has that hash.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// ListTokens returns every token, revoked ones included, oldest first (ties
	// by id). Hash is empty in the listing.
	ListTokens(ctx context.Context) ([]Token, error)
	// RevokeToken sets RevokedAt of the token ref names (its id, or its whole
	// hash) to at, unless it is revoked already (the first time is kept), and
	// returns the token as stored now, without hash; ENOTFOUND when no token
	// matches.
	RevokeToken(ctx context.Context, ref string, at time.Time) (Token, error)
	// TouchToken records that the token with that hash was used at at: it sets
	// LastUsedAt when at is later than the stored one. ENOTFOUND when absent.
	TouchToken(ctx context.Context, hash string, at time.Time) error
}

// Caller is the authenticated caller of a request.
type Caller struct{ Token Token }

// CanRead reports whether the caller may read workspace ws.
func (c Caller) CanRead(ws string) bool {
	return c.Token.Level == Full || (c.Token.Level.Rank() > 0 && c.Token.Workspace == ws)
}

// CanChat reports whether the caller may chat in (and write sessions of) ws.
func (c Caller) CanChat(ws string) bool {
	return c.Token.Level == Full || (c.Token.Level == Workspace && c.Token.Workspace == ws)
}

// IsFull reports whether the caller has full access.
func (c Caller) IsFull() bool { return c.Token.Level == Full }

// Scope is the one workspace of a scoped caller ("" for a full one).
func (c Caller) Scope() string {
	if c.IsFull() {
		return ""
	}
	return c.Token.Workspace
}
