package chat_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/session"
)

// msg builds a message: role letter u/a/s/t, seq, turn.
func msg(role byte, seq int, turn string) session.Message {
	r := map[byte]string{'u': session.RoleUser, 'a': session.RoleAssistant, 's': session.RoleSystem, 't': session.RoleTool}[role]
	return session.Message{Seq: seq, Role: r, Text: fmt.Sprintf("%c%d", role, seq), TurnID: turn}
}

func order(es []chat.Entry) string {
	var b []string
	for _, e := range es {
		s := fmt.Sprintf("%s%d", e.Msg.Role[:1], e.Msg.Seq)
		if !e.Visible {
			s += "-"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

func isCmd(t string) bool { return strings.HasPrefix(t, "/compact") }

func TestTranscriptOrder(t *testing.T) {
	t.Parallel()
	// m2 (turn B) and m3 (turn C) were posted before B's reply landed at seq 5.
	log := []session.Message{
		msg('u', 1, "A"), msg('a', 2, "A"),
		msg('u', 3, "B"), msg('u', 4, "C"), msg('a', 5, "B"), msg('s', 6, ""),
		{Seq: 7, Role: session.RoleUser, Text: "/compact", TurnID: "D"}, msg('s', 8, "D"),
	}
	tests := []struct {
		userSeq int
		want    string
	}{
		{3, "u1 a2 u3 a5"},                  // up to B, with its reply, not m3
		{4, "u1 a2 u3 a5 u4"},               // C sees B's reply before its own message
		{7, "u1 a2 u3 a5 u4 s6- u7- s8-"},   // the command and system lines are invisible
		{1, "u1 a2"},                        // a turn's messages follow its user message
		{100, "u1 a2 u3 a5 u4 s6- u7- s8-"}, // everything
		{2, "u1 a2"},                        // a turn's messages follow its user message
		{6, "u1 a2 u3 a5 u4 s6-"},           // a system notice keeps its place
		{5, "u1 a2 u3 a5 u4"},               // no user message at 5: same as 4
		{0, ""},                             // nothing
		{-1, ""},                            // nothing
		{8, "u1 a2 u3 a5 u4 s6- u7- s8-"},   // D's notice after D's command
	}
	for _, tc := range tests {
		if got := order(chat.Transcript(log, tc.userSeq, isCmd)); got != tc.want {
			t.Errorf("Transcript(userSeq %d) = %q, want %q", tc.userSeq, got, tc.want)
		}
	}
	// A reply whose user message was summarised away comes first.
	got := order(chat.Transcript([]session.Message{msg('a', 5, "B"), msg('u', 6, "C")}, 6, nil))
	if got != "a5 u6" {
		t.Errorf("summarised anchor: %q", got)
	}
}

func TestCutPoint(t *testing.T) {
	t.Parallel()
	conv := func(n int) []session.Message { // n exchanges, turn i: u(2i-1) a(2i)
		var out []session.Message
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("T%d", i)
			out = append(out, msg('u', 2*i-1, id), msg('a', 2*i, id))
		}
		return out
	}
	tests := []struct {
		name     string
		log      []session.Message
		userSeq  int
		keepTail int
		wantOK   bool
		wantHead string // order() of entries[:cut]
	}{
		{name: "too short", log: conv(2), userSeq: 100, keepTail: 6, wantOK: false},
		{name: "keeps a tail of at least 6", log: conv(5), userSeq: 100, keepTail: 6, wantOK: true, wantHead: "u1 a2 u3 a4"},
		{name: "latest cut before a user message", log: conv(5), userSeq: 100, keepTail: 1, wantOK: true, wantHead: "u1 a2 u3 a4 u5 a6 u7 a8"},
		{name: "current message kept", log: append(conv(3), msg('u', 7, "T4")), userSeq: 7, keepTail: 1, wantOK: true, wantHead: "u1 a2 u3 a4 u5 a6"},
		{name: "one message: nothing", log: []session.Message{msg('u', 1, "T1")}, userSeq: 1, keepTail: 1, wantOK: false},
		{
			// u3 and u4 were posted before a5 (reply to u3): a cut before u4 would
			// split the log (a5 before the cut, u4 after), so the cut goes before u3.
			name:    "never splits interleaved seqs",
			log:     []session.Message{msg('u', 1, "A"), msg('a', 2, "A"), msg('u', 3, "B"), msg('u', 4, "C"), msg('a', 5, "B"), msg('a', 6, "C"), msg('u', 7, "D")},
			userSeq: 7, keepTail: 2, wantOK: true, wantHead: "u1 a2",
		},
		{
			name:    "commands are not cut points and do not count",
			log:     []session.Message{msg('u', 1, "A"), msg('a', 2, "A"), {Seq: 3, Role: session.RoleUser, Text: "/compact", TurnID: "B"}, msg('s', 4, "B"), msg('u', 5, "C")},
			userSeq: 5, keepTail: 1, wantOK: true, wantHead: "u1 a2 u3- s4-",
		},
		{
			name:    "tool exchanges stay whole",
			log:     []session.Message{msg('u', 1, "A"), msg('a', 2, "A"), msg('t', 3, "A"), msg('a', 4, "A"), msg('u', 5, "B")},
			userSeq: 5, keepTail: 1, wantOK: true, wantHead: "u1 a2 t3 a4",
		},
		{
			name:    "nothing visible before: no cut",
			log:     []session.Message{msg('s', 1, ""), msg('u', 2, "A")},
			userSeq: 2, keepTail: 1, wantOK: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			es := chat.Transcript(tc.log, tc.userSeq, isCmd)
			cut, ok := chat.CutPoint(es, tc.keepTail)
			if ok != tc.wantOK {
				t.Fatalf("CutPoint ok = %v, want %v (cut %d of %s)", ok, tc.wantOK, cut, order(es))
			}
			if ok {
				if got := order(es[:cut]); got != tc.wantHead {
					t.Fatalf("head = %q, want %q", got, tc.wantHead)
				}
			}
		})
	}
}

func TestSummaryRequest(t *testing.T) {
	t.Parallel()
	calls, _ := json.Marshal([]map[string]any{{"id": "c1", "name": "echo", "input": map[string]string{"x": "1"}}})
	results, _ := json.Marshal([]map[string]any{{"call_id": "c1", "content": "echoed"}})
	log := []session.Message{
		{Seq: 1, Role: session.RoleUser, Text: "hello", TurnID: "A"},
		{Seq: 2, Role: session.RoleAssistant, Text: "calling", ToolCalls: calls, TurnID: "A"},
		{Seq: 3, Role: session.RoleTool, ToolResults: results, TurnID: "A"},
		{Seq: 4, Role: session.RoleAssistant, Text: "done", TurnID: "A"},
	}
	req := chat.SummaryRequest("earlier notes", chat.Transcript(log, 4, nil), 100)
	if !strings.HasPrefix(req.System, model.SummarizeMarker) || !strings.Contains(req.System, "earlier notes") {
		t.Fatalf("system = %q", req.System)
	}
	if len(req.Tools) != 0 {
		t.Fatalf("a summary request offers no tools")
	}
	var roles []string
	for _, m := range req.Messages {
		if len(m.ToolCalls) > 0 || len(m.ToolResults) > 0 {
			t.Fatalf("summary request carries tool protocol: %+v", m)
		}
		roles = append(roles, string(m.Role))
	}
	if got := strings.Join(roles, " "); got != "user assistant user assistant user" {
		t.Fatalf("roles = %q", got)
	}
	if !strings.Contains(req.Messages[1].Text, "[called tool echo with {\"x\":\"1\"}]") || !strings.Contains(req.Messages[2].Text, "echoed") {
		t.Fatalf("tool flow not written out: %+v", req.Messages)
	}
}

func TestModelMessages(t *testing.T) {
	t.Parallel()
	calls := json.RawMessage(`[{"id":"c1","name":"echo","input":{"a":1}}]`)
	results := json.RawMessage(`[{"call_id":"c1","content":"out","is_error":true}]`)
	log := []session.Message{
		{Seq: 1, Role: session.RoleUser, Text: "hi", TurnID: "A"},
		{Seq: 2, Role: session.RoleAssistant, Text: "x", ToolCalls: calls, TurnID: "A"},
		{Seq: 3, Role: session.RoleTool, ToolResults: results, TurnID: "A"},
		{Seq: 4, Role: session.RoleSystem, Text: "notice"},
	}
	got := chat.ModelMessages(chat.Transcript(log, 10, nil))
	if len(got) != 3 || got[1].ToolCalls[0].Name != "echo" || string(got[1].ToolCalls[0].Input) != `{"a":1}` ||
		got[2].Role != model.RoleTool || !got[2].ToolResults[0].IsError || got[2].ToolResults[0].Content != "out" {
		t.Fatalf("ModelMessages = %+v", got)
	}
}
