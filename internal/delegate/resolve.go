// Package delegate decides, deterministically and without I/O, whether a chat
// message routes to another agent: a workspace agent or a remote A2A agent an
// administrator registered. Resolve reads the message against a Registry of
// targets and answers dispatch, local or abstain; Prepare is the one execution
// gate that re-validates a dispatch against the live registry and the caller
// just before it happens. There is no classifier and no model call: explicit
// tokens (`@name`, `/to name …`) and a small set of delegation phrases in
// English, German, French and Spanish, matched only against registered names
// and aliases. Text that merely mentions an agent — inside quotes, fenced or
// inline code, URLs, e-mail addresses, file names — or names it partially
// never selects it.
package delegate

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Decisions.
const (
	Dispatch = "dispatch" // route the message to Target
	Local    = "local"    // answer it here
	Abstain  = "abstain"  // a route was asked for but cannot be decided: answer here, say why
)

// Target kinds.
const (
	KindAgent  = "agent"  // an agent of the workspace (agents/<id>/)
	KindRemote = "remote" // a remote A2A agent registered by a full token
)

// Methods of a dispatch.
const (
	MethodExplicit = "explicit" // @name or /to name
	MethodNatural  = "natural"  // a delegation phrase naming a registered name
	MethodAlias    = "alias"    // the same, through one of the target's aliases
)

// Reasons of an abstention (and of a local decision, where one helps).
const (
	ReasonNoRoute       = "no_route"       // local: nothing asks for a route
	ReasonAmbiguous     = "ambiguous"      // two or more targets named
	ReasonUnknownTarget = "unknown_target" // an explicit token names no registered target
	ReasonGone          = "target_gone"    // Prepare: the target left the registry
	ReasonNotAllowed    = "not_allowed"    // Prepare: the caller may not use the target
	ReasonNotRegistered = "not_registered" // Prepare: a remote no administrator registered
)

// Target is one agent messages can be routed to.
type Target struct {
	Name    string   // the canonical name: the agent's id, or the remote's registered name
	Kind    string   // KindAgent or KindRemote
	Title   string   // agent.yaml name, when it differs from the id ("Nora")
	Aliases []string // further names
	// Registered marks a remote an administrator registered (Prepare refuses
	// any other remote).
	Registered bool
}

// Registry is the set of targets of one workspace.
type Registry struct {
	Targets []Target
}

// Resolution is what Resolve decided.
type Resolution struct {
	Decision   string   `json:"decision"`
	Target     string   `json:"target,omitempty"`
	Kind       string   `json:"kind,omitempty"`
	Method     string   `json:"method,omitempty"`
	Candidates []string `json:"candidates,omitempty"`
	Ambiguous  bool     `json:"ambiguous"`
	Reason     string   `json:"reason,omitempty"`
	// Message is what the target receives: the original message, unchanged
	// but for a removed explicit token.
	Message string `json:"message"`
}

// Normalize folds a name for matching: lower case, hyphens, underscores and
// dots as spaces, runs of spaces as one, accents kept (names are matched as
// written, case aside).
func Normalize(s string) string {
	return strings.Join(words(strings.ToLower(s)), " ")
}

// words splits s into its words: runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// form is one way to name a target: its words, and whether it is an alias.
type form struct {
	words  []string
	target int
	alias  bool
}

// forms lists every name of every target, longest first (so "code reviewer"
// wins over "reviewer" at the same place).
func (r Registry) forms() []form {
	var out []form
	for i, t := range r.Targets {
		add := func(name string, alias bool) {
			if w := words(strings.ToLower(name)); len(w) > 0 {
				out = append(out, form{words: w, target: i, alias: alias})
			}
		}
		add(t.Name, false)
		if t.Title != "" {
			add(t.Title, false)
		}
		for _, a := range t.Aliases {
			add(a, true)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return len(out[a].words) > len(out[b].words) })
	return out
}

// token is a word of the message with its place in it.
type token struct {
	w          string // lower case
	start, end int    // byte offsets in the message
	gapBefore  string // the text between the previous token (or the start) and this one
}

