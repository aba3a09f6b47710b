package deploytest

import (
	"fmt"
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
}

// checkPolicies checks every function's Policies (which must be explicit policy
// documents: no managed policies, no SAM policy templates, which grant more than
// the code uses) and every IAM resource's statements.
func (c *checker) checkPolicies() {
	ids, _ := c.sortedFunctions()
	for _, id := range ids {
		where := "template.yaml " + id
		props := c.tpl.rawProps(id)
		if _, ok := props["Role"]; ok {
			c.addf(where, "Role: give the function Policies instead, so its permissions are visible and checked here")
		}
		var docs []any
		switch p := props["Policies"].(type) {
		case nil:
		case []any:
			docs = p
		default:
			docs = []any{p}
		}
		for i, d := range docs {
			w := fmt.Sprintf("%s Policies[%d]", where, i)
			doc, ok := d.(map[string]any)
			if !ok {
				c.addf(w, "%v is a managed policy: write explicit statements", d)
				continue
			}
			if _, ok := doc["Statement"]; !ok {
				c.addf(w, "a SAM policy template (%v): write explicit statements with exact actions", sortedKeys(doc))
				continue
			}
			c.checkStatements(w, doc["Statement"])
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

// checkStatements checks the Allow statements of a policy document.
func (c *checker) checkStatements(where string, statements any) {
	list, ok := statements.([]any)
	if !ok {
		list = []any{statements}
	}
	for i, s := range list {
		st, ok := s.(map[string]any)
		w := fmt.Sprintf("%s Statement[%d]", where, i)
		if !ok {
			c.addf(w, "not a statement: %v", s)
			continue
		}
		if sid, ok := st["Sid"].(string); ok {
			w = fmt.Sprintf("%s Statement %s", where, sid)
		}
		if st["Effect"] != "Allow" {
			continue
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
			c.checkResource(w, actions, r)
		}
	}
}

// checkResource checks one Resource entry of an Allow statement.
func (c *checker) checkResource(where string, actions []string, r any) {
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
		gsis := map[string]bool{}
		for _, g := range t.GlobalSecondaryIndexes {
			var gk []string
			for _, k := range g.KeySchema {
				gk = append(gk, k.AttributeName+" "+k.KeyType)
			}
			switch g.IndexName {
			case "gsi1", "gsi2":
				gsis[g.IndexName] = true
				key(g.IndexName, gk, g.IndexName+"pk", g.IndexName+"sk")
				if g.Projection == nil || maybe(g.Projection.ProjectionType) != "ALL" {
					c.addf(where, "%s must project ALL", g.IndexName)
				}
			default:
				c.addf(where, "unknown index %s (the adapter uses gsi1 and gsi2)", g.IndexName)
			}
		}
		for _, name := range []string{"gsi1", "gsi2"} {
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
	}
}
