package chat_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
)

// minimumRequests is what one turn needs of the store with these ports, with no
// message racing it and no heartbeat due: the post reads the session (access,
// next seq) and writes the message with its turn; the worker reads the turn, the
// session, its messages and the surface (global and workspace layers in one
// request), claims, and finishes with the reply. Writes: 3; reads: 5.
var minimumRequests = map[string]int{
	"Commit": 3, "GetItem": 1, "GetSession": 2, "ListMessages": 1, "ListSurface": 1,
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestStoreRequestsPerTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.session()
	for i := range 3 {
		before := h.store.snapshot()
		h.post(s.ID, fmt.Sprintf("message %d", i))
		h.mustDrain()
		got := diff(h.store.snapshot(), before)
		if fmt.Sprint(got) != fmt.Sprint(minimumRequests) {
			t.Fatalf("turn %d made store requests %v (%d), minimum %v (%d)", i, got, total(got), minimumRequests, total(minimumRequests))
		}
	}
	t.Logf("store requests per turn: %v = %d (minimum %d)", minimumRequests, total(minimumRequests), total(minimumRequests))
}

// timedModel measures the time spent in the model, so the benchmark can report
// the runtime's own overhead.
type timedModel struct {
	inner model.Model
	mu    sync.Mutex
	spent time.Duration
}

func (m *timedModel) Name() string { return m.inner.Name() }

func (m *timedModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	start := time.Now()
	resp, err := m.inner.Generate(ctx, req)
	m.mu.Lock()
	m.spent += time.Since(start)
	m.mu.Unlock()
	return resp, err
}

func (m *timedModel) take() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.spent
	m.spent = 0
	return d
}

// BenchmarkTurnOverhead measures one turn on the local stack (SQLite file,
// in-process queue, the worker run by hand): post, wake-up, claim, prompt
// assembly, the offline model, the reply's commit. Model time is subtracted.
// Sessions are ten turns long. It reports the median and p99 overhead per turn
// and the store requests per turn against the minimum.
func BenchmarkTurnOverhead(b *testing.B) {
	tm := &timedModel{inner: offline.New()}
	h := newHarness(b, options{model: tm})
	var sessionID string
	durations := make([]time.Duration, 0, b.N)
	reqs := map[string]int{}
	b.ResetTimer()
	for i := range b.N {
		if i%10 == 0 {
			sessionID = h.session().ID
		}
		before := h.store.snapshot()
		tm.take()
		start := time.Now()
		h.post(sessionID, fmt.Sprintf("benchmark message %d", i))
		h.mustDrain()
		durations = append(durations, time.Since(start)-tm.take())
		for k, v := range diff(h.store.snapshot(), before) {
			reqs[k] += v
		}
	}
	b.StopTimer()
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(durations[len(durations)/2]), "median-ms/turn")
	b.ReportMetric(ms(durations[(len(durations)*99)/100]), "p99-ms/turn")
	b.ReportMetric(float64(total(reqs))/float64(b.N), "store-req/turn")
	b.ReportMetric(float64(reqs["Commit"])/float64(b.N), "store-writes/turn")
	b.ReportMetric(float64(total(minimumRequests)), "min-store-req/turn")
}
