package deploytest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Grant is one Allow statement that a function's policies always grant, in terms
// of the template's resources. Statements under an Fn::If, in a policy under an
// Fn::If, or with a Condition block are left out: they may not apply.
type Grant struct {
	Sid       string
	Actions   []string
	Resources []GrantResource
}

// GrantResource is one Resource of a statement: the template resource whose ARN
// it starts with (ID; "" for another service's resource, such as a Bedrock model)
// and the glob the rest of the ARN must match: "" for the resource itself,
// "/index/*" for !Sub "${Table.Arn}/index/*", "/runs/*" for a bucket prefix. Text
// is the Resource as written.
type GrantResource struct {
	ID      string
	Pattern string
	Text    string
}

// Grants returns the statements the Policies of the function logicalID in
// root/template.yaml always grant. It does not judge them (Check does).
func Grants(root, logicalID string) ([]Grant, error) {
	tpl, err := loadTemplate(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	if tpl.resourceType(logicalID) != "AWS::Serverless::Function" {
		return nil, fmt.Errorf("template.yaml has no function %s", logicalID)
	}
	c := &checker{tpl: tpl}
	out := c.grants(logicalID)
	if len(c.problems) > 0 {
		return out, fmt.Errorf("%s's policies: %v", logicalID, c.problems)
	}
	return out, nil
}

// grants returns the statements the Policies of function id always grant
// (see Grants); problems reading them are added to c.
func (c *checker) grants(id string) []Grant {
	var out []Grant
	for _, d := range c.policyDocs(id) {
		if d.conditional {
			continue
		}
		list, ok := d.doc["Statement"].([]any)
		if !ok {
			list = []any{d.doc["Statement"]}
		}
		for _, s := range list {
			st, ok := s.(map[string]any)
			if !ok || st["Effect"] != "Allow" || st["Condition"] != nil {
				continue // an Fn::If, a Deny, a conditional grant
			}
			g := Grant{Actions: strs(st["Action"])}
			g.Sid, _ = st["Sid"].(string)
			resources, ok := st["Resource"].([]any)
			if !ok {
				resources = []any{st["Resource"]}
			}
			for _, r := range resources {
				g.Resources = append(g.Resources, grantResource(r))
			}
			out = append(out, g)
		}
	}
	return out
}

var arnSubRE = regexp.MustCompile(`^\$\{([A-Za-z0-9]+)\.Arn\}(.*)$`)

// grantResource reads one Resource entry.
func grantResource(r any) GrantResource {
	out := GrantResource{Text: fmt.Sprint(r)}
	ref, ok := parseRef(r)
	switch {
	case !ok:
	case ref.Fn == "GetAtt":
		if id, attr, _ := strings.Cut(ref.Text, "."); attr == "Arn" {
			out.ID = id
		}
	case ref.Fn == "Sub":
		if m := arnSubRE.FindStringSubmatch(ref.Text); m != nil && !strings.Contains(m[2], "${") {
			out.ID, out.Pattern = m[1], m[2]
		}
	}
	return out
}

// Allows reports whether any of grants allows action on the template resource id
// at path, the rest of the ARN after the resource's own ("" for the resource
// itself, "/index/gsi1" for a table's index, "/runs/x/meta.json" for an object of
// a bucket). In a pattern "*" matches any run of characters, "/" included, as in
// IAM.
func Allows(grants []Grant, action, id, path string) bool {
	for _, g := range grants {
		if !slices.Contains(g.Actions, action) {
			continue
		}
		for _, r := range g.Resources {
			if r.ID == id && id != "" && globMatch(r.Pattern, path) {
				return true
			}
		}
	}
	return false
}

// globMatch matches s against an IAM resource pattern (* and ?).
func globMatch(pattern, s string) bool {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()).MatchString(s)
}
