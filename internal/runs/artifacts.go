package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/workspace"
)

// Artifact names. The snapshot is written once, at enqueue; every attempt writes
// its own files under attempt-<n>/, so a retry never reads an older attempt's.
const (
	ArtifactMessages = "messages.json" // snapshot: the session's messages
	ArtifactToolFlow = "toolflow.md"   // snapshot: Markdown view of the tool flow
	ArtifactMeta     = "meta.json"     // snapshot: Meta
	ArtifactSurface  = "surface.json"  // snapshot: SurfaceContext
	ArtifactPatch    = "patch.json"    // attempt: evolution.Patch with contents
	ArtifactPatchMD  = "patch.md"      // attempt: evolution.RenderPatchMD
	ArtifactDryRun   = "dryrun.json"   // attempt: DryRun
	ArtifactScore    = "score.json"    // attempt: evolution.Score (patchInSandbox set)
	ArtifactVerdict  = "verdict.json"  // attempt: evolution.Verdict
)

// Prefix is the blob prefix of every artifact of run id.
func Prefix(id string) string { return "runs/" + id + "/" }

// SnapshotKey is the blob key of a snapshot artifact.
func SnapshotKey(id, name string) string { return Prefix(id) + "snapshot/" + name }

// AttemptKey is the blob key of an attempt's artifact.
func AttemptKey(id string, attempt int, name string) string {
	return fmt.Sprintf("%sattempt-%d/%s", Prefix(id), attempt, name)
}

// ApplyPrefix is the blob prefix of an apply's artifacts (its rollback snapshot
// included), removed when its run is deleted.
func ApplyPrefix(id string) string { return "applies/" + id + "/" }

// Meta is the snapshot's metadata.
type Meta struct {
	ID            string    `json:"id"`
	Trigger       string    `json:"trigger"`
	SourceSession string    `json:"source_session"`
	SourceTurn    string    `json:"source_turn,omitempty"`
	Hint          string    `json:"hint,omitempty"`
	Workspace     string    `json:"workspace"`
	Agent         string    `json:"agent"`
	SourceAccess  string    `json:"source_access"`
	Created       time.Time `json:"created"`
	// SessionSummary is the session's compaction summary at enqueue, if any.
	SessionSummary string `json:"session_summary,omitempty"`
	SummarySeq     int    `json:"summary_seq,omitempty"`
}

// SurfaceContext is the prompt surface as the session saw it at enqueue: the
// assembled system prompt of its agent, every file of the effective surface, and
// the agent and skill listings with their scopes.
type SurfaceContext struct {
	SystemPrompt string `json:"system_prompt"`
	// AssembleError says why the system prompt could not be assembled.
	AssembleError string        `json:"assemble_error,omitempty"`
	Files         []SurfaceFile `json:"files"`
	Agents        []Listing     `json:"agents"`
	Skills        []chat.Skill  `json:"skills"`
}

// SurfaceFile is one file of the effective surface.
type SurfaceFile struct {
	Path    string `json:"path"`
	Scope   string `json:"scope"` // workspace, global or builtin
	SHA256  string `json:"sha256"`
	Size    int    `json:"size"`
	Content string `json:"content"`
}

// Listing is an agent of the surface.
type Listing struct {
	ID    string `json:"id"`
	Scope string `json:"scope"`
}

// DryRun is the dry-run artifact: the patched agent's answer to the test message.
type DryRun struct {
	Message string `json:"message"`
	Reply   string `json:"reply"`
	Steps   int    `json:"steps"`
	// Error says why the patched agent could not answer (a broken agent.yaml).
	Error string `json:"error,omitempty"`
}

