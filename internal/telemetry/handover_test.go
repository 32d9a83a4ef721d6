package telemetry

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// A hand-over signed under a secret yields its span context to a receiver holding that secret
// (among others), and nothing when the secret, the trace context or the body differ, or when
// the header is missing; with no valid span context nothing is written.
func TestHandoverIsTrustedOnlyUnderTheSecret(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("t").Start(context.Background(), "recovery page")
	defer span.End()
	body := []byte(`{"id":"evt_1"}`)
	signed := func() http.Header {
		h := http.Header{}
		SignHandover(ctx, h, "whsec_a", body)
		return h
	}
	sc, ok := Handover(signed(), [][]byte{[]byte("whsec_old"), []byte("whsec_a")}, body)
	if !ok || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("signed hand-over: %v %v, want the page span %v", sc, ok, span.SpanContext())
	}
	other := trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}
	for name, c := range map[string]struct {
		h    http.Header
		body []byte
	}{
		"another secret": {signed(), body},
		"another body":   {signed(), []byte(`{"id":"evt_2"}`)},
		"another parent": {func() http.Header {
			h := signed()
			h.Set("traceparent", "00-"+other.TraceID.String()+"-"+other.SpanID.String()+"-01")
			return h
		}(), body},
		"no header": {func() http.Header { h := signed(); h.Del(HeaderRecovery); return h }(), body},
		"not hex":   {func() http.Header { h := signed(); h.Set(HeaderRecovery, "zz"); return h }(), body},
	} {
		secrets := [][]byte{[]byte("whsec_a")}
		if name == "another secret" {
			secrets = [][]byte{[]byte("whsec_b")}
		}
		if sc, ok := Handover(c.h, secrets, c.body); ok || sc.IsValid() {
			t.Errorf("%s: trusted %v", name, sc)
		}
	}
	h := http.Header{}
	SignHandover(context.Background(), h, "whsec_a", body)
	if len(h) != 0 {
		t.Errorf("without a span: headers %v, want none", h)
	}
}
