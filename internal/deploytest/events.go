package deploytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Event shapes: what a sample in events/ is, and what a function receives.
const (
	ShapeHTTP     = "API Gateway HTTP API (payload 2.0) request"
	ShapeSchedule = "EventBridge event"
	ShapeSQS      = "SQS event"
	ShapeURL      = "Lambda function URL request"
)

// eventSourceShapes maps SAM event source types to the shape they deliver.
var eventSourceShapes = map[string]string{
	"HttpApi":         ShapeHTTP,
	"Schedule":        ShapeSchedule,
	"ScheduleV2":      ShapeSchedule,
	"EventBridgeRule": ShapeSchedule,
	"CloudWatchEvent": ShapeSchedule,
	"SQS":             ShapeSQS,
}

// ShapeOf returns the shape of an event, decoded strictly (no unknown fields) into
// aws-lambda-go's types, or "" when it is none of them.
func ShapeOf(data []byte) string {
	strict := func(v any) bool {
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		return d.Decode(v) == nil
	}
	var furl events.LambdaFunctionURLRequest
	if strict(&furl) && furl.Version == "2.0" && furl.RequestContext.HTTP.Method != "" &&
		strings.HasPrefix(furl.RawPath, "/") && strings.Contains(furl.RequestContext.DomainName, ".lambda-url.") {
		return ShapeURL
	}
	var http events.APIGatewayV2HTTPRequest
	if strict(&http) && http.Version == "2.0" && http.RouteKey != "" &&
		http.RequestContext.HTTP.Method != "" && strings.HasPrefix(http.RawPath, "/") {
		return ShapeHTTP
	}
	var eb events.EventBridgeEvent
	if strict(&eb) && eb.DetailType != "" && eb.Source != "" && eb.ID != "" {
		return ShapeSchedule
	}
	var sqs events.SQSEvent
	if strict(&sqs) && len(sqs.Records) > 0 {
		ok := true
		for _, r := range sqs.Records {
			ok = ok && r.EventSource == "aws:sqs" && r.MessageId != ""
		}
		if ok {
			return ShapeSQS
		}
	}
	return ""
}

// checkEvents checks events/<folder>-<case>.json: valid JSON, a known shape, for a
// function of functions/<folder> that has an event source of that shape.
func (c *checker) checkEvents() error {
	files, err := filepath.Glob(filepath.Join(c.opts.Root, "events", "*.json"))
	if err != nil {
		return err
	}
	byDir := map[string]string{}
	for id, dir := range c.functions {
		byDir[dir] = id
	}
	for _, f := range files {
		where := "events/" + filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", where, err)
		}
		if !json.Valid(data) {
			c.addf(where, "not valid JSON")
			continue
		}
		shape := ShapeOf(data)
		if shape == "" {
			c.addf(where, "not a known event (%s, %s, %s or %s, strictly decoded)", ShapeHTTP, ShapeSchedule, ShapeSQS, ShapeURL)
			continue
		}
		dir := ""
		for _, d := range c.dirs {
			if strings.HasPrefix(filepath.Base(f), d+"-") && len(d) > len(dir) {
				dir = d
			}
		}
		if dir == "" {
			c.addf(where, "name it <folder>-<case>.json after the function (functions/<folder>) it is for")
			continue
		}
		id, ok := byDir[dir]
		if !ok {
			continue // reported by checkFunctions
		}
		evs, _ := c.tpl.rawProps(id)["Events"].(map[string]any)
		var takes []string
		for _, name := range sortedKeys(evs) {
			ev, _ := evs[name].(map[string]any)
			if s, ok := eventSourceShapes[fmt.Sprint(ev["Type"])]; ok && !slices.Contains(takes, s) {
				takes = append(takes, s)
			}
		}
		if _, ok := c.tpl.rawProps(id)["FunctionUrlConfig"].(map[string]any); ok {
			takes = append(takes, ShapeURL)
		}
		if !slices.Contains(takes, shape) {
			c.addf(where, "is an %s, but %s receives %v", shape, id, takes)
			continue
		}
		if kind, ok := strings.CutSuffix(dir, "-worker"); ok && shape == ShapeSQS {
			c.checkWakeUps(where, data, kind)
		}
	}
	return nil
}

// checkWakeUps: a worker's SQS sample carries at least one wake-up
// ({"kind","id"}, the body internal/queue parses) of the worker's kind and none of
// another kind. Other bodies are allowed: a malformed record shows a partial
// batch failure.
func (c *checker) checkWakeUps(where string, data []byte, kind string) {
	var ev events.SQSEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return // not an SQS event: reported by the shape check
	}
	mine := 0
	for _, r := range ev.Records {
		var m struct {
			Kind string `json:"kind"`
			ID   string `json:"id"`
		}
		d := json.NewDecoder(strings.NewReader(r.Body))
		d.DisallowUnknownFields()
		if d.Decode(&m) != nil || m.Kind == "" || m.ID == "" {
			continue
		}
		if m.Kind != kind {
			c.addf(where, "record %s wakes a %s, but this is the %s worker's sample", r.MessageId, m.Kind, kind)
			continue
		}
		mine++
	}
	if mine == 0 {
		c.addf(where, "no record is a %s wake-up ({\"kind\":%q,\"id\":…})", kind, kind)
	}
}
