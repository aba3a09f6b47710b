package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// Operator is the caller of molt's own commands (`molt token …`): whoever can
// run them on the data directory or with the AWS credentials has full access.
var Operator = Caller{Token: Token{ID: "operator", Level: Full, Name: "operator"}}

// Workspaces is what Tokens needs to know about workspaces.
type Workspaces interface {
	// GetWorkspace returns ENOTFOUND when absent.
	GetWorkspace(ctx context.Context, name string) (workspace.Workspace, error)
}

// Tokens is the token service behind `molt token` and /api/tokens. Every method
// is for full callers only (EFORBIDDEN otherwise).
type Tokens struct {
	Store      Store
	Workspaces Workspaces
	Clock      molt.Clock
}

// ReasonNoWorkspace refines EINVALID: a scoped token names a workspace that
// does not exist (the token would gain access to it once it is created).
const ReasonNoWorkspace = "no_such_workspace"

// Create makes a token and returns its secret (shown once; only its hash is
// stored). EINVALID for a bad level, name or workspace, and with reason
// ReasonNoWorkspace (field "workspace") when the workspace does not exist.
func (s *Tokens) Create(ctx context.Context, c Caller, level Level, ws, name string) (string, Token, error) {
	if !c.IsFull() {
		return "", Token{}, molt.Errorf(molt.EFORBIDDEN, "only a full token may create tokens")
	}
	secret, tok, err := New(level, ws, name, s.Clock.Now())
	if err != nil {
		return "", Token{}, err
	}
	if ws != "" {
		_, err := s.Workspaces.GetWorkspace(ctx, ws)
		if molt.ErrorCode(err) == molt.ENOTFOUND {
			return "", Token{}, &molt.Error{Code: molt.EINVALID, Reason: ReasonNoWorkspace, Field: "workspace",
				Message: fmt.Sprintf("workspace %s does not exist; create it first", ws)}
		}
		if err != nil {
			return "", Token{}, fmt.Errorf("check workspace %s: %w", ws, err)
		}
	}
	if err := s.Store.PutToken(ctx, tok); err != nil {
		return "", Token{}, fmt.Errorf("store token: %w", err)
	}
	tok.Hash = ""
	return secret, tok, nil
}

// List returns every token, revoked ones included, oldest first; never a secret
// or a hash.
func (s *Tokens) List(ctx context.Context, c Caller) ([]Token, error) {
	if !c.IsFull() {
		return nil, molt.Errorf(molt.EFORBIDDEN, "only a full token may list tokens")
	}
	ts, err := s.Store.ListTokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	for i := range ts {
		ts[i].Hash = ""
	}
	return ts, nil
}

// Revoke revokes the token with that id (the 12-character id `molt token list`
// shows); it is refused from its next request on. Revoking a revoked token
// keeps its first revocation. EINVALID for a malformed id, ENOTFOUND when no
// token has it.
func (s *Tokens) Revoke(ctx context.Context, c Caller, id string) (Token, error) {
	if !c.IsFull() {
		return Token{}, molt.Errorf(molt.EFORBIDDEN, "only a full token may revoke tokens")
	}
	if !validID(id) {
		return Token{}, molt.Invalid("id", "a token id is 12 lowercase hex characters")
	}
	t, err := s.Store.RevokeToken(ctx, id, s.Clock.Now())
	if err != nil {
		return Token{}, err
	}
	t.Hash = ""
	return t, nil
}

// IDLen is the length of a token id: the first characters of its hash.
const IDLen = 12

func validID(id string) bool {
	return len(id) == IDLen && strings.Trim(id, "0123456789abcdef") == ""
}