// tokenize lists the words of the message outside the masked spans.
func tokenize(msg string, masked []bool) []token {
	var out []token
	i := 0
	for i < len(msg) {
		r, n := utf8.DecodeRuneInString(msg[i:])
		if masked[i] || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			i += n
			continue
		}
		j := i
		for j < len(msg) {
			r2, n2 := utf8.DecodeRuneInString(msg[j:])
			if masked[j] || !(unicode.IsLetter(r2) || unicode.IsDigit(r2)) {
				break
			}
			j += n2
		}
		prev := 0
		if len(out) > 0 {
			prev = out[len(out)-1].end
		}
		out = append(out, token{w: strings.ToLower(msg[i:j]), start: i, end: j, gapBefore: msg[prev:i]})
		i = j
	}
	return out
}

// match is a target named at tokens [at, at+n).
type match struct {
	form form
	at   int
}

// nameAt returns the longest form whose words stand at toks[at:], or false.
// adjacent requires the words to be joined by - or _ only (the @name form).
func nameAt(msg string, toks []token, at int, forms []form, adjacent bool) (match, bool) {
	for _, f := range forms {
		if at+len(f.words) > len(toks) {
			continue
		}
		ok := true
		for k, w := range f.words {
			if toks[at+k].w != w {
				ok = false
				break
			}
			if k > 0 {
				gap := msg[toks[at+k-1].end:toks[at+k].start]
				if adjacent && strings.Trim(gap, "-_") != "" {
					ok = false
					break
				}
				if !adjacent && strings.TrimSpace(strings.Trim(gap, "-_")) != "" {
					ok = false
					break
				}
			}
		}
		if !ok {
			continue
		}
		// A whole name only: the next character must not continue the word
		// (a partial name such as "review" of "reviewer" never matches,
		// and "reviewers" is not "reviewer").
		end := toks[at+len(f.words)-1].end
		if end < len(msg) {
			if r, _ := utf8.DecodeRuneInString(msg[end:]); r == '-' || r == '_' {
				if at+len(f.words) < len(toks) && toks[at+len(f.words)].start == end+1 {
					continue // "code-reviewer-bot" is not "code-reviewer"
				}
			}
		}
		return match{form: f, at: at}, true
	}
	return match{}, false
}

