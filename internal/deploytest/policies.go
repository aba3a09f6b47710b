package deploytest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// starActions are the only actions that may name Resource "*": they support no
// resource-level permissions.
var starActions = []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "cloudwatch:PutMetricData"}

// serviceResources says which template resource types an action's service may
// be granted on; an action of another service is not checked against types.
var serviceResources = map[string][]string{
	"dynamodb": {"AWS::DynamoDB::Table"},
	"s3":       {"AWS::S3::Bucket"},
	"sqs":      {"AWS::SQS::Queue"},
	"sns":      {"AWS::SNS::Topic"},
	"lambda":   {"AWS::Serverless::Function", "AWS::Lambda::Function"},
}

// checkPolicies checks every function's Policies (which must be explicit policy
// documents: no managed policies, no SAM policy templates, which grant more than
// the code uses) and every IAM resource's statements. Only functions that
// configure a model (MOLT_MODEL) may be granted Bedrock actions.
func (c *checker) checkPolicies() {
	ids, fns := c.sortedFunctions()
	for _, id := range ids {
		where := "template.yaml " + id
		if _, ok := c.tpl.rawProps(id)["Role"]; ok {
			c.addf(where, "Role: give the function Policies instead, so its permissions are visible and checked here")
		}
		_, hasModel := c.environment(fns[id])["MOLT_MODEL"]
		for _, d := range c.policyDocs(id) {
			c.checkStatements(d.where, d.doc["Statement"])
			if hasModel {
				continue
			}
			for _, st := range c.statements(d.doc) {
				for _, a := range strs(st["Action"]) {
					if strings.HasPrefix(a, "bedrock:") {
						c.addf(d.where, "%s granted to a function that configures no model (MOLT_MODEL)", a)
					}
				}
			}
		}
	}
	res, _ := c.tpl.Raw["Resources"].(map[string]any)
	for _, id := range sortedKeys(res) {
		switch typ := c.tpl.resourceType(id); typ {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			doc, _ := c.tpl.rawProps(id)["PolicyDocument"].(map[string]any)
			c.checkStatements("template.yaml "+id, doc["Statement"])
		case "AWS::IAM::Role":
			pols, _ := c.tpl.rawProps(id)["Policies"].([]any)
			for i, p := range pols {
				pm, _ := p.(map[string]any)
				doc, _ := pm["PolicyDocument"].(map[string]any)
				c.checkStatements(fmt.Sprintf("template.yaml %s Policies[%d]", id, i), doc["Statement"])
			}
		}
	}
}

// policyDoc is one policy document of a function's Policies.
type policyDoc struct {
	where string
	doc   map[string]any
	// conditional: under an Fn::If, so it may not apply.
	conditional bool
}

// policyDocs returns a function's policy documents, reporting entries that are
// not explicit documents (managed policies, SAM policy templates). An entry may
// be an Fn::If of documents.
func (c *checker) policyDocs(id string) []policyDoc {
	where := "template.yaml " + id
	var entries []any
	switch p := c.tpl.rawProps(id)["Policies"].(type) {
	case nil:
	case []any:
		entries = p
	default:
		entries = []any{p}
	}
	var out []policyDoc
	var add func(w string, d any, conditional bool)
	add = func(w string, d any, conditional bool) {
		doc, ok := d.(map[string]any)
		if !ok {
			if r, isRef := parseRef(d); isRef && r.Fn == "Ref" && r.Text == "AWS::NoValue" && conditional {
				return
			}
			c.addf(w, "%v is a managed policy: write explicit statements", d)
			return
		}
		if args, isIf := doc["Fn::If"].([]any); isIf && len(doc) == 1 {
			if len(args) != 3 {
				c.addf(w, "Fn::If needs [condition, then, else]")
				return
			}
			c.checkConditionName(w, args[0])
			add(w, args[1], true)
			add(w, args[2], true)
			return
		}
		if _, ok := doc["Statement"]; !ok {
			c.addf(w, "a SAM policy template (%v): write explicit statements with exact actions", sortedKeys(doc))
			return
		}
		out = append(out, policyDoc{where: w, doc: doc, conditional: conditional})
	}
	for i, d := range entries {
		add(fmt.Sprintf("%s Policies[%d]", where, i), d, false)
	}
	return out
}

