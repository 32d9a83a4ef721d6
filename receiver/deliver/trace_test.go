package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats-server/v2/server"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// The delivery's trace context as the ledger keeps it with the event: its traceparent, then its
// tracestate.
const (
	deliveryTraceID = "0af7651916cd43dd8448eb211c80319c"
	deliverySpanID  = "b7ad6b7169203331"
	deliveryState   = "hw=1"
	deliveryTrace   = "00-" + deliveryTraceID + "-" + deliverySpanID + "-01\n" + deliveryState
)

// testTracing is an enabled Tracing exporting to an OTLP endpoint inside the test, which takes
// every export and keeps nothing.
func testTracing(t *testing.T) *telemetry.Tracing {
	t.Helper()
	col := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(col.Close)
	tr := telemetry.Setup(context.Background(), telemetry.Options{Service: "deliver-test", Log: logr.Discard(),
		Getenv: func(k string) string {
			if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
				return col.URL
			}
			return ""
		}})
	if !tr.Enabled() {
		t.Fatal("tracing is off")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr
}

// tracedEvent is an event whose delivery was traced (the ledger holds its trace context).
func tracedEvent(id string) store.Event {
	return store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: id, EventType: "invoice.paid",
		ReceivedAt: time.Now(), Payload: []byte("{}"), Trace: deliveryTrace}
}

// attemptAt is the context the pool hands a sink for an attempt at ev (startAttempt): with
// tracing on, the attempt span's, a child of the delivery's span; with tracing off, one
// without a span, though the ledger holds the delivery's trace context.
func attemptAt(t *testing.T, tracing bool, ev store.Event) context.Context {
	t.Helper()
	p := &Pool{}
	if tracing {
		p.opts.Tracing = testTracing(t)
	}
	ctx, span := p.startAttempt(context.Background(), store.Job{ID: 1, Event: ev, Sink: "bus", Attempt: 1})
	t.Cleanup(func() { span.End() })
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() != tracing {
		t.Fatalf("tracing %v: the attempt's span context %v", tracing, sc)
	}
	return ctx
}

// checkTraced checks that a message carries the trace context of the attempt made in ctx: the
// delivery's trace id, the attempt span as the parent, the delivery's tracestate.
func checkTraced(t *testing.T, what string, ctx context.Context, traceparent, tracestate string) {
	t.Helper()
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != deliveryTraceID || sc.SpanID().String() == deliverySpanID {
		t.Fatalf("the attempt span %s/%s is not a child in the delivery's trace %s", sc.TraceID(), sc.SpanID(), deliveryTraceID)
	}
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; traceparent != want {
		t.Errorf("%s: traceparent %q, want the attempt span's %q", what, traceparent, want)
	}
	if tracestate != deliveryState {
		t.Errorf("%s: tracestate %q, want the delivery's %q", what, tracestate, deliveryState)
	}
}

// checkMessaging checks that the attempt's span in ctx describes the send to a broker:
// hookwarden.sink.type and messaging.system are system, messaging.destination.name is
// destination, messaging.message.id is the event's Idempotency-Key.
func checkMessaging(t *testing.T, ctx context.Context, system, destination string, ev store.Event) {
	t.Helper()
	ro, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
	if !ok {
		t.Fatalf("the attempt's span is not the SDK's")
	}
	got := map[string]string{}
	for _, kv := range ro.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	want := map[string]string{"hookwarden.sink.type": system, "messaging.system": system, "messaging.destination.name": destination,
		"messaging.operation.type": "send", "messaging.message.id": IdempotencyKey(ev)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s attempt span: %s = %q, want %q (attributes %v)", system, k, got[k], v, got)
		}
	}
}

// Issue 31: with tracing on, a Kafka record carries the attempt's trace context in the
// CloudEvents Kafka binding's spelling of the Distributed Tracing extension (ce_traceparent,
// ce_tracestate); with tracing off, neither header.
func TestKafkaSinkTraceContext(t *testing.T) {
	addrs := startKafka(t, kfake.SeedTopics(1, "traced")).ListenAddrs()
	k := newKafka(t, addrs, "traced", KafkaKey{}, KafkaConfig{})
	on, off := tracedEvent("evt_on"), tracedEvent("evt_off")
	onCtx := attemptAt(t, true, on)
	for ctx, ev := range map[context.Context]store.Event{onCtx: on, attemptAt(t, false, off): off} {
		if _, err := k.Publish(ctx, ev); err != nil {
			t.Fatalf("producing %s: %v", ev.EventID, err)
		}
	}
	recs := records(t, addrs, "traced", 2)
	if len(recs) != 2 {
		t.Fatalf("the topic holds %d records, want 2", len(recs))
	}
	times := func(rec *kgo.Record, key string) (n int) {
		for _, h := range rec.Headers {
			if h.Key == key {
				n++
			}
		}
		return n
	}
	for _, rec := range recs {
		switch id := header(rec, "ce_id"); id {
		case "evt_on":
			checkTraced(t, "record "+id, onCtx, header(rec, "ce_traceparent"), header(rec, "ce_tracestate"))
			checkMessaging(t, onCtx, "kafka", "traced", on)
			if times(rec, "ce_traceparent") != 1 || times(rec, "ce_tracestate") != 1 {
				t.Errorf("record %s: headers %v, want one ce_traceparent and one ce_tracestate", id, rec.Headers)
			}
		case "evt_off":
			if n := times(rec, "ce_traceparent") + times(rec, "ce_tracestate") + times(rec, "traceparent"); n != 0 {
				t.Errorf("record %s produced with tracing off: headers %v, want no trace context", id, rec.Headers)
			}
		default:
			t.Errorf("unexpected record %q", id)
		}
	}
}

