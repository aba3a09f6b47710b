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
			c.addf(where, "not a known event (%s, %s or %s, strictly decoded)", ShapeHTTP, ShapeSchedule, ShapeSQS)
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
		if !slices.Contains(takes, shape) {
			c.addf(where, "is an %s, but %s receives %v", shape, id, takes)
		}
	}
	return nil
}