// Resolve decides where message goes given the registry. It reads nothing
// but its arguments.
func Resolve(message string, reg Registry) Resolution {
	res := Resolution{Decision: Local, Reason: ReasonNoRoute, Message: message}
	forms := reg.forms()
	masked := mask(message)
	toks := tokenize(message, masked)

	// Explicit tokens first: @name anywhere outside masked text, /to name at
	// the start of a line.
	type explicit struct {
		m          match
		found      bool
		start, end int // the token's bytes, removed from the message
		name       string
	}
	var ex []explicit
	for i, t := range toks {
		at := t.start - 1
		switch {
		case at >= 0 && message[at] == '@' && (at == 0 || !isWordByte(message, at-1)):
			m, ok := nameAt(message, toks, i, forms, true)
			e := explicit{m: m, found: ok, start: at, end: t.end, name: t.w}
			if ok {
				e.end = toks[i+len(m.form.words)-1].end
			}
			ex = append(ex, e)
		case t.w == "to" && at >= 0 && message[at] == '/' && lineStart(message, at) && i+1 < len(toks):
			m, ok := nameAt(message, toks, i+1, forms, false)
			e := explicit{m: m, found: ok, start: at, end: toks[i+1].end, name: toks[i+1].w}
			if ok {
				e.end = toks[i+len(m.form.words)].end
			}
			ex = append(ex, e)
		}
	}
	if len(ex) > 0 {
		targets := map[int]bool{}
		var names []string
		for _, e := range ex {
			if !e.found {
				res.Decision, res.Reason, res.Candidates = Abstain, ReasonUnknownTarget, []string{e.name}
				return res
			}
			if !targets[e.m.form.target] {
				targets[e.m.form.target] = true
				names = append(names, reg.Targets[e.m.form.target].Name)
			}
		}
		if len(targets) > 1 {
			sort.Strings(names)
			res.Decision, res.Reason, res.Ambiguous, res.Candidates = Abstain, ReasonAmbiguous, true, names
			return res
		}
		e := ex[0]
		t := reg.Targets[e.m.form.target]
		res.Decision, res.Target, res.Kind, res.Method, res.Reason = Dispatch, t.Name, t.Kind, MethodExplicit, ""
		res.Candidates = []string{t.Name}
		spans := make([][2]int, 0, len(ex))
		for _, e := range ex {
			spans = append(spans, [2]int{e.start, e.end})
		}
		res.Message = removeTokens(message, spans)
		return res
	}

	// Natural delegation: a phrase, then (an article and) a registered name.
	var found []match
	for i := range toks {
		for _, p := range phrases {
			j, ok := p.at(toks, i)
			if !ok {
				continue
			}
			for j < len(toks) && articles[toks[j].w] {
				j++
			}
			if j >= len(toks) {
				continue
			}
			if m, ok := nameAt(message, toks, j, forms, false); ok && p.after(toks, j+len(m.form.words)) {
				found = append(found, m)
			}
		}
	}
	// German word order: a modal, the name, the verb at the end of the clause.
	for i := range toks {
		for _, mp := range modalPhrases {
			if !contains(mp.open, toks[i].w) || !clauseStart(toks, i) {
				continue
			}
			j := i + 1
			for j < len(toks) && (politeness[toks[j].w] || articles[toks[j].w]) {
				j++
			}
			m, ok := nameAt(message, toks, j, forms, false)
			if !ok {
				continue
			}
			for k := j + len(m.form.words); k < len(toks) && !strings.ContainsAny(toks[k].gapBefore, clauseBreaks); k++ {
				if mp.verbs[toks[k].w] {
					found = append(found, m)
					break
				}
			}
		}
	}
	// A vocative at the start of the message: "Nora, please check this".
	if len(toks) > 0 {
		if m, ok := nameAt(message, toks, skipArticles(toks, 0), forms, false); ok {
			end := toks[m.at+len(m.form.words)-1].end
			rest := strings.TrimLeft(message[end:], " ")
			if strings.HasPrefix(rest, ",") || strings.HasPrefix(rest, ":") {
				after := m.at + len(m.form.words)
				if after < len(toks) && requestWords[toks[after].w] {
					found = append(found, m)
				}
			}
		}
	}
	if len(found) == 0 {
		return res
	}
	targets := map[int]match{}
	var names []string
	for _, m := range found {
		if _, ok := targets[m.form.target]; !ok {
			targets[m.form.target] = m
			names = append(names, reg.Targets[m.form.target].Name)
		}
	}
	sort.Strings(names)
	if len(targets) > 1 {
		res.Decision, res.Reason, res.Ambiguous, res.Candidates = Abstain, ReasonAmbiguous, true, names
		return res
	}
	m := found[0]
	// A second target joined to the first ("ask the reviewer and the
	// translator") makes the route ambiguous.
	for k := range toks {
		o, ok := nameAt(message, toks, k, forms, false)
		if !ok || o.form.target == m.form.target {
			continue
		}
		b := k - 1
		for b >= 0 && (articles[toks[b].w] || connectors[toks[b].w]) {
			b--
		}
		if b >= 0 && conjunctions[toks[b].w] {
			names = append(names, reg.Targets[o.form.target].Name)
			sort.Strings(names)
			res.Decision, res.Reason, res.Ambiguous, res.Candidates = Abstain, ReasonAmbiguous, true, names
			return res
		}
	}
	t := reg.Targets[m.form.target]
	method := MethodNatural
	if m.form.alias {
		method = MethodAlias
	}
	res.Decision, res.Target, res.Kind, res.Method, res.Reason, res.Candidates = Dispatch, t.Name, t.Kind, method, "", names
	return res
}

func isWordByte(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i+1])
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '-'
}

// lineStart reports whether only spaces stand between the start of its line
// and byte i.
func lineStart(s string, i int) bool {
	j := strings.LastIndexByte(s[:i], '\n')
	return strings.TrimSpace(s[j+1:i]) == ""
}

func skipArticles(toks []token, i int) int {
	for i < len(toks) && articles[toks[i].w] {
		i++
	}
	return i
}

// removeTokens removes the explicit tokens (and the punctuation and space
// that follow each) from message; nothing else changes.
func removeTokens(message string, spans [][2]int) string {
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		start, end := sp[0], sp[1]
		if start < last {
			continue
		}
		b.WriteString(message[last:start])
		for end < len(message) && (message[end] == ':' || message[end] == ',') {
			end++
		}
		for end < len(message) && (message[end] == ' ' || message[end] == '\t') {
			end++
		}
		last = end
	}
	b.WriteString(message[last:])
	return b.String()
}