// Issue 31: with tracing on, a RabbitMQ message carries the attempt's trace context as
// cloudEvents_traceparent and cloudEvents_tracestate headers, the prefix of its other
// CloudEvent attributes; with tracing off, neither header.
func TestAMQPSinkTraceContext(t *testing.T) {
	rb := newRabbit(t)
	ex := rb.exchange(t, "traced", "orders")
	bus := newAMQP(t, rb.url, ex, "orders")
	on, off := tracedEvent("evt_on"), tracedEvent("evt_off")
	onCtx := attemptAt(t, true, on)
	for ctx, ev := range map[context.Context]store.Event{onCtx: on, attemptAt(t, false, off): off} {
		if _, err := bus.Publish(ctx, ev); err != nil {
			t.Fatalf("publishing %s: %v", ev.EventID, err)
		}
	}
	msgs := rb.drain(t, "orders")
	if len(msgs) != 2 {
		t.Fatalf("the queue held %d messages, want 2", len(msgs))
	}
	str := func(h amqp.Table, key string) string {
		s, _ := h[key].(string)
		return s
	}
	for _, m := range msgs {
		switch id := str(m.Headers, "cloudEvents_id"); id {
		case "evt_on":
			checkTraced(t, "message "+id, onCtx, str(m.Headers, "cloudEvents_traceparent"), str(m.Headers, "cloudEvents_tracestate"))
			checkMessaging(t, onCtx, "rabbitmq", ex, on)
		case "evt_off":
			_, parent := m.Headers["cloudEvents_traceparent"]
			_, state := m.Headers["cloudEvents_tracestate"]
			_, plain := m.Headers["traceparent"]
			if parent || state || plain {
				t.Errorf("message %s published with tracing off: headers %v, want no trace context", id, m.Headers)
			}
		default:
			t.Errorf("unexpected message %q", id)
		}
	}
}

// With tracing on, a NATS JetStream message carries the attempt's trace context as lower-case
// traceparent and tracestate headers; with tracing off, neither header (the same check as the
// Kafka and RabbitMQ sinks', for the sink that already carried it).
func TestJetStreamSinkTraceContext(t *testing.T) {
	ns := startNATS(t, t.TempDir(), server.RANDOM_PORT)
	st := streamOf(t, ns, "TRACED", "traced.>")
	bus := newJetStream(t, ns.ClientURL(), "traced.orders", JetStreamAuth{})
	on, off := tracedEvent("evt_on"), tracedEvent("evt_off")
	onCtx := attemptAt(t, true, on)
	for ctx, ev := range map[context.Context]store.Event{onCtx: on, attemptAt(t, false, off): off} {
		if _, err := bus.Publish(ctx, ev); err != nil {
			t.Fatalf("publishing %s: %v", ev.EventID, err)
		}
	}
	msgs := messages(t, st)
	if len(msgs) != 2 {
		t.Fatalf("the stream holds %d messages, want 2", len(msgs))
	}
	for _, m := range msgs {
		switch id := m.Header.Get("ce-id"); id {
		case "evt_on":
			checkTraced(t, "message "+id, onCtx, m.Header.Get("traceparent"), m.Header.Get("tracestate"))
			checkMessaging(t, onCtx, "nats", "traced.orders", on)
		case "evt_off":
			if len(m.Header.Values("traceparent"))+len(m.Header.Values("tracestate")) != 0 {
				t.Errorf("message %s published with tracing off: headers %v, want no trace context", id, m.Header)
			}
		default:
			t.Errorf("unexpected message %q", id)
		}
	}
}

// Issue 31: the attempt of a replay by hand (events replay, deadletters replay: the job's
// Replays) starts a trace of its own, linked to the delivery's span the ledger keeps.
func TestReplayAttemptLinksTheDelivery(t *testing.T) {
	p := &Pool{}
	p.opts.Tracing = testTracing(t)
	ev := tracedEvent("evt_replayed")
	ev.Replays = 2
	ctx, span := p.startAttempt(context.Background(), store.Job{ID: 1, Event: ev, Sink: "bus", Attempt: 1})
	defer span.End()
	ro, ok := span.(sdktrace.ReadOnlySpan)
	if !ok {
		t.Fatal("the attempt's span is not the SDK's")
	}
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID().String() == deliveryTraceID || ro.Parent().IsValid() {
		t.Errorf("the replay's attempt is in trace %s under %v: want a root of its own", sc.TraceID(), ro.Parent())
	}
	links := ro.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID().String() != deliveryTraceID || links[0].SpanContext.SpanID().String() != deliverySpanID {
		t.Errorf("links %v, want one to the delivery span %s/%s", links, deliveryTraceID, deliverySpanID)
	}
}
