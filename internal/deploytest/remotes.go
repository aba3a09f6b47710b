package deploytest

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// RemoteTokenFolders are the functions/ folders whose code calls remote agents
// with a token read from Secrets Manager: the campaign worker (the
// supervisor's passes, internal/supervisor). Only they may read secrets; the
// api stores campaigns and queues their actions without a remote call. A new
// kind's worker joins this list only if its code calls remotes.
var RemoteTokenFolders = []string{"campaign-worker"}

// EnvRemoteSecretPrefix names the prefix of the secrets campaigns' token_ref
// may name (internal/app.EnvRemoteSecretPrefix).
const EnvRemoteSecretPrefix = "MOLT_REMOTE_SECRET_PREFIX"

// SecretAction is the one Secrets Manager action a function may be granted
// (smtoken's GetSecretValue).
const SecretAction = "secretsmanager:GetSecretValue"

// secretARNRe is the only Resource a SecretAction grant may name: the secrets
// of this account and region under a prefix (the group), as a !Sub of pseudo
// parameters.
var secretARNRe = regexp.MustCompile(`^arn:\$\{AWS::Partition\}:secretsmanager:\$\{AWS::Region\}:\$\{AWS::AccountId\}:secret:(.+)\*$`)

func init() {
	foreignARNs = append(foreignARNs, foreign{re: secretARNRe, actions: []string{SecretAction}})
}

// checkRemoteTokens: secretsmanager:GetSecretValue is the only Secrets
// Manager action granted, only to RemoteTokenFolders, each always granted it
// on exactly the secrets under the prefix its MOLT_REMOTE_SECRET_PREFIX names
// (a !Sub of pseudo parameters ending in "/", no wildcard), and nothing else.
func (c *checker) checkRemoteTokens() {
	ids, fns := c.sortedFunctions()
	for _, id := range ids {
		if isImage(fns[id]) {
			continue
		}
		where := "template.yaml " + id
		dir := c.functions[id]
		allowed := slices.Contains(RemoteTokenFolders, dir)
		prefix, prefixOK := secretPrefix(c.environment(fns[id])[EnvRemoteSecretPrefix])
		if allowed && !prefixOK {
			c.addf(where, "%s must name the secrets' prefix (a !Sub or a name ending in /, no wildcard): functions/%s reads remote tokens",
				EnvRemoteSecretPrefix, dir)
		}
		granted := false
		for _, d := range c.policyDocs(id) {
			for _, st := range c.statements(d.doc) {
				if st["Effect"] != "Allow" {
					continue
				}
				var sm []string
				for _, a := range strs(st["Action"]) {
					if strings.HasPrefix(strings.ToLower(a), "secretsmanager:") {
						sm = append(sm, a)
					}
				}
				if len(sm) == 0 {
					continue
				}
				w := d.where
				if sid, ok := st["Sid"].(string); ok {
					w += " Statement " + sid
				}
				if !allowed {
					c.addf(w, "%v granted to a function that reads no remote token (only %v do)", sm, RemoteTokenFolders)
					continue
				}
				for _, a := range sm {
					if a != SecretAction {
						c.addf(w, "%s granted: %s is the only Secrets Manager action molt's code calls", a, SecretAction)
					}
				}
				resources, ok := st["Resource"].([]any)
				if !ok {
					resources = []any{st["Resource"]}
				}
				for _, r := range resources {
					ref, isRef := parseRef(r)
					m := secretARNRe.FindStringSubmatch(ref.Text)
					if !isRef || ref.Fn != "Sub" || m == nil || !prefixOK || m[1] != prefix {
						c.addf(w, "%s on %v: grant it on !Sub \"arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:%s*\" exactly (the prefix %s names)",
							SecretAction, r, prefix, EnvRemoteSecretPrefix)
						continue
					}
					if !d.conditional && st["Condition"] == nil {
						granted = true
					}
				}
			}
		}
		if allowed && prefixOK && !granted {
			c.addf(where, "functions/%s reads remote tokens, but no statement always grants %s on the secrets under %s",
				dir, SecretAction, prefix)
		}
	}
}

