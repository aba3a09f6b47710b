package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"
	"gopkg.in/yaml.v3"
)

// template is template.yaml read twice: through goformation, AWS's typed model of
// CloudFormation and SAM, and as plain YAML for what that model leaves out (SAM event
// properties such as FunctionResponseTypes, and policies exactly as written).
//
// In both, the intrinsics that name resources (Ref, Fn::GetAtt, Fn::Sub,
// Fn::ImportValue) are kept as marker strings ("{{GetAtt Table.Arn}}") instead of
// being resolved: goformation resolves GetAtt to nothing, and the checks need to
// know which resource each value points at.
type template struct {
	CF  *cloudformation.Template
	Raw map[string]any
}

// parseMu serializes goformation's parser: each parse writes a package-level map
// of tag resolvers (intrinsics.registerTagMarshallers), so two at once crash.
var parseMu sync.Mutex

// loadTemplate reads and parses path.
func loadTemplate(path string) (*template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	keep := func(name string, input, _ any) any { return marker(name, input) }
	parseMu.Lock()
	cf, err := goformation.ParseYAMLWithOptions(data, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
			"Ref": keep, "Fn::GetAtt": keep, "Fn::Sub": keep, "Fn::ImportValue": keep,
		},
	})
	parseMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("parse %s with goformation: %w", filepath.Base(path), err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Base(path), err)
	}
	raw, err := plain(&doc)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Base(path), err)
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parse %s: the document is not a mapping", filepath.Base(path))
	}
	return &template{CF: cf, Raw: m}, nil
}

// resourceType returns the Type of the logical id, or "" when there is no such
// resource.
func (t *template) resourceType(id string) string {
	r, ok := t.CF.Resources[id]
	if !ok {
		return ""
	}
	return r.AWSCloudFormationType()
}

// rawResource returns the plain YAML of a resource.
func (t *template) rawResource(id string) map[string]any {
	res, _ := t.Raw["Resources"].(map[string]any)
	r, _ := res[id].(map[string]any)
	return r
}

// rawProps returns a resource's Properties as plain YAML.
func (t *template) rawProps(id string) map[string]any {
	p, _ := t.rawResource(id)["Properties"].(map[string]any)
	return p
}

// marker renders an intrinsic that names resources as a string.
func marker(name string, input any) any {
	short := strings.TrimPrefix(name, "Fn::")
	switch v := input.(type) {
	case string:
		return "{{" + short + " " + v + "}}"
	case []any:
		var parts []string
		for _, p := range v {
			if s, ok := p.(string); ok {
				parts = append(parts, s)
			}
		}
		switch {
		case short == "GetAtt":
			return "{{GetAtt " + strings.Join(parts, ".") + "}}"
		case short == "Sub" && len(parts) > 0:
			// Fn::Sub [text, {vars}]: the vars are not resources; keep the text.
			return "{{Sub " + parts[0] + "}}"
		}
	}
	return map[string]any{name: input}
}

var markerRE = regexp.MustCompile(`^\{\{(Ref|GetAtt|Sub|ImportValue) (.*)\}\}$`)

// ref is a parsed marker.
type ref struct {
	Fn   string // Ref, GetAtt, Sub or ImportValue
	Text string // what follows the function name
}

// parseRef parses a marker; ok is false for any other value.
func parseRef(v any) (ref, bool) {
	s, ok := v.(string)
	if !ok {
		return ref{}, false
	}
	m := markerRE.FindStringSubmatch(s)
	if m == nil {
		return ref{}, false
	}
	return ref{Fn: m[1], Text: m[2]}, true
}

var subVarRE = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// Names returns the logical ids (or parameter and pseudo-parameter names) the ref
// points at, each with its attribute if any ("Table", "Arn").
func (r ref) Names() [][2]string {
	split := func(s string) [2]string {
		id, attr, _ := strings.Cut(s, ".")
		return [2]string{id, attr}
	}
	switch r.Fn {
	case "Ref":
		return [][2]string{{r.Text, ""}}
	case "GetAtt":
		return [][2]string{split(r.Text)}
	case "Sub":
		var out [][2]string
		for _, m := range subVarRE.FindAllStringSubmatch(r.Text, -1) {
			out = append(out, split(m[1]))
		}
		return out
	}
	return nil
}

// target returns the single resource a Ref or GetAtt points at, with the attribute.
func target(v any) (id, attr string, ok bool) {
	r, ok := parseRef(v)
	if !ok || (r.Fn != "Ref" && r.Fn != "GetAtt") {
		return "", "", false
	}
	n := r.Names()[0]
	return n[0], n[1], true
}

// plain converts YAML to maps, slices and scalars, turning short-form (!Ref) and
// long-form ({Ref: …}) intrinsics that name resources into markers.
func plain(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return plain(n.Content[0])
	case yaml.AliasNode:
		return plain(n.Alias)
	case yaml.ScalarNode:
		if isIntrinsicTag(n.Tag) {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, err
		}
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			cv, err := plain(c)
			if err != nil {
				return nil, err
			}
			s = append(s, cv)
		}
		v = s
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			cv, err := plain(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = cv
		}
		if len(m) == 1 {
			for k, kv := range m {
				switch k {
				case "Ref", "Fn::GetAtt", "Fn::Sub", "Fn::ImportValue":
					return marker(k, kv), nil
				}
			}
		}
		v = m
	}
	if isIntrinsicTag(n.Tag) {
		name := strings.TrimPrefix(n.Tag, "!")
		if name != "Ref" {
			name = "Fn::" + name
		}
		return marker(name, v), nil
	}
	return v, nil
}

// isIntrinsicTag reports whether a YAML tag is a CloudFormation short form (!Ref,
// !GetAtt, !Sub, …) rather than a YAML core tag (!!str).
func isIntrinsicTag(tag string) bool {
	return strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!")
}

// strs returns a string or a list of strings (Action, Resource) as a list.
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	case nil:
		return nil
	}
	return []string{fmt.Sprint(v)}
}