// statements returns a document's statements, the branches of each Fn::If
// included, without reporting anything.
func (c *checker) statements(doc map[string]any) []map[string]any {
	quiet := &checker{opts: c.opts, tpl: c.tpl}
	list, ok := doc["Statement"].([]any)
	if !ok {
		list = []any{doc["Statement"]}
	}
	var out []map[string]any
	for _, s := range list {
		out = append(out, quiet.branches("", s)...)
	}
	return out
}

// checkStatements checks the Allow statements of a policy document. A statement
// may be an Fn::If: both branches are checked (AWS::NoValue stands for none).
func (c *checker) checkStatements(where string, statements any) {
	list, ok := statements.([]any)
	if !ok {
		list = []any{statements}
	}
	for i, s := range list {
		w := fmt.Sprintf("%s Statement[%d]", where, i)
		for _, st := range c.branches(w, s) {
			c.checkStatement(w, st)
		}
	}
}

// branches returns the statements s stands for: itself, or the branches of an
// Fn::If that are not AWS::NoValue. A branch that is no statement is reported.
func (c *checker) branches(where string, s any) []map[string]any {
	if st, ok := s.(map[string]any); ok {
		args, isIf := st["Fn::If"].([]any)
		if !isIf {
			return []map[string]any{st}
		}
		if len(args) != 3 {
			c.addf(where, "Fn::If needs [condition, then, else]")
			return nil
		}
		c.checkConditionName(where, args[0])
		var out []map[string]any
		for _, b := range args[1:] {
			if r, ok := parseRef(b); ok && r.Fn == "Ref" && r.Text == "AWS::NoValue" {
				continue
			}
			out = append(out, c.branches(where, b)...)
		}
		return out
	}
	c.addf(where, "not a statement: %v", s)
	return nil
}

// checkConditionName reports an Fn::If whose condition the template does not declare.
func (c *checker) checkConditionName(where string, name any) {
	n, ok := name.(string)
	conds, _ := c.tpl.Raw["Conditions"].(map[string]any)
	if _, declared := conds[n]; !ok || !declared {
		c.addf(where, "Fn::If on %v, which is not a condition of the template", name)
	}
}

// checkStatement checks one statement; only Allow statements grant anything.
func (c *checker) checkStatement(where string, st map[string]any) {
	w := where
	if sid, ok := st["Sid"].(string); ok {
		w = where[:strings.LastIndex(where, " Statement")] + " Statement " + sid
	}
	if st["Effect"] != "Allow" {
		return
	}
	if _, ok := st["NotAction"]; ok {
		c.addf(w, "NotAction grants everything else: list the actions")
	}
	if _, ok := st["NotResource"]; ok {
		c.addf(w, "NotResource grants everything else: list the resources")
	}
	actions := strs(st["Action"])
	if len(actions) == 0 {
		c.addf(w, "no Action")
	}
	for _, a := range actions {
		if strings.Contains(a, "*") {
			c.addf(w, "wildcard action %q: list the exact actions the code uses", a)
		}
	}
	resources, ok := st["Resource"].([]any)
	if !ok {
		resources = []any{st["Resource"]}
	}
	for _, r := range resources {
		c.checkResource(w, actions, r, st["Condition"])
	}
}

// foreign is an ARN of another service's resource a statement may name although
// the template does not declare it: the Bedrock models the workers call. Such a
// Resource is a !Sub of pseudo parameters only, and only the listed actions may be
// granted on it. A region wildcard (a cross-region inference profile routes to
// its model in other regions) needs the condition key that limits it to calls
// through a profile.
type foreign struct {
	re        *regexp.Regexp
	actions   []string
	condition string // a condition key the statement must test, or ""
}

var foreignARNs = []foreign{
	{regexp.MustCompile(`^arn:\$\{AWS::Partition\}:bedrock:\$\{AWS::Region\}::foundation-model/\*$`),
		[]string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}, ""},
	{regexp.MustCompile(`^arn:\$\{AWS::Partition\}:bedrock:\$\{AWS::Region\}:\$\{AWS::AccountId\}:inference-profile/\*$`),
		[]string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}, ""},
	{regexp.MustCompile(`^arn:\$\{AWS::Partition\}:bedrock:\*::foundation-model/\*$`),
		[]string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}, "bedrock:InferenceProfileArn"},
}

