package delegate_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/molt-dev/molt/internal/delegate"
)

type corpusCase struct {
	Lang     string  `json:"lang"`
	Text     string  `json:"text"`
	Decision string  `json:"decision"`
	Target   string  `json:"target"`
	Method   string  `json:"method"`
	Message  *string `json:"message"`
	Reason   string  `json:"reason"`
	Note     string  `json:"note"`
}

type fullAccess struct{}

func (fullAccess) CanChat(string) bool { return true }
func (fullAccess) IsFull() bool        { return true }

// TestCorpus runs the labelled corpus (testdata/corpus.json) through Resolve
// and, for dispatches, Prepare, and reports precision and recall of dispatch.
// Every case must come out as labelled; a false dispatch is never allowed.
func TestCorpus(t *testing.T) {
	b, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Registry delegate.Registry `json:"registry"`
		Cases    []corpusCase      `json:"cases"`
	}
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	if err := corpus.Registry.Validate(); err != nil {
		t.Fatalf("corpus registry: %v", err)
	}
	if len(corpus.Cases) < 80 {
		t.Fatalf("corpus has %d cases, want at least 80", len(corpus.Cases))
	}
	var tp, fp, fn int
	langs := map[string]int{}
	for _, c := range corpus.Cases {
		langs[c.Lang]++
		got := delegate.Resolve(c.Text, corpus.Registry)
		if got.Decision == delegate.Dispatch {
			if _, _, err := delegate.Prepare(got, corpus.Registry, "acme", fullAccess{}); err != nil {
				t.Errorf("%q: the gate refused a dispatch to %s: %v", c.Text, got.Target, err)
			}
		}
		wantD := c.Decision == delegate.Dispatch
		gotD := got.Decision == delegate.Dispatch
		switch {
		case wantD && gotD && got.Target == c.Target:
			tp++
		case gotD:
			fp++
		case wantD:
			fn++
		}
		bad := got.Decision != c.Decision || got.Target != c.Target ||
			(c.Method != "" && got.Method != c.Method) || (c.Reason != "" && got.Reason != c.Reason) ||
			(c.Message != nil && got.Message != *c.Message)
		if c.Decision == delegate.Dispatch && c.Message == nil && got.Method != delegate.MethodExplicit && got.Message != c.Text {
			bad = true // natural dispatch passes the message on unchanged
		}
		if bad {
			t.Errorf("[%s] %q: got %+v; want %s %s %s %s", c.Lang, c.Text, got, c.Decision, c.Target, c.Method, c.Reason)
		}
	}
	precision, recall := 1.0, 1.0
	if tp+fp > 0 {
		precision = float64(tp) / float64(tp+fp)
	}
	if tp+fn > 0 {
		recall = float64(tp) / float64(tp+fn)
	}
	t.Logf("corpus: %d cases (%v); dispatch precision %.3f, recall %.3f (%d right, %d false, %d missed)",
		len(corpus.Cases), langs, precision, recall, tp, fp, fn)
	if fp > 0 {
		t.Errorf("%d false dispatches", fp)
	}
	if len(langs) < 3 {
		t.Errorf("corpus covers %d languages, want at least 3", len(langs))
	}
}
