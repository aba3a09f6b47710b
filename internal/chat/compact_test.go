package chat_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/session"
)

// compactedTurns returns the turns of ids whose data records a compaction.
func (h *harness) compactedTurns(ids []string) []string {
	var out []string
	for _, id := range ids {
		if _, d := h.turn(id); d.Compacted {
			out = append(out, id)
		}
	}
	return out
}

func TestCompactionOverBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{cfg: chat.Config{CompactTokens: 500, KeepTail: 2}})
	var mu sync.Mutex
	var systems []string // system prompts of reply calls
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		if !strings.HasPrefix(req.System, model.SummarizeMarker) {
			mu.Lock()
			systems = append(systems, req.System)
			mu.Unlock()
		}
		return nil
	})
	s := h.session()
	var turns []string
	for i := range 8 {
		turns = append(turns, h.post(s.ID, fmt.Sprintf("message number %d with some words to make it longer", i)).ID)
		h.mustDrain()
	}
	compacted := h.compactedTurns(turns)
	if len(compacted) == 0 {
		t.Fatalf("no turn compacted")
	}
	if h.store.summaries != len(compacted) {
		t.Fatalf("SetSummary committed %d times for %d compacting turns", h.store.summaries, len(compacted))
	}
	sess, err := h.store.GetSession(h.ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sess.SummarySeq == 0 || !strings.HasPrefix(sess.Summary, "[offline model] Summary of") {
		t.Fatalf("session summary seq %d %q", sess.SummarySeq, sess.Summary)
	}
	_, last := h.turn(compacted[len(compacted)-1])
	if last.SummarySeq != sess.SummarySeq {
		t.Fatalf("turn records summary seq %d, session has %d", last.SummarySeq, sess.SummarySeq)
	}
	// The log keeps every message; each turn replied once.
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != strings.TrimSpace(strings.Repeat("user assistant ", 8)) {
		t.Fatalf("log = %q", got)
	}
	// A reply after a compaction sees the summary and only the tail.
	mu.Lock()
	lastSystem := systems[len(systems)-1]
	mu.Unlock()
	if !strings.Contains(lastSystem, "=== conversation summary (earlier messages) ===\n[offline model] Summary of") {
		t.Fatalf("last reply's system prompt lacks the summary:\n%s", lastSystem)
	}
	lastReply := msgs[len(msgs)-1].Text
	var seen int
	if _, err := fmt.Sscanf(lastReply[strings.Index(lastReply, "Messages: "):], "Messages: %d.", &seen); err != nil || seen >= 15 {
		t.Fatalf("last reply saw %d messages (%v): %q", seen, err, lastReply)
	}
}

func TestCompactCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{cfg: chat.Config{KeepTail: 2}})
	var mu sync.Mutex
	var lastReq model.Request
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		mu.Lock()
		lastReq = req
		mu.Unlock()
		return nil
	})
	s := h.session()
	// Too short to compact: it says so, compacts nothing.
	h.post(s.ID, "one")
	h.mustDrain()
	early := h.post(s.ID, "/compact")
	h.mustDrain()
	if it, d := h.turn(early.ID); it.Status != chat.StatusDone || d.Compacted || !d.CompactOnly {
		t.Fatalf("early /compact: %s %+v", it.Status, d)
	}
	msgs := h.messages(s.ID)
	if got := roles(msgs); got != "user assistant user system" || !strings.HasPrefix(msgs[3].Text, "Nothing to compact") {
		t.Fatalf("log = %q, notice %q", got, msgs[len(msgs)-1].Text)
	}
	for _, text := range []string{"two", "three", "four"} {
		h.post(s.ID, text)
		h.mustDrain()
	}
	calls := h.model.count()
	c := h.post(s.ID, "/compact")
	h.mustDrain()
	it, d := h.turn(c.ID)
	if it.Status != chat.StatusDone || !d.Compacted || d.Steps != 0 {
		t.Fatalf("/compact: %s %+v", it.Status, d)
	}
	if h.model.count() != calls+1 {
		t.Fatalf("/compact made %d model calls, want 1 (the summary)", h.model.count()-calls)
	}
	if h.store.summaries != 1 {
		t.Fatalf("summaries committed = %d", h.store.summaries)
	}
	msgs = h.messages(s.ID)
	last := msgs[len(msgs)-1]
	if last.Role != session.RoleSystem || last.TurnID != c.ID || !strings.HasPrefix(last.Text, "Compacted the conversation") {
		t.Fatalf("notice = %+v", last)
	}
	// The commands never reach the model, and the next turn sees the tail only.
	h.post(s.ID, "five")
	h.mustDrain()
	mu.Lock()
	req := lastReq
	mu.Unlock()
	for _, m := range req.Messages {
		if strings.Contains(m.Text, "/compact") {
			t.Fatalf("a command reached the model: %+v", req.Messages)
		}
	}
	if req.Messages[0].Text != "four" || len(req.Messages) != 3 { // the kept tail (2) and the new message
		var texts []string
		for _, m := range req.Messages {
			texts = append(texts, m.Text)
		}
		t.Fatalf("after /compact the model saw %q", texts)
	}
}

func TestCompactionCommittedOnceAcrossRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{cfg: chat.Config{CompactTokens: 400, KeepTail: 2}})
	var mu sync.Mutex
	failed := map[string]bool{}
	summaries := 0
	// Every turn's first reply call fails (retryable) after its summary was made.
	h.model.setBefore(func(ctx context.Context, n int, req model.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(req.System, model.SummarizeMarker) {
			summaries++
			return nil
		}
		key := req.Messages[len(req.Messages)-1].Text
		if !failed[key] {
			failed[key] = true
			return model.Fail(model.ReasonServerError, "test: HTTP 500", nil)
		}
		return nil
	})
	s := h.session()
	var turns []string
	for i := range 6 {
		turns = append(turns, h.post(s.ID, fmt.Sprintf("message %d, long enough to add up to a compaction soon", i)).ID)
		h.mustDrain()
	}
	compacted := h.compactedTurns(turns)
	if len(compacted) == 0 {
		t.Fatal("no turn compacted")
	}
	mu.Lock()
	made := summaries
	mu.Unlock()
	if made <= len(compacted) {
		t.Fatalf("summaries made %d for %d compacting turns: the retry did not redo the compaction", made, len(compacted))
	}
	if h.store.summaries != len(compacted) {
		t.Fatalf("SetSummary committed %d times for %d compacting turns", h.store.summaries, len(compacted))
	}
	for _, id := range turns {
		if it, _ := h.turn(id); it.Status != chat.StatusDone || it.Attempts != 2 {
			t.Fatalf("turn %s: %s after %d attempts, want done after 2", id, it.Status, it.Attempts)
		}
	}
	if got := roles(h.messages(s.ID)); got != strings.TrimSpace(strings.Repeat("user assistant ", 6)) {
		t.Fatalf("log = %q", got)
	}
}