// checkResource checks one Resource entry of an Allow statement (cond is the
// statement's Condition block, if any).
func (c *checker) checkResource(where string, actions []string, r, cond any) {
	if r == nil {
		c.addf(where, "no Resource")
		return
	}
	if r == "*" {
		for _, a := range actions {
			if !slices.Contains(starActions, a) {
				c.addf(where, `Resource "*" for %s: name the template resource it acts on`, a)
			}
		}
		return
	}
	ref, ok := parseRef(r)
	if !ok || ref.Fn == "ImportValue" {
		c.addf(where, "Resource %v is not a resource of this template: use !GetAtt, !Ref or !Sub on one", r)
		return
	}
	var types []string
	for _, n := range ref.Names() {
		id := n[0]
		if strings.HasPrefix(id, "AWS::") {
			continue
		}
		typ := c.tpl.resourceType(id)
		if typ == "" {
			c.addf(where, "Resource %v names %s, which is not a resource of the template", r, id)
			continue
		}
		types = append(types, typ)
	}
	if len(types) == 0 && ref.Fn == "Sub" {
		for _, f := range foreignARNs {
			if !f.re.MatchString(ref.Text) {
				continue
			}
			for _, a := range actions {
				if !slices.Contains(f.actions, a) {
					c.addf(where, "%s granted on %s: only %v may be", a, ref.Text, f.actions)
				}
			}
			if f.condition != "" && !hasConditionKey(cond, f.condition) {
				c.addf(where, "Resource %s needs a Condition on %s", ref.Text, f.condition)
			}
			return
		}
	}
	if len(types) == 0 {
		c.addf(where, "Resource %v names no resource of the template", r)
		return
	}
	for _, a := range actions {
		svc, _, _ := strings.Cut(a, ":")
		allowed, known := serviceResources[svc]
		if !known {
			continue
		}
		for _, typ := range types {
			if !slices.Contains(allowed, typ) {
				c.addf(where, "%s granted on a %s (%v)", a, typ, r)
			}
		}
	}
}

// hasConditionKey reports whether a Condition block ({operator: {key: value}})
// tests key.
func hasConditionKey(cond any, key string) bool {
	ops, _ := cond.(map[string]any)
	for _, v := range ops {
		if m, ok := v.(map[string]any); ok {
			if _, ok := m[key]; ok {
				return true
			}
		}
	}
	return false
}

