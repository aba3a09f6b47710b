package molt_test

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/molt"
)

func TestSortableIDsOrder(t *testing.T) {
	t.Parallel()
	clock := molt.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &molt.SortableIDs{Clock: clock}
	var ids []string
	for i := 0; i < 2000; i++ {
		if i%300 == 0 {
			clock.Advance(time.Millisecond)
		}
		ids = append(ids, g.NewID())
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids are not in creation order")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if len(id) != 26 || seen[id] {
			t.Fatalf("bad or duplicate id %q", id)
		}
		seen[id] = true
	}
	// A clock that goes backwards never makes a smaller id.
	last := g.NewID()
	clock.Advance(-time.Hour)
	if next := g.NewID(); next <= last {
		t.Fatalf("id after the clock went back %q <= %q", next, last)
	}
}

func TestSortableIDsConcurrent(t *testing.T) {
	t.Parallel()
	g := &molt.SortableIDs{}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for i := 0; i < 500; i++ {
				id := g.NewID()
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestErrors(t *testing.T) {
	t.Parallel()
	base := molt.Conflict("not_applied", "apply %s is %s", "a1", "failed")
	wrapped := fmt.Errorf("rollback: %w", base)
	if molt.ErrorCode(wrapped) != molt.ECONFLICT || molt.ErrorReason(wrapped) != "not_applied" {
		t.Fatalf("code %q reason %q", molt.ErrorCode(wrapped), molt.ErrorReason(wrapped))
	}
	if molt.ErrorCode(errors.New("x")) != molt.EINTERNAL || molt.ErrorCode(nil) != "" {
		t.Fatal("plain errors are internal, nil has no code")
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	var v struct {
		Title string `json:"title"`
		N     int    `json:"n"`
	}
	cases := []struct{ in, field string }{
		{`{"title":"x","extra":1}`, "extra"},
		{`{"n":"1"}`, "n"},
		{`{"title":"x"} {"title":"y"}`, "body"},
		{`{"title":`, "body"},
		{``, "body"},
	}
	for _, c := range cases {
		err := molt.DecodeStrict([]byte(c.in), &v)
		var e *molt.Error
		if !errors.As(err, &e) || e.Code != molt.EINVALID || e.Field != c.field {
			t.Errorf("DecodeStrict(%s) = %v, want invalid naming %q", c.in, err, c.field)
		}
	}
	if err := molt.DecodeStrict([]byte(` {"title":"ok","n":2} `), &v); err != nil || v.Title != "ok" || v.N != 2 {
		t.Fatalf("valid input: %v %+v", err, v)
	}
}
