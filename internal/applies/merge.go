package applies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/evolution"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/workspace"
)

// surface is the live state an apply works against: the workspace's files (the
// "live surface" it publishes to) and the global ones below them. lower is what
// a workspace file can be a byte-equal copy of: the global files and the
// built-in ones no global file replaces.
type surface struct {
	ws     []workspace.File
	global []workspace.File
	lower  []workspace.File
	wsMap  map[string][]byte
	lowMap map[string][]byte
}

func (s *Service) readSurface(ctx context.Context, ws string) (surface, error) {
	read, err := s.surfaces.Read(ctx, ws)
	if err != nil {
		return surface{}, err
	}
	files, global := read.Own, read.Global
	sf := surface{ws: files, global: global, lower: append([]workspace.File(nil), global...),
		wsMap: map[string][]byte{}, lowMap: map[string][]byte{}}
	for _, f := range files {
		sf.wsMap[f.Path] = f.Content
	}
	for _, f := range global {
		sf.lowMap[f.Path] = f.Content
	}
	for _, f := range chat.Builtin() {
		if _, ok := sf.lowMap[f.Path]; !ok {
			sf.lower = append(sf.lower, f)
			sf.lowMap[f.Path] = f.Content
		}
	}
	return sf, nil
}

// effective is the surface an agent of the workspace sees (built-in, global,
// workspace), by path.
func (sf surface) effective() []workspace.EffectiveFile {
	return chat.Surface(chat.Builtin(), sf.global, sf.ws)
}

func effectiveMap(eff []workspace.EffectiveFile) map[string]string {
	m := make(map[string]string, len(eff))
	for _, f := range eff {
		m[f.Path] = string(f.Content)
	}
	return m
}

