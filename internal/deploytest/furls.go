package deploytest

import (
	"os"
	"path/filepath"
	"strings"
)

// LambdaURLImport is the package a function serving a streaming function URL
// starts with (lambdaurl.Start).
const LambdaURLImport = `"github.com/aws/aws-lambda-go/lambdaurl"`

// checkFunctionURLs: a function whose main starts lambdaurl is declared with a
// FunctionUrlConfig in RESPONSE_STREAM mode (lambdaurl answers nothing else),
// AuthType NONE or AWS_IAM, and its URL in an output; a FunctionUrlConfig on a
// function that does not start lambdaurl is refused (its handler does not
// read function URL events).
func (c *checker) checkFunctionURLs() {
	ids, _ := c.sortedFunctions()
	outputs, _ := c.tpl.Raw["Outputs"].(map[string]any)
	for _, id := range ids {
		where := "template.yaml " + id
		dir, ok := c.functions[id]
		if !ok {
			continue // reported by checkFunctions
		}
		src, err := os.ReadFile(filepath.Join(c.opts.Root, "functions", dir, "main.go"))
		streams := err == nil && strings.Contains(string(src), LambdaURLImport)
		cfg, hasURL := c.tpl.rawProps(id)["FunctionUrlConfig"].(map[string]any)
		switch {
		case streams && !hasURL:
			c.addf(where, "functions/%s starts lambdaurl: declare FunctionUrlConfig with InvokeMode RESPONSE_STREAM", dir)
			continue
		case !streams && hasURL:
			c.addf(where, "FunctionUrlConfig on a function whose main does not start lambdaurl (it would not read the function URL's events)")
			continue
		case !hasURL:
			continue
		}
		if m := cfg["InvokeMode"]; m != "RESPONSE_STREAM" {
			c.addf(where, "FunctionUrlConfig.InvokeMode must be RESPONSE_STREAM (lambdaurl streams its response), not %v", m)
		}
		if a := cfg["AuthType"]; a != "NONE" && a != "AWS_IAM" {
			c.addf(where, "FunctionUrlConfig.AuthType must be NONE or AWS_IAM, not %v", a)
		}
		found := false
		for _, o := range outputs {
			om, _ := o.(map[string]any)
			if tid, attr, ok := target(om["Value"]); ok && tid == id+"Url" && attr == "FunctionUrl" {
				found = true
			}
		}
		if !found {
			c.addf(where, "no output gives its URL (!GetAtt %sUrl.FunctionUrl)", id)
		}
	}
}
