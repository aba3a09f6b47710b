package deploytest

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
)

// SearchFolders are the functions/ folders whose code searches the web and so
// reaches the SearXNG function: the api (GET /api/search) and the turn worker
// (the web_search agent tool). Only they may invoke it.
var SearchFolders = []string{"api", "turn-worker"}

// EnvSearXNGFunction names the SearXNG function for the functions that search
// (internal/awsbackend.EnvSearXNGFunction).
const EnvSearXNGFunction = "MOLT_SEARXNG_FUNCTION"

// InvokeAction is the one Lambda action a function may be granted, on exactly
// one image function of the template.
const InvokeAction = "lambda:InvokeFunction"

// isImage reports whether fn is an image function (PackageType Image).
func isImage(fn *serverless.Function) bool {
	return fn.PackageType != nil && *fn.PackageType == "Image"
}

// imageFunctions returns the logical ids of the template's image functions.
func (c *checker) imageFunctions() []string {
	ids, fns := c.sortedFunctions()
	var out []string
	for _, id := range ids {
		if isImage(fns[id]) {
			out = append(out, id)
		}
	}
	return out
}

// checkImageFunction: an image function is built by `sam build` from its
// Metadata (DockerContext holding the Dockerfile, DockerTag), has no Runtime,
// Handler or Layers (SAM refuses them, Globals' included), and no public
// endpoint: no event source, no function URL. The SearXNG image needs
// SEARXNG_SECRET.
func (c *checker) checkImageFunction(id string, fn *serverless.Function, g *global.Function) {
	where := "template.yaml " + id
	arch := fn.Architectures
	if arch == nil && g.Architectures != nil {
		arch = *g.Architectures
	}
	if !slices.Equal(arch, []string{Arch}) {
		c.addf(where, "Architectures must be [%s], is %v", Arch, arch)
	}
	if fn.Runtime != nil || g.Runtime != nil || fn.Handler != nil || g.Handler != nil || fn.Layers != nil || g.Layers != nil {
		c.addf(where, "an image function has no Runtime, Handler or Layers (in the function or Globals: SAM refuses them)")
	}
	if fn.CodeUri != nil {
		c.addf(where, "an image function has no CodeUri (sam build builds it from Metadata.DockerContext)")
	}
	ctx, _ := fn.AWSCloudFormationMetadata["DockerContext"].(string)
	dockerfile, _ := fn.AWSCloudFormationMetadata["Dockerfile"].(string)
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	switch {
	case ctx == "":
		c.addf(where, "Metadata.DockerContext is missing (sam build builds the image from it)")
	case !fileExists(filepath.Join(c.opts.Root, filepath.FromSlash(ctx), dockerfile)):
		c.addf(where, "Metadata.DockerContext %s holds no %s", ctx, dockerfile)
	}
	if tag, _ := fn.AWSCloudFormationMetadata["DockerTag"].(string); tag == "" {
		c.addf(where, "Metadata.DockerTag is missing")
	}
	props := c.tpl.rawProps(id)
	if evs, _ := props["Events"].(map[string]any); len(evs) > 0 {
		c.addf(where, "an image function has no event source (%v): molt's functions invoke it", sortedKeys(evs))
	}
	if _, ok := props["FunctionUrlConfig"]; ok {
		c.addf(where, "an image function has no function URL: molt's functions invoke it")
	}
	if filepath.Base(filepath.Clean(filepath.FromSlash(ctx))) == "searxng" {
		if _, ok := c.environment(fn)["SEARXNG_SECRET"]; !ok {
			c.addf(where, "SEARXNG_SECRET is missing (SearXNG refuses to start with its default key)")
		}
	}
}

// checkSecrets: a variable named *_SECRET is a Secrets Manager dynamic
// reference ({{resolve:secretsmanager:…}}), never a literal.
func (c *checker) checkSecrets() {
	ids, fns := c.sortedFunctions()
	for _, id := range ids {
		env := c.environment(fns[id])
		for _, k := range sortedKeys(env) {
			if !strings.HasSuffix(k, "_SECRET") {
				continue
			}
			v := env[k]
			if r, ok := parseRef(v); ok && r.Fn == "Sub" {
				v = r.Text
			}
			if !strings.HasPrefix(v, "{{resolve:secretsmanager:") {
				c.addf("template.yaml "+id, "%s must be a Secrets Manager reference ({{resolve:secretsmanager:…}}), not a value", k)
			}
		}
	}
}

// checkInvokes: lambda:InvokeFunction is the only Lambda action granted, always
// on exactly one image function (!GetAtt <Fn>.Arn: no qualifier wildcard, no
// other function), to exactly the functions that search (SearchFolders), each
// of which names that function in MOLT_SEARXNG_FUNCTION (!Ref).
func (c *checker) checkInvokes() {
	images := c.imageFunctions()
	ids, fns := c.sortedFunctions()
	for _, id := range ids {
		where := "template.yaml " + id
		// Every Lambda grant, in every branch.
		invokes := false
		for _, d := range c.policyDocs(id) {
			for _, st := range c.statements(d.doc) {
				var lambdaActions []string
				for _, a := range strs(st["Action"]) {
					if strings.HasPrefix(strings.ToLower(a), "lambda:") {
						lambdaActions = append(lambdaActions, a)
					}
				}
				if len(lambdaActions) == 0 || st["Effect"] != "Allow" {
					continue
				}
				w := d.where
				if sid, ok := st["Sid"].(string); ok {
					w += " Statement " + sid
				}
				for _, a := range lambdaActions {
					if a != InvokeAction {
						c.addf(w, "%s granted: %s is the only Lambda action molt's code calls", a, InvokeAction)
					}
				}
				invokes = true
				resources, ok := st["Resource"].([]any)
				if !ok {
					resources = []any{st["Resource"]}
				}
				for _, r := range resources {
					gr := grantResource(r)
					if !slices.Contains(images, gr.ID) || gr.Pattern != "" {
						c.addf(w, "%s on %v: grant it on !GetAtt <image function>.Arn exactly (one of %v)", InvokeAction, r, images)
					}
				}
			}
		}
		if isImage(fns[id]) {
			if invokes {
				c.addf(where, "an image function is granted %s: it invokes nothing", InvokeAction)
			}
			continue
		}
		dir := c.functions[id]
		searches := slices.Contains(SearchFolders, dir)
		env := c.environment(fns[id])
		v, set := env[EnvSearXNGFunction]
		switch {
		case !searches && set:
			c.addf(where, "%s is set, but functions/%s does not search (only %v do)", EnvSearXNGFunction, dir, SearchFolders)
		case !searches && invokes:
			c.addf(where, "%s granted to a function that does not search (only %v do)", InvokeAction, SearchFolders)
		case searches && !set:
			c.addf(where, "%s is missing: functions/%s searches, through the SearXNG function", EnvSearXNGFunction, dir)
		case searches:
			r, isRef := parseRef(v)
			if !isRef || r.Fn != "Ref" || !slices.Contains(images, r.Text) {
				c.addf(where, "%s must be !Ref of an image function of the template (%v), is %q", EnvSearXNGFunction, images, v)
				continue
			}
			if !Allows(c.grants(id), InvokeAction, r.Text, "") {
				c.addf(where, "%s names %s, but no statement always grants %s on !GetAtt %s.Arn", EnvSearXNGFunction, r.Text, InvokeAction, r.Text)
			}
		}
	}
}