// checkTable checks the table against the schema internal/dynamo is written to.
func (c *checker) checkTable() {
	tables := c.tpl.CF.GetAllDynamoDBTableResources()
	if len(tables) != 1 {
		c.addf("template.yaml", "want exactly one AWS::DynamoDB::Table (all state), have %d", len(tables))
	}
	for _, id := range sortedKeys(tables) {
		t := tables[id]
		where := "template.yaml " + id
		if maybe(t.BillingMode) != "PAY_PER_REQUEST" {
			c.addf(where, "BillingMode must be PAY_PER_REQUEST")
		}
		defs := map[string]string{}
		for _, d := range t.AttributeDefinitions {
			defs[d.AttributeName] = d.AttributeType
		}
		key := func(w string, got []string, hash, rng string) {
			if !slices.Equal(got, []string{hash + " HASH", rng + " RANGE"}) {
				c.addf(where, "%s key must be %s (HASH), %s (RANGE); is %v", w, hash, rng, got)
			}
			for _, a := range []string{hash, rng} {
				if defs[a] != "S" {
					c.addf(where, "attribute %s must be defined as S", a)
				}
			}
		}
		var ks []string
		for _, k := range t.KeySchema {
			ks = append(ks, k.AttributeName+" "+k.KeyType)
		}
		key("table", ks, "pk", "sk")
		// The adapter's indexes and their keys (gsi4 shares gsi2's hash key).
		indexKeys := map[string][2]string{
			"gsi1": {"gsi1pk", "gsi1sk"},
			"gsi2": {"gsi2pk", "gsi2sk"},
			"gsi3": {"gsi3pk", "gsi3sk"},
			"gsi4": {"gsi2pk", "gsi4sk"},
		}
		gsis := map[string]bool{}
		for _, g := range t.GlobalSecondaryIndexes {
			var gk []string
			for _, k := range g.KeySchema {
				gk = append(gk, k.AttributeName+" "+k.KeyType)
			}
			ik, ok := indexKeys[g.IndexName]
			if !ok {
				c.addf(where, "unknown index %s (the adapter uses gsi1, gsi2, gsi3 and gsi4)", g.IndexName)
				continue
			}
			gsis[g.IndexName] = true
			key(g.IndexName, gk, ik[0], ik[1])
			if g.Projection == nil || maybe(g.Projection.ProjectionType) != "ALL" {
				c.addf(where, "%s must project ALL", g.IndexName)
			}
		}
		for _, name := range sortedKeys(indexKeys) {
			if !gsis[name] {
				c.addf(where, "index %s is missing", name)
			}
		}
		if ttl := t.TimeToLiveSpecification; ttl == nil || !ttl.Enabled || maybe(ttl.AttributeName) != "expires_at" {
			c.addf(where, "TTL must be enabled on expires_at")
		}
		if p := t.PointInTimeRecoverySpecification; p == nil || p.PointInTimeRecoveryEnabled == nil || !*p.PointInTimeRecoveryEnabled {
			c.addf(where, "point-in-time recovery must be on")
		}
		if s := t.SSESpecification; s == nil || !s.SSEEnabled {
			c.addf(where, "SSESpecification.SSEEnabled must be true")
		}
	}
}

// checkBuckets: buckets are private and encrypted.
func (c *checker) checkBuckets() {
	buckets := c.tpl.CF.GetAllS3BucketResources()
	for _, id := range sortedKeys(buckets) {
		b := buckets[id]
		where := "template.yaml " + id
		p := b.PublicAccessBlockConfiguration
		on := func(v *bool) bool { return v != nil && *v }
		if p == nil || !on(p.BlockPublicAcls) || !on(p.BlockPublicPolicy) || !on(p.IgnorePublicAcls) || !on(p.RestrictPublicBuckets) {
			c.addf(where, "PublicAccessBlockConfiguration must set all four blocks to true")
		}
		if b.BucketEncryption == nil || len(b.BucketEncryption.ServerSideEncryptionConfiguration) == 0 {
			c.addf(where, "BucketEncryption is missing")
		}
		c.checkLifecycle(id)
	}
}

// checkLifecycle: a lifecycle rule may expire objects only under ArchivePrefix,
// and not before ArchivePurgeDays: everything else is read by the code as long
// as its row exists.
func (c *checker) checkLifecycle(id string) {
	lc, _ := c.tpl.rawProps(id)["LifecycleConfiguration"].(map[string]any)
	rules, _ := lc["Rules"].([]any)
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		where := fmt.Sprintf("template.yaml %s LifecycleConfiguration.Rules[%d]", id, i)
		if rid, ok := rule["Id"].(string); ok {
			where = fmt.Sprintf("template.yaml %s lifecycle rule %s", id, rid)
		}
		if rule["Status"] != "Enabled" {
			continue
		}
		if _, ok := rule["ExpirationDate"]; ok {
			c.addf(where, "ExpirationDate expires everything it covers on a date: use ExpirationInDays under %s", ArchivePrefix)
		}
		days, expires := rule["ExpirationInDays"]
		if !expires {
			continue
		}
		prefix, _ := rule["Prefix"].(string)
		if !strings.HasPrefix(prefix, ArchivePrefix) {
			c.addf(where, "expires objects under %q: only archives (%s) may expire; runs/ and applies/ live as long as their rows",
				prefix, ArchivePrefix)
		}
		if n, ok := number(days); !ok || n < ArchivePurgeDays {
			c.addf(where, "ExpirationInDays %v is before the tick's purge (%d days after archiving)", days, ArchivePurgeDays)
		}
	}
}
