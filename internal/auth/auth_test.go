package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
)

func TestNew(t *testing.T) {
	t.Parallel()
	secret, tok, err := auth.New(auth.Workspace, "acme", "ci", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, auth.Prefix) || len(secret) < 40 {
		t.Fatalf("secret %q", secret)
	}
	if tok.Hash != auth.Hash(secret) || strings.Contains(tok.Hash, secret) || tok.ID != tok.Hash[:12] {
		t.Fatalf("token %+v does not store the hash only", tok)
	}
	s2, _, _ := auth.New(auth.Full, "", "", time.Now())
	if s2 == secret {
		t.Fatal("two secrets are equal")
	}
	for _, c := range []struct {
		level auth.Level
		ws    string
	}{{"root", ""}, {auth.Full, "acme"}, {auth.Workspace, ""}, {auth.Readonly, "global"}, {auth.Readonly, "../x"}} {
		if _, _, err := auth.New(c.level, c.ws, "", time.Now()); molt.ErrorCode(err) != molt.EINVALID {
			t.Errorf("New(%q, %q) = %v, want invalid", c.level, c.ws, err)
		}
	}
}

func TestParseBearer(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"Bearer molt_abc":  "molt_abc",
		"bearer molt_abc":  "molt_abc",
		"BEARER  molt_abc": "molt_abc",
		"Basic abc":        "",
		"Bearer":           "",
		"Bearer ":          "",
		"Bearer a b":       "",
		"Bearer a,b":       "",
		"molt_abc":         "",
	}
	for in, want := range cases {
		if got := auth.ParseBearer(in); got != want {
			t.Errorf("ParseBearer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCaller(t *testing.T) {
	t.Parallel()
	full := auth.Caller{Token: auth.Token{Level: auth.Full}}
	ws := auth.Caller{Token: auth.Token{Level: auth.Workspace, Workspace: "acme"}}
	ro := auth.Caller{Token: auth.Token{Level: auth.Readonly, Workspace: "acme"}}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"full reads any", full.CanRead("x"), true},
		{"ws reads own", ws.CanRead("acme"), true},
		{"ws reads other", ws.CanRead("x"), false},
		{"ws chats own", ws.CanChat("acme"), true},
		{"ro chats own", ro.CanChat("acme"), false},
		{"ro reads own", ro.CanRead("acme"), true},
		{"ro reads other", ro.CanRead("zzz"), false},
		{"ws is not full", ws.IsFull(), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestValidateSecret: exactly the secrets ParseBearer gives back whole pass.
func TestValidateSecret(t *testing.T) {
	t.Parallel()
	for range 20 {
		s := auth.NewSecret()
		if err := auth.ValidateSecret("secret", s); err != nil {
			t.Fatalf("NewSecret %q: %v", s, err)
		}
	}
	for s, ok := range map[string]bool{
		strings.Repeat("a", auth.MinSecret):       true,
		strings.Repeat("a", auth.MaxSecret):       true,
		"molt_ABC-def_123.~+/=!#$%&'*()<>?@[]^{}": true,
		strings.Repeat("a", auth.MinSecret-1):     false,
		strings.Repeat("a", auth.MaxSecret+1):     false,
		"twenty characters, with a comma":         false,
		"twenty characters with spaces":           false,
		"twenty\tcharacters\twith\ttabs":          false,
		"twenty-characters-and-é-accent":          false,
		"twenty-characters-and-\x00-nul":          false,
	} {
		err := auth.ValidateSecret("secret", s)
		if ok != (err == nil) {
			t.Errorf("ValidateSecret(%q) = %v, want ok %v", s, err, ok)
		}
		if err != nil && (molt.ErrorCode(err) != molt.EINVALID || strings.Contains(err.Error(), s)) {
			t.Errorf("ValidateSecret(%q) = %v: want EINVALID without the secret", s, err)
		}
		if ok && auth.ParseBearer("Bearer "+s) != s {
			t.Errorf("valid secret %q does not parse back from its header", s)
		}
	}
}
