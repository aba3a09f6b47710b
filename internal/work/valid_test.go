package work

import (
	"regexp"
	"testing"
)

// TestValidByHand: validKind and validID agree with the patterns they stand for.
func TestValidByHand(t *testing.T) {
	kindRe := regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	idRe := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	cases := []string{"", "a", "A", "run", "a2a_task", "9a", "_a", "a-b", "a.b", "a:b", "ab/c", "é", "a é",
		"abcdefghijklmnopqrstuvwxyz012345", "abcdefghijklmnopqrstuvwxyz0123456", "01JABC", "x y", "a\n", "-a", ".a"}
	for _, c := range cases {
		if got, want := validKind(c), kindRe.MatchString(c); got != want {
			t.Errorf("validKind(%q) = %v, want %v", c, got, want)
		}
		if got, want := validID(c), idRe.MatchString(c); got != want {
			t.Errorf("validID(%q) = %v, want %v", c, got, want)
		}
	}
}
