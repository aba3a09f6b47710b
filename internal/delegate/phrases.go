package delegate

import "strings"

// phrase is a delegation phrase: its words (each slot lists the words it
// accepts; an optional slot may be skipped), which must open a clause, then
// (an article and) a registered name; next, when set, lists the words one of
// which must follow the name ("get the reviewer TO …").
type phrase struct {
	slots [][]string
	opt   []bool
	next  []string
}

// p builds a phrase from slots written "a|b" ("?" at the end marks an
// optional slot).
func p(next string, slots ...string) phrase {
	ph := phrase{}
	for _, s := range slots {
		opt := strings.HasSuffix(s, "?")
		ph.slots = append(ph.slots, strings.Split(strings.TrimSuffix(s, "?"), "|"))
		ph.opt = append(ph.opt, opt)
	}
	if next != "" {
		ph.next = strings.Split(next, "|")
	}
	return ph
}

const objs = "this|it|that|these|those|them"

// phrases, by language: English, German, French, Spanish.
var phrases = []phrase{
	// English
	p("", "ask"),
	p("", "have"),
	p("", "let"),
	p("to", "get"),
	p("", "tell"),
	p("", "ping"),
	p("", "delegate", objs+"?", "to"),
	p("", "hand", objs+"?", "over|off?", "to"),
	p("", "send|forward|pass|route|give|assign", objs, "over|on|along?", "to"),
	// German
	p("", "frag|frage|fragt|fragen"),
	p("", "lass|lasst|lassen"),
	p("", "bitte|bitten|bittet"),
	p("", "sag|sage|sagt|sagen"),
	p("", "gib|gebt|schick|schicke|schickt|leite|leitet|übergib", "das|es|dies|diese|den|die?", "weiter?", "an"),
	// French
	p("", "demande|demandez|demander|dis|dites|dire|propose|proposez", "à|a|au|aux"),
	p("", "envoie|envoyez|envoyer|transmets|transmettez|transmettre|transfère|transférez|passe|passez|passer|confie|confiez|confier", "ça|cela|ceci|le|la|les?", "à|a|au|aux"),
	p("", "laisse|laissez"),
	// Spanish
	p("", "pide|pídele|pidele|pedir|pedirle|pregunta|pregúntale|preguntale|preguntar|preguntarle|dile|dígale|digale|decir|decirle|pida|pregunte", "a|al"),
	p("", "haz|haga", "que"),
	p("", "envía|envia|envíale|enviale|enviar|enviarle|manda|mándale|mandale|mandar|pasa|pásale|pasale|pasar|reenvía|reenvia", "esto|eso|lo|la?", "a|al"),
}

// modalPhrases open with a modal, name the target, and end the clause with
// the verb (German word order: "Kannst du Nora fragen, ob …").
var modalPhrases = []struct {
	open  []string
	verbs map[string]bool
}{
	{open: strings.Split("kannst|könntest|kann|könnt|könntet|würdest", "|"),
		verbs: set("fragen bitten sagen schicken geben weitergeben weiterleiten zeigen prüfen lassen")},
}

// conjunctions join a second target to the first ("the reviewer and the
// translator"): a message that does so abstains.
var conjunctions = set("and or und oder et ou y o e plus")

// connectors may stand between a conjunction and a name ("and to the …").
var connectors = set("to an à a au aux al")

// articles may stand between a phrase and a name.
var articles = set("the a an our my your this that den die das dem der des unseren unserem unsere unserer meinen meinem meine le la les l notre nos mon ma el los las lo nuestro nuestra mi")

// politeness words may open a clause before a phrase ("please", "can you",
// "bitte", "peux-tu", "por favor").
var politeness = set("please pls kindly can could would will you ok okay so then now also bitte kannst könntest du mal doch peux pourrais pouvez pourriez tu vous merci de svp por favor puedes podrías podrias puede podría podria usted")

// requestWords may follow a vocative name ("Nora, please …").
var requestWords = set("please pls can could would kindly bitte kannst könntest peux pouvez pourrais pourriez merci por puedes podrías podrias")

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// at reports whether the phrase stands at toks[i], opening a clause, and
// returns the index after it.
func (ph phrase) at(toks []token, i int) (int, bool) {
	if !clauseStart(toks, i) {
		return 0, false
	}
	j := i
	for k, slot := range ph.slots {
		if j < len(toks) && contains(slot, toks[j].w) {
			j++
			continue
		}
		if ph.opt[k] {
			continue
		}
		return 0, false
	}
	return j, j > i
}

// after reports whether what follows the name (at toks[k]) suits the phrase.
func (ph phrase) after(toks []token, k int) bool {
	if len(ph.next) == 0 {
		return true
	}
	return k < len(toks) && contains(ph.next, toks[k].w)
}

func contains(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// clauseStart reports whether toks[i] opens a clause: it is the first word,
// or only politeness words stand between it and the start of the message or
// of a sentence (after . ! ? ; : or a line break).
var clauseBreaks = ".!?;:,\n¿¡"

func clauseStart(toks []token, i int) bool {
	j := i
	for j > 0 && politeness[toks[j-1].w] {
		j--
	}
	if j == 0 {
		return true
	}
	gap := msgGap(toks, j)
	return strings.ContainsAny(gap, clauseBreaks)
}

func msgGap(toks []token, j int) string { return toks[j].gapBefore }
