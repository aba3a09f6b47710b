package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/settings"
)

// TestSettingsConcurrentUpdates sends partial updates of different keys at once,
// many times over: every one must be in the result (none lost to another's
// read-merge-write).
func TestSettingsConcurrentUpdates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	keys := []string{"auto_apply_threshold", "max_concurrent_run", "max_concurrent_apply", "max_attempts"}
	const trials = 40
	for trial := 1; trial <= trials; trial++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		status := make([]int, len(keys))
		for i, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp := e.do(req{method: "PUT", path: "/api/settings", token: e.full,
					body: fmt.Sprintf(`{"evolution":{%q:%d}}`, k, trial%10+i+1)})
				_, _ = io.Copy(io.Discard, resp.Body)
				status[i] = resp.StatusCode
			}()
		}
		close(start)
		wg.Wait()
		for i, st := range status {
			if st != http.StatusOK {
				t.Fatalf("trial %d: PUT %s: status %d, want 200", trial, keys[i], st)
			}
		}
		got := decode[settings.Settings](t, wantStatus(t, e.do(req{method: "GET", path: "/api/settings", token: e.full}), 200)).Evolution
		vals := []int{got.AutoApplyThreshold, got.MaxConcurrentRun, got.MaxConcurrentApply, got.MaxAttempts}
		for i, k := range keys {
			if want := trial%10 + i + 1; vals[i] != want {
				t.Fatalf("trial %d: %s = %d, want %d: a concurrent update was lost", trial, k, vals[i], want)
			}
		}
	}
}

// TestSettingsETag: GET names the revision in ETag, PUT answers the new one, and
// a PUT with If-Match applies only over the revision named (409
// settings_changed otherwise).
func TestSettingsETag(t *testing.T) {
	t.Parallel()
	e := setup(t)
	get := func() string {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/settings", token: e.full})
		wantStatus(t, resp, 200)
		return resp.Header.Get("ETag")
	}
	put := func(body string, h map[string]string) *http.Response {
		return e.do(req{method: "PUT", path: "/api/settings", token: e.full, body: body, header: h})
	}
	tag0 := get()
	if tag0 != `"0"` {
		t.Fatalf("ETag of unsaved settings = %q, want \"0\"", tag0)
	}
	resp := put(`{"evolution":{"max_attempts":4}}`, map[string]string{"If-Match": tag0})
	wantStatus(t, resp, 200)
	tag1 := resp.Header.Get("ETag")
	if tag1 == "" || tag1 == tag0 || get() != tag1 {
		t.Fatalf("ETag after PUT = %q (GET %q), want a new one", tag1, get())
	}
	// Stale, unknown and weak tags: refused, nothing changed.
	for _, stale := range []string{tag0, `"99"`, `W/` + tag1, `bogus`} {
		p := wantProblem(t, put(`{"evolution":{"max_attempts":9}}`, map[string]string{"If-Match": stale}), 409, settings.ReasonChanged, "")
		if p.Detail == "" {
			t.Errorf("If-Match %s: no detail", stale)
		}
	}
	if got := decode[settings.Settings](t, wantStatus(t, e.do(req{method: "GET", path: "/api/settings", token: e.full}), 200)); got.Evolution.MaxAttempts != 4 {
		t.Fatalf("max_attempts = %d after refused updates, want 4", got.Evolution.MaxAttempts)
	}
	// A list naming the current tag, and "*", apply.
	wantStatus(t, put(`{"evolution":{"max_attempts":5}}`, map[string]string{"If-Match": tag0 + ", " + tag1}), 200)
	wantStatus(t, put(`{"evolution":{"max_attempts":6}}`, map[string]string{"If-Match": "*"}), 200)
	// The precondition comes before the merge; a bad patch over the current
	// revision is 400 naming the key.
	wantProblem(t, put(`{"evolution":{"nope":1}}`, map[string]string{"If-Match": tag0}), 409, settings.ReasonChanged, "")
	wantProblem(t, put(`{"evolution":{"nope":1}}`, map[string]string{"If-Match": get()}), 400, "invalid", "nope")
	// Without full access: 403, whatever the tag.
	wantProblem(t, e.do(req{method: "PUT", path: "/api/settings", token: e.ro, body: `{}`, header: map[string]string{"If-Match": tag1}}), 403, "forbidden", "")
}
