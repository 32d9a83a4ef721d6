package telemetry

import (
	"context"
	"strings"

	"github.com/go-logr/logr"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Inject writes ctx's span context to carrier in W3C form (traceparent, and tracestate when
// set), under the keys a protocol's CloudEvents binding gives them. Sinks call it with their
// message's headers: propagation.HeaderCarrier for HTTP, MapCarrier for NATS, and for Kafka and
// AMQP the sinks' own adapters of the record's or message's headers (ce_traceparent,
// cloudEvents_traceparent: this package imports no broker client). Without a valid span context
// (tracing off) it writes nothing.
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, carrier)
}

// Encode is the span context of ctx as the ledger keeps it with an event: the traceparent,
// then a newline and the tracestate when there is one; "" without a valid span context. The
// event's delivery attempts, later and on any replica, start their spans from it (Decode).
func Encode(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	var c kv
	propagation.TraceContext{}.Inject(ctx, &c)
	if c.state == "" {
		return c.parent
	}
	return c.parent + "\n" + c.state
}

// Decode puts the span context Encode kept into ctx, as a remote parent. A value that does not
// parse leaves ctx as it is (the attempt then starts a trace of its own).
func Decode(ctx context.Context, stored string) context.Context {
	if stored == "" {
		return ctx
	}
	parent, state, _ := strings.Cut(stored, "\n")
	return propagation.TraceContext{}.Extract(ctx, &kv{parent: parent, state: state})
}

// kv is a carrier of the two W3C fields, without a map.
type kv struct{ parent, state string }

func (c *kv) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *kv) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *kv) Keys() []string { return []string{"traceparent", "tracestate"} }

// Log adds trace_id and span_id to log when ctx carries a valid span, so a log line and its
// span can be found from each other.
func Log(ctx context.Context, log logr.Logger) logr.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return log
	}
	return log.WithValues("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
}

// MapCarrier is a header map whose keys are written as given, lower case for W3C
// (traceparent, tracestate): NATS headers are case-sensitive, unlike HTTP's, and the NATS
// binding spells them in lower case. Use propagation.HeaderCarrier for HTTP.
type MapCarrier map[string][]string

// Get implements propagation.TextMapCarrier.
func (c MapCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c MapCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys implements propagation.TextMapCarrier.
func (c MapCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
