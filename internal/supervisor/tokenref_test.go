package supervisor_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/workspace"
)

// tokenEnv is a supervisor with cfg's token schemes, whose Token answers tok.
func tokenEnv(t *testing.T, cfg supervisor.Config, tok func(context.Context, string) (string, error)) *env {
	t.Helper()
	acfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir()}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	d, err := localbackend.Open(acfg, clock, ids)
	if err != nil {
		t.Fatal(err)
	}
	d.Clock, d.IDs = clock, ids
	a := app.New(acfg, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { _ = a.Close() })
	if _, _, err := a.Store.PutWorkspace(context.Background(), workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	svc := supervisor.New(supervisor.Deps{Store: a.Store, Protocol: a.Protocol, Queue: a.Queue, Token: tok,
		Clock: clock, IDs: ids}, cfg)
	return &env{t: t, ctx: context.Background(), app: a, svc: svc, admin: auth.Caller{Token: auth.Token{Level: auth.Full}}}
}

func createRef(e *env, ref string) (supervisor.Campaign, error) {
	return e.svc.Create(e.ctx, e.admin, supervisor.Input{Name: "c", Workspace: "acme", Mission: "m",
		Remote: supervisor.Remote{CardURL: "https://peer.example/.well-known/agent-card.json", TokenRef: ref}})
}

// TestTokenRefValidated: a token_ref is checked at creation against the
// schemes the deployment resolves and the secret prefix its IAM grant covers.
func TestTokenRefValidated(t *testing.T) {
	t.Parallel()
	none := func(context.Context, string) (string, error) { return "", molt.Unavailable(nil, "none") }
	local := tokenEnv(t, supervisor.Config{}, none)
	aws := tokenEnv(t, supervisor.Config{TokenSchemes: []string{supervisor.SchemeSecretsManager},
		SecretPrefix: "molt/prod/remotes/"}, none)
	cases := []struct {
		name string
		e    *env
		ref  string
		ok   bool
		want string // in the message
	}{
		{"env on molt serve", local, "env:PEER_TOKEN", true, ""},
		{"secrets manager on molt serve", local, "secretsmanager:molt/prod/remotes/peer", false, `scheme "secretsmanager" is not available`},
		{"unknown scheme", local, "vault:peer", false, `scheme "vault" is not available on this deployment: use env:NAME`},
		{"a token instead of a reference", local, "sk-live-123", false, "must name where the token lives"},
		{"bad variable", local, "env:1X", false, "variable name"},
		{"secret name on aws", aws, "secretsmanager:molt/prod/remotes/peer", true, ""},
		{"secret ARN on aws", aws, "secretsmanager:arn:aws:secretsmanager:eu-west-1:123456789012:secret:molt/prod/remotes/peer-AbCdEf", true, ""},
		{"env on aws", aws, "env:OPENAI_API_KEY", false, `scheme "env" is not available on this deployment: use secretsmanager:molt/prod/remotes/<name>`},
		{"secret outside the prefix", aws, "secretsmanager:molt/prod/other", false, `starts with "molt/prod/remotes/"`},
		{"ARN outside the prefix", aws, "secretsmanager:arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf", false, "starts with"},
		{"malformed ARN", aws, "secretsmanager:arn:aws:secretsmanager:eu-west-1:12:secret:molt/prod/remotes/x", false, "secret ARN"},
		{"bad secret name", aws, "secretsmanager:molt/prod/remotes/a b", false, "secret name"},
		{"empty secret", aws, "secretsmanager:", false, "must name where the token lives"},
	}
	for _, c := range cases {
		_, err := createRef(c.e, c.ref)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v; want created", c.name, err)
			}
			continue
		}
		var me *molt.Error
		if molt.ErrorCode(err) != molt.EINVALID || !errors.As(err, &me) || me.Field != "remote.token_ref" ||
			!strings.Contains(me.Message, c.want) {
			t.Errorf("%s: %v; want invalid remote.token_ref saying %q", c.name, err, c.want)
		}
	}
}

// TestTokenUnreadable: a token that cannot be read makes the remote
// unavailable with the reader's safe reason, once.
func TestTokenUnreadable(t *testing.T) {
	t.Parallel()
	e := tokenEnv(t, supervisor.Config{TokenSchemes: []string{supervisor.SchemeSecretsManager}},
		func(context.Context, string) (string, error) {
			return "", &molt.Error{Code: molt.EUNAVAILABLE, Reason: "secret_denied", Message: "secret x: secret_denied"}
		})
	c, err := createRef(e, "secretsmanager:molt/remotes/peer")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		c = e.pass(c.ID)
	}
	if c.Unavailable != "secret_denied" {
		t.Errorf("unavailable = %q, want the reader's reason secret_denied", c.Unavailable)
	}
	if n := e.events(c.ID)[supervisor.EventRemoteUnavailable]; n != 1 {
		t.Errorf("%d REMOTE_UNAVAILABLE events after two passes, want 1", n)
	}
}
