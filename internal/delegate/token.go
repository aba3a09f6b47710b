package delegate

import (
	"context"
	"os"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
)

// Reasons of a token that cannot be read (EUNAVAILABLE).
const (
	ReasonTokenUnset       = "token_unset"       // env:NAME names an unset or empty variable
	ReasonTokenUnsupported = "token_unsupported" // the reference's store is not available on this backend
)

// EnvToken reads the bearer token a registration's TokenRef names, for molt
// serve: env:NAME is the process environment's NAME. A secretsmanager:
// reference is EUNAVAILABLE with ReasonTokenUnsupported (not available on
// this backend). The token is never logged or stored.
func EnvToken(_ context.Context, ref string) (string, error) {
	switch {
	case strings.HasPrefix(ref, "env:"):
		name := strings.TrimPrefix(ref, "env:")
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v, nil
		}
		return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonTokenUnset,
			Message: "the remote's token variable " + name + " is not set"}
	case strings.HasPrefix(ref, "secretsmanager:"):
		return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonTokenUnsupported,
			Message: "secretsmanager token references are not available on this backend"}
	}
	return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: ReasonTokenUnsupported, Message: "unknown token reference"}
}
