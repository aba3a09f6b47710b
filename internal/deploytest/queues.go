package deploytest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// checkQueues checks the SQS wiring: every queue is encrypted; every work queue has
// a dead-letter queue after MaxReceiveCount receives, which keeps messages
// DeadLetterRetention seconds and has an alarm on it, and a consumer whose event
// source reports partial batch failures and whose timeout fits VisibilityFactor
// times into the queue's visibility timeout; and each worker (functions/<kind>-worker)
// consumes the queue MOLT_QUEUE_<KIND> names.
func (c *checker) checkQueues() {
	queues := c.tpl.CF.GetAllSQSQueueResources()
	isDLQ := map[string]bool{}
	for _, id := range sortedKeys(queues) {
		q := queues[id]
		if (q.SqsManagedSseEnabled == nil || !*q.SqsManagedSseEnabled) && maybe(q.KmsMasterKeyId) == "" {
			c.addf("template.yaml "+id, "not encrypted at rest: set SqsManagedSseEnabled: true (or KmsMasterKeyId)")
		}
		rp, ok := q.RedrivePolicy.(map[string]any)
		if !ok {
			continue
		}
		where := "template.yaml " + id
		dlq, attr, ok := target(rp["deadLetterTargetArn"])
		if !ok || attr != "Arn" || c.tpl.resourceType(dlq) != "AWS::SQS::Queue" {
			c.addf(where, "RedrivePolicy.deadLetterTargetArn must be !GetAtt <queue>.Arn of a queue in the template")
		} else {
			isDLQ[dlq] = true
		}
		if n, ok := number(rp["maxReceiveCount"]); !ok || n != MaxReceiveCount {
			c.addf(where, "RedrivePolicy.maxReceiveCount must be %d, is %v", MaxReceiveCount, rp["maxReceiveCount"])
		}
	}

	consumers := map[string][]string{}
	ids, fns := c.sortedFunctions()
	for _, id := range ids {
		events, _ := c.tpl.rawProps(id)["Events"].(map[string]any)
		for _, name := range sortedKeys(events) {
			ev, _ := events[name].(map[string]any)
			if ev["Type"] != "SQS" {
				continue
			}
			where := fmt.Sprintf("template.yaml %s Events.%s", id, name)
			props, _ := ev["Properties"].(map[string]any)
			if !slices.Contains(strs(props["FunctionResponseTypes"]), "ReportBatchItemFailures") {
				c.addf(where, "FunctionResponseTypes must include ReportBatchItemFailures (workers return partial batch failures)")
			}
			q, attr, ok := target(props["Queue"])
			if !ok || attr != "Arn" || c.tpl.resourceType(q) != "AWS::SQS::Queue" {
				c.addf(where, "Queue must be !GetAtt <queue>.Arn of a queue in the template, is %v", props["Queue"])
				continue
			}
			consumers[q] = append(consumers[q], id)
			if isDLQ[q] {
				c.addf(where, "consumes %s, a dead-letter queue", q)
			}
			vis := 30 // SQS's default
			if v := queues[q].VisibilityTimeout; v != nil {
				vis = *v
			}
			if t := c.timeout(fns[id]); vis < VisibilityFactor*t {
				c.addf(where, "%s's VisibilityTimeout %ds is under %d × the function's Timeout %ds = %ds",
					q, vis, VisibilityFactor, t, VisibilityFactor*t)
			}
		}
	}

	alarms := c.tpl.CF.GetAllCloudWatchAlarmResources()
	for _, id := range sortedKeys(queues) {
		where := "template.yaml " + id
		if !isDLQ[id] {
			if queues[id].RedrivePolicy == nil {
				c.addf(where, "no dead-letter queue: add RedrivePolicy {deadLetterTargetArn, maxReceiveCount: %d}", MaxReceiveCount)
			}
			if len(consumers[id]) == 0 {
				c.addf(where, "no function consumes it (an SQS event source)")
			}
			continue
		}
		if r := queues[id].MessageRetentionPeriod; r == nil || *r != DeadLetterRetention {
			c.addf(where, "a dead-letter queue keeps messages %d s (14 days, the most SQS allows): MessageRetentionPeriod is %v",
				DeadLetterRetention, show(r))
		}
		alarmed := false
		for _, a := range alarms {
			if maybe(a.Namespace) != "AWS/SQS" {
				continue
			}
			for _, d := range a.Dimensions {
				if q, attr, ok := target(d.Value); ok && d.Name == "QueueName" && q == id && attr == "QueueName" {
					alarmed = true
				}
			}
		}
		if !alarmed {
			c.addf(where, "dead-letter queue without an alarm (AWS::CloudWatch::Alarm on AWS/SQS, QueueName !GetAtt %s.QueueName)", id)
		}
	}
	c.checkWorkers(consumers)
}

// checkWorkers checks that functions/<kind>-worker is woken by the queue that
// MOLT_QUEUE_<KIND> names (what every function sends that kind's wake-ups to), and
// that every MOLT_QUEUE_<KIND> has its worker. consumers maps a queue to the
// functions with an SQS event source on it.
func (c *checker) checkWorkers(consumers map[string][]string) {
	consumed := map[string][]string{} // function → queues
	for q, fns := range consumers {
		for _, fn := range fns {
			consumed[fn] = append(consumed[fn], q)
		}
	}
	ids, fns := c.sortedFunctions()
	workers := map[string]string{} // kind → logical id
	for _, id := range ids {
		dir := c.functions[id]
		kind, ok := strings.CutSuffix(dir, "-worker")
		if !ok || kind == "" {
			continue
		}
		workers[kind] = id
		where := "template.yaml " + id
		env := c.environment(fns[id])
		key := "MOLT_QUEUE_" + strings.ToUpper(strings.ReplaceAll(kind, "-", "_"))
		want, _, isRef := target(env[key])
		switch qs := consumed[id]; {
		case len(qs) == 0:
			c.addf(where, "a worker needs an SQS event source (on the queue %s names)", key)
		case !isRef:
			c.addf(where, "%s is missing, so no function can wake this worker", key)
		case len(qs) != 1 || qs[0] != want:
			c.addf(where, "consumes %v, but %s names %s", qs, key, want)
		}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		for k := range c.environment(fns[id]) {
			kind, ok := strings.CutPrefix(k, "MOLT_QUEUE_")
			if !ok || seen[k] {
				continue
			}
			seen[k] = true
			kind = strings.ReplaceAll(strings.ToLower(kind), "_", "-")
			if _, ok := workers[kind]; !ok {
				c.addf("template.yaml "+id, "%s names a queue, but no %sWorkerFunction consumes it", k, camel(kind))
			}
		}
	}
}

// show prints an optional number.
func show(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

// number reads a YAML or JSON number (or a numeric string).
func number(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		return int(n), float64(int(n)) == n
	case int:
		return n, true
	case string:
		i, err := strconv.Atoi(n)
		return i, err == nil
	}
	return 0, false
}