// secretPrefix reads MOLT_REMOTE_SECRET_PREFIX: a literal or the text of a
// !Sub (pseudo parameters only), ending in "/" and holding no wildcard.
func secretPrefix(v string) (string, bool) {
	if r, ok := parseRef(v); ok {
		if r.Fn != "Sub" {
			return "", false
		}
		for _, n := range r.Names() {
			if !strings.HasPrefix(n[0], "AWS::") {
				return "", false
			}
		}
		v = r.Text
	}
	if v == "" || !strings.HasSuffix(v, "/") || strings.ContainsAny(v, "*?") {
		return "", false
	}
	return v, true
}

// TickerID is the tick's function: it re-sends the lost wake-ups of every
// kind, so it may send to every worker's queue.
const TickerID = "TickerFunction"

// checkKinds: every kind of work the code registers (Options.Kinds, from
// internal/app.Kinds) has its worker function functions/<kind>-worker, and
// every worker function is of a registered kind and has its sample
// events/<kind>-worker-wake.json; the tick may wake every
// worker (sqs:SendMessage on the queue its MOLT_QUEUE_<KIND> names). The rest
// of a kind's wiring (its queue, dead-letter queue and alarm, MOLT_QUEUE_<KIND>,
// partial batch responses) is checkQueues'.
func (c *checker) checkKinds() {
	ids, fns := c.sortedFunctions()
	var tick []Grant
	if _, ok := fns[TickerID]; ok {
		tick = c.grants(TickerID)
	}
	workers := map[string]bool{}
	for _, id := range ids {
		dir := c.functions[id]
		kind, ok := strings.CutSuffix(dir, "-worker")
		if !ok || kind == "" {
			continue
		}
		workers[kind] = true
		if sample := filepath.Join("events", dir+"-wake.json"); !fileExists(filepath.Join(c.opts.Root, sample)) {
			c.addf("functions/"+dir, "no %s: a worker's sample (a wake-up and a malformed record) is what internal/functest invokes it with", sample)
		}
		if c.opts.Kinds != nil && !slices.Contains(c.opts.Kinds, kind) {
			c.addf("functions/"+dir, "no kind %q is registered (internal/app's registry) for this worker", kind)
		}
		key := "MOLT_QUEUE_" + strings.ToUpper(strings.ReplaceAll(kind, "-", "_"))
		if q, _, ok := target(c.environment(fns[TickerID])[key]); ok && tick != nil && !Allows(tick, "sqs:SendMessage", q, "") {
			c.addf("template.yaml "+TickerID, "no statement always grants sqs:SendMessage on %s: the tick re-sends %s wake-ups", q, kind)
		}
	}
	if c.opts.Kinds == nil {
		return
	}
	for _, kind := range c.opts.Kinds {
		if !workers[kind] {
			c.addf("template.yaml", "kind %q is registered but has no %sWorkerFunction (functions/%s-worker, its queue and MOLT_QUEUE_%s)",
				kind, camel(kind), kind, strings.ToUpper(strings.ReplaceAll(kind, "-", "_")))
		}
	}
}

// AllowsSecret reports whether grants allow reading the Secrets Manager
// secret id (a name, or an ARN whose name part is read) in a stack named
// stack: a SecretAction statement on the secrets under a prefix, the prefix's
// ${AWS::StackName} read as stack.
func AllowsSecret(grants []Grant, id, stack string) bool {
	name := id
	if _, after, ok := strings.Cut(id, ":secret:"); ok && strings.HasPrefix(id, "arn:") {
		name = after
	}
	for _, g := range grants {
		if !slices.Contains(g.Actions, SecretAction) {
			continue
		}
		for _, r := range g.Resources {
			ref, ok := parseRef(r.Text)
			if !ok || ref.Fn != "Sub" {
				continue
			}
			if m := secretARNRe.FindStringSubmatch(ref.Text); m != nil {
				prefix := strings.ReplaceAll(m[1], "${AWS::StackName}", stack)
				if !strings.Contains(prefix, "${") && globMatch(prefix+"*", name) {
					return true
				}
			}
		}
	}
	return false
}