// surfaceContext builds the snapshot's surface context.
func surfaceContext(surface []workspace.EffectiveFile, agent string, root bool) SurfaceContext {
	sc := SurfaceContext{Files: []SurfaceFile{}, Agents: []Listing{}, Skills: []chat.Skill{}}
	seen := map[string]bool{}
	for _, f := range surface {
		sc.Files = append(sc.Files, SurfaceFile{Path: f.Path, Scope: f.Scope, SHA256: f.SHA256, Size: f.Size, Content: string(f.Content)})
		if rest, ok := strings.CutPrefix(f.Path, "agents/"); ok {
			if id, _, ok := strings.Cut(rest, "/"); ok && !seen[id] {
				seen[id] = true
				sc.Agents = append(sc.Agents, Listing{ID: id, Scope: f.Scope})
			}
		}
		if rest, ok := strings.CutPrefix(f.Path, "skills/"); ok {
			if id, file, ok := strings.Cut(rest, "/"); ok && file == "SKILL.md" {
				sk := chat.ParseSkill(id, f.Content)
				sk.Scope = f.Scope
				sc.Skills = append(sc.Skills, sk)
			}
		}
	}
	p, err := chat.Assemble(chat.PromptInput{Surface: surface, Agent: agent, Root: root})
	if err != nil {
		sc.AssembleError = clip(err.Error(), 500)
	} else {
		sc.SystemPrompt = p.System
	}
	return sc
}

// toolFlow is the Markdown view of a session's tool flow: every message in seq
// order, assistant tool calls listed with their inputs (cut), tool results left
// out (only their size is shown), so a reader can skim what the agent did.
func toolFlow(msgs []session.Message) string {
	var b strings.Builder
	b.WriteString("# Tool flow\n")
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n## #%d %s\n\n", m.Seq, m.Role)
		switch m.Role {
		case session.RoleTool:
			var results []struct {
				CallID  string `json:"call_id"`
				Content string `json:"content"`
				IsError bool   `json:"is_error"`
			}
			_ = json.Unmarshal(m.ToolResults, &results)
			for _, r := range results {
				state := "ok"
				if r.IsError {
					state = "error"
				}
				fmt.Fprintf(&b, "- result of %s: %s, %d bytes (content omitted)\n", r.CallID, state, len(r.Content))
			}
			if len(results) == 0 {
				b.WriteString("(tool results omitted)\n")
			}
		default:
			if t := strings.TrimSpace(m.Text); t != "" {
				b.WriteString(clip(t, 2000) + "\n")
			}
			var calls []struct {
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			}
			_ = json.Unmarshal(m.ToolCalls, &calls)
			for _, c := range calls {
				fmt.Fprintf(&b, "- calls `%s` (%s) with `%s`\n", c.Name, c.ID, clip(string(c.Input), 300))
			}
		}
	}
	return b.String()
}

// summarize returns the snapshot summary of msgs.
func summarize(msgs []session.Message) SnapshotSummary {
	s := SnapshotSummary{MessageCount: len(msgs)}
	for _, m := range msgs {
		switch {
		case m.Role == session.RoleUser && s.FirstUser == "":
			s.FirstUser = clip(m.Text, maxSummaryMsg)
		case m.Role == session.RoleAssistant && s.FirstAssistant == "" && strings.TrimSpace(m.Text) != "":
			s.FirstAssistant = clip(m.Text, maxSummaryMsg)
		}
	}
	return s
}

// transcript renders msgs for the agents (evolution.RenderTranscript), keeping
// the newest part within max bytes.
func transcript(msgs []session.Message, max int) string {
	tm := make([]evolution.TranscriptMessage, 0, len(msgs))
	for _, m := range msgs {
		text := m.Text
		if m.Role == session.RoleTool && text == "" {
			text = "(tool results)"
		}
		tm = append(tm, evolution.TranscriptMessage{Seq: m.Seq, Role: m.Role, Text: clip(text, 8000)})
	}
	out := evolution.RenderTranscript(tm)
	for len(out) > max && len(tm) > 1 {
		tm = tm[len(tm)/4+1:]
		out = "(earlier messages left out: size limit)\n\n" + evolution.RenderTranscript(tm)
	}
	return out
}

// putJSON stores v as JSON at key.
func putJSON(ctx context.Context, b blob.Store, key string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if err := b.Put(ctx, key, data); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// getJSON reads the JSON at key into v; ENOTFOUND when absent.
func getJSON(ctx context.Context, b blob.Store, key string, v any) error {
	data, err := b.Get(ctx, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return molt.Errorf(molt.EINTERNAL, "artifact %s is malformed: %v", key, err)
	}
	return nil
}
