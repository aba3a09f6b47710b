package smtoken_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/molt-dev/molt/internal/awstest"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/smtoken"
)

// counting counts the GetSecretValue calls that reach the emulator.
type counting struct {
	api   smtoken.API
	calls atomic.Int32
}

func (c *counting) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput,
	opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.calls.Add(1)
	return c.api.GetSecretValue(ctx, in, opts...)
}

type clock struct{ now atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *clock) advance(d time.Duration) { c.now.Add(int64(d)) }

// setup returns a Secrets Manager client on the emulator and a resolver on it
// that counts its calls, with a clock the test moves.
func setup(t *testing.T) (*secretsmanager.Client, *smtoken.Resolver, *counting, *clock) {
	t.Helper()
	client := secretsmanager.NewFromConfig(awstest.Config(t))
	api := &counting{api: client}
	clk := &clock{}
	clk.now.Store(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	return client, smtoken.New(api, smtoken.Options{Clock: clk}), api, clk
}

func createSecret(t *testing.T, c *secretsmanager.Client, value string) (name, arn string) {
	t.Helper()
	name = awstest.Name("molt/test/remotes/peer")
	out, err := c.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: aws.String(name),
		SecretString: aws.String(value)})
	if err != nil {
		t.Fatalf("create secret: %v", err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name),
			ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	return name, aws.ToString(out.ARN)
}

func TestToken(t *testing.T) {
	t.Parallel()
	client, r, _, _ := setup(t)
	const secret = "remote-token-0123456789"
	name, arn := createSecret(t, client, secret+"\n")
	ctx := context.Background()
	for _, ref := range []string{"secretsmanager:" + name, "secretsmanager:" + arn} {
		got, err := r.Token(ctx, ref)
		if err != nil {
			t.Fatalf("Token(%s): %v", ref, err)
		}
		if got != secret {
			t.Errorf("Token(%s) = %q, want the secret's value without its newline", ref, got)
		}
	}
}

func TestTokenFailures(t *testing.T) {
	t.Parallel()
	client, r, api, _ := setup(t)
	ctx := context.Background()
	name := awstest.Name("molt/test/remotes/bin")
	if _, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name),
		SecretBinary: []byte("binary only")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ ref, reason string }{
		{"secretsmanager:" + awstest.Name("molt/test/remotes/none"), smtoken.ReasonSecretNotFound},
		{"secretsmanager:" + name, smtoken.ReasonSecretEmpty},
		{"secretsmanager:bad name!", smtoken.ReasonSecretNotFound},
		{"env:PEER_TOKEN", smtoken.ReasonUnsupported},
	}
	for _, c := range cases {
		_, err := r.Token(ctx, c.ref)
		if molt.ErrorCode(err) != molt.EUNAVAILABLE || molt.ErrorReason(err) != c.reason {
			t.Errorf("Token(%s): %v (reason %q); want unavailable, %s", c.ref, err, molt.ErrorReason(err), c.reason)
		}
	}
	// A failure is not cached: the next pass asks again.
	before := api.calls.Load()
	_, _ = r.Token(ctx, cases[0].ref)
	if got := api.calls.Load() - before; got != 1 {
		t.Errorf("a missing secret read again made %d calls, want 1 (failures are not cached)", got)
	}
}

// TestTokenCache: within the TTL a warm process reads the secret once, a
// rotation is seen after it.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	client, r, api, clk := setup(t)
	ctx := context.Background()
	name, _ := createSecret(t, client, "first")
	ref := "secretsmanager:" + name
	for i := 0; i < 5; i++ {
		if got, err := r.Token(ctx, ref); err != nil || got != "first" {
			t.Fatalf("pass %d: %q, %v", i, got, err)
		}
		clk.advance(30 * time.Second) // idle heartbeats, 2 min in all
	}
	if got := api.calls.Load(); got != 1 {
		t.Errorf("5 passes within the TTL made %d GetSecretValue calls, want 1", got)
	}
	if _, err := client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name),
		SecretString: aws.String("second")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Token(ctx, ref); got != "first" {
		t.Errorf("within the TTL after a rotation: %q, want the cached %q", got, "first")
	}
	clk.advance(smtoken.DefaultTTL)
	if got, _ := r.Token(ctx, ref); got != "second" {
		t.Errorf("after the TTL: %q, want the rotated %q", got, "second")
	}
	if got := api.calls.Load(); got != 2 {
		t.Errorf("GetSecretValue calls = %d, want 2 (one per TTL)", got)
	}
}

// TestTokenNeverInErrors: no error of the resolver carries a token.
func TestTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	client, r, _, _ := setup(t)
	const secret = "tok-never-shown-42"
	name, _ := createSecret(t, client, secret)
	ctx := context.Background()
	if _, err := r.Token(ctx, "secretsmanager:"+name); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"secretsmanager:" + name + "x", "secretsmanager:", "other:" + secret} {
		_, err := r.Token(ctx, ref)
		if err == nil {
			t.Fatalf("Token(%s): no error", ref)
		}
		if strings.Contains(err.Error(), secret) && !strings.Contains(ref, secret) {
			t.Errorf("Token(%s) error %q carries the token", ref, err)
		}
	}
}

func TestFallback(t *testing.T) {
	t.Parallel()
	r := smtoken.New(nil, smtoken.Options{Fallback: func(_ context.Context, ref string) (string, error) {
		return "from " + ref, nil
	}})
	if got, err := r.Token(context.Background(), "env:X"); err != nil || got != "from env:X" {
		t.Errorf("Token(env:X) = %q, %v; want the fallback's answer", got, err)
	}
}

func TestSecretName(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"molt/prod/remotes/peer": "molt/prod/remotes/peer",
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:molt/prod/remotes/peer-AbCdEf": "molt/prod/remotes/peer-AbCdEf",
		"arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:x":                  "x",
		"":                    "",
		"has space":           "",
		"arn:aws:s3:::bucket": "",
		"arn:aws:secretsmanager:eu-west-1:123:secret:x": "",
		strings.Repeat("a", 513):                        "",
	} {
		got, ok := smtoken.SecretName(id)
		if got != want || ok != (want != "") {
			t.Errorf("SecretName(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}