// sandboxFiles returns a sandbox as workspace files.
func sandboxFiles(ws string, sandbox map[string][]byte) []workspace.File {
	out := make([]workspace.File, 0, len(sandbox))
	for p, c := range sandbox {
		out = append(out, workspace.NewFile(ws, p, c, time.Time{}))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// merge merges the source patches, in run order, into the files the sandbox
// writes over the workspace's current files (it returns only those). A path two patches write differently,
// or one patch writes while the live content changed since its run drafted it
// (the run's snapshot differs from the live content), overlaps: the
// __apply_agent__ merges the current content with each run's version. Every
// other path takes the patch's content as is (deterministic). Deletes are never
// applied (publish never deletes); they are reported.
func (s *Service) merge(ctx context.Context, ws, language string, sf surface, srcs []sourceRun) (map[string][]byte, MergeSummary, []string, error) {
	merged := map[string][]byte{}
	live := effectiveMap(sf.effective())
	patches := make([]evolution.Patch, len(srcs))
	var deletes []string
	for i, src := range srcs {
		patches[i] = src.patch
		deletes = append(deletes, src.patch.Deletes...)
	}
	clean, overlapping := evolution.SplitOverlaps(patches)
	conflict := map[string]bool{}
	for _, p := range overlapping {
		conflict[p] = true
	}
	for path, content := range clean {
		cur, exists := live[path]
		if exists && cur == content {
			continue // already live
		}
		for _, src := range srcs {
			if src.base == nil || !writes(src.patch, path) {
				continue
			}
			base, had := src.base[path]
			if had != exists || base != cur {
				conflict[path] = true // the surface moved since the run drafted it
			}
		}
	}
	sum := MergeSummary{}
	var paths []string
	for p := range conflict {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for path, content := range clean {
		if !conflict[path] {
			merged[path] = []byte(content)
		}
	}
	if len(paths) > 0 {
		agent, notes, err := s.mergeWithAgent(ctx, ws, language, paths, live, srcs)
		if err != nil {
			return nil, MergeSummary{}, nil, err
		}
		for p, c := range agent {
			merged[p] = []byte(c)
		}
		sum.Overlapping, sum.Notes = paths, notes
	}
	sum.Files = []string{}
	for p, c := range merged {
		if old, ok := sf.wsMap[p]; !ok || string(old) != string(c) {
			sum.Files = append(sum.Files, p)
		}
	}
	sort.Strings(sum.Files)
	sort.Strings(deletes)
	return merged, sum, dedupe(deletes), nil
}

// mergeWithAgent asks the __apply_agent__ for one version of each path.
func (s *Service) mergeWithAgent(ctx context.Context, ws, language string, paths []string, live map[string]string, srcs []sourceRun) (map[string]string, string, error) {
	in := evolution.MergeInput{Workspace: ws, Language: language, Paths: paths, Current: map[string]string{}}
	for _, p := range paths {
		if c, ok := live[p]; ok {
			in.Current[p] = c
		}
	}
	for _, src := range srcs {
		mp := evolution.MergePatch{RunID: src.item.ID, Rationale: src.patch.Rationale}
		for _, f := range src.patch.Files {
			for _, p := range paths {
				if f.Path == p {
					mp.Files = append(mp.Files, evolution.PatchFile{Path: p, Content: rebase(src, p, f.Content, live)})
				}
			}
		}
		if len(mp.Files) > 0 {
			in.Patches = append(in.Patches, mp)
		}
	}
	resp, err := s.model.Generate(ctx, evolution.MergePrompt(in))
	if err != nil {
		return nil, "", &modelFailure{err}
	}
	m, err := evolution.ParseMerge(resp.Text, paths...)
	if err != nil {
		return nil, "", &molt.Error{Code: molt.EINVALID, Reason: ReasonMergeFailed,
			Message: ReasonMergeFailed + ": " + clip(errText(err), 300)}
	}
	out := make(map[string]string, len(m.Files))
	for _, f := range m.Files {
		out[f.Path] = f.Content
	}
	return out, m.Notes, nil
}

// rebase returns a run's version of path re-applied onto the live content when
// the surface moved since the run drafted it: a line-wise three-way union of the
// run's base, the live content and the run's version (evolution.UnionMerge), so
// the agent is shown the run's change on top of what is live now rather than a
// version that silently drops the edits made since. Unchanged otherwise.
func rebase(src sourceRun, path, version string, live map[string]string) string {
	if src.base == nil {
		return version
	}
	base, had := src.base[path]
	cur, exists := live[path]
	if had == exists && base == cur {
		return version
	}
	return evolution.UnionMerge(base, []string{cur, version})
}

func writes(p evolution.Patch, path string) bool {
	for _, f := range p.Files {
		if f.Path == path {
			return true
		}
	}
	return false
}

func dedupe(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// regressResult is one run's dry-run and score on the merged sandbox.
type regressResult struct {
	entry  RegressEntry
	dryRun dryRunArtifact
	score  *evolution.Score
	raw    string // the scorer's answer when it could not be read
}

type dryRunArtifact struct {
	Run     string `json:"run"`
	Agent   string `json:"agent"`
	Message string `json:"message"`
	Reply   string `json:"reply"`
	Steps   int    `json:"steps"`
	Error   string `json:"error,omitempty"`
}

// Floors of the regression check: a merged sandbox scoring below either fails
// the apply.
const (
	RegressLintFloor     = 50
	RegressBehaviorFloor = 50
)

// regress dry-runs src's test scenario with its agent on the merged sandbox
// (built-in, global and the sandbox's workspace files; no tools: the sandbox is
// never written) and scores the answer with the __score__ agent in regress
// mode. It returns the entry (Passed false with the reason when the run
// regressed) or a modelFailure.
func (s *Service) regress(ctx context.Context, ws, language string, sf surface, sandbox map[string][]byte, src sourceRun) (regressResult, error) {
	r := regressResult{entry: RegressEntry{Run: src.item.ID},
		dryRun: dryRunArtifact{Run: src.item.ID, Agent: src.data.Agent, Message: src.patch.TestScenario.Message}}
	eff := chat.Surface(chat.Builtin(), sf.global, sandboxFiles(ws, sandbox))
	prompt, err := chat.Assemble(chat.PromptInput{Surface: eff, Agent: src.data.Agent, Root: true})
	if err != nil {
		r.dryRun.Error = clip(errText(err), 500)
		r.entry.Reason = ReasonDryRunFailed + ":" + src.item.ID
		return r, nil
	}
	loop := chat.Loop{Model: s.model, System: prompt.System, MaxSteps: 1,
		Messages: []model.Message{{Role: model.RoleUser, Text: src.patch.TestScenario.Message}}}
	if prompt.Agent.Model.MaxTokens > 0 {
		loop.MaxTokens = prompt.Agent.Model.MaxTokens
	}
	res, err := loop.Run(ctx)
	if err != nil {
		return r, &modelFailure{err}
	}
	r.dryRun.Reply, r.dryRun.Steps = res.Reply(), res.Steps
	live := effectiveMap(sf.effective())
	resp, err := s.model.Generate(ctx, evolution.ScorePrompt(evolution.ScoreInput{
		RunID: src.item.ID, Workspace: ws, Agent: src.data.Agent, Mode: evolution.ScoreModeRegress,
		Hint: src.data.Hint, Language: language, PatchMD: evolution.RenderPatchMD(src.patch, live),
		Scenario: src.patch.TestScenario, DryRun: r.dryRun.Reply}))
	if err != nil {
		return r, &modelFailure{err}
	}
	sc, err := evolution.ParseScore(resp.Text)
	if err != nil {
		r.raw = clip(resp.Text, 4000)
		r.entry.Reason = ReasonScoreMissing + ":" + src.item.ID
		return r, nil
	}
	r.score = &sc
	r.entry.Lint, r.entry.Behavior, r.entry.Avg = sc.Lint, sc.Behavior, sc.Avg
	switch {
	case sc.Lint < RegressLintFloor:
		r.entry.Reason = fmt.Sprintf("%s:%s(lint %d)", ReasonRegression, src.item.ID, sc.Lint)
	case sc.Behavior < RegressBehaviorFloor:
		r.entry.Reason = fmt.Sprintf("%s:%s(behavior %d)", ReasonRegression, src.item.ID, sc.Behavior)
	default:
		r.entry.Passed = true
	}
	return r, nil
}

// saveRegress writes a run's regression artifacts under this attempt's folder.
func (s *Service) saveRegress(ctx context.Context, id string, attempt int, r regressResult) error {
	put := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return s.blobs.Put(ctx, regressKey(id, attempt, r.entry.Run, name), b)
	}
	if err := put("dryrun.json", r.dryRun); err != nil {
		return fmt.Errorf("save dry-run of %s: %w", r.entry.Run, err)
	}
	var err error
	if r.score != nil {
		err = put("score.json", r.score)
	} else if r.raw != "" {
		err = s.blobs.Put(ctx, regressKey(id, attempt, r.entry.Run, "score-unreadable.txt"), []byte(r.raw))
	}
	if err != nil {
		return fmt.Errorf("save score of %s: %w", r.entry.Run, err)
	}
	return nil
}

// modelFailure is a model call that failed; transient ones give the attempt back.
type modelFailure struct{ err error }

func (f *modelFailure) Error() string { return "model: " + f.err.Error() }
func (f *modelFailure) Unwrap() error { return f.err }

// transient reports whether the model may answer later (a retry is worth it).
func (f *modelFailure) transient() bool { return molt.ErrorCode(f.err) == molt.EUNAVAILABLE }

func (f *modelFailure) reason() string {
	r := molt.ErrorReason(f.err)
	if r == "" {
		r = molt.ErrorCode(f.err)
	}
	return ReasonModel + ":" + r
}

func errText(err error) string {
	var me *molt.Error
	if errors.As(err, &me) && me.Message != "" {
		return me.Message
	}
	return err.Error()
}

// clip trims s and cuts it to at most n bytes on a rune boundary, marking a cut.
func clip(s string, n int) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
