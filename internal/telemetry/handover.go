package telemetry

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A recovery run's hand-over of a fetched event to our own receiver carries the run's page span
// as traceparent/tracestate, and HeaderRecovery, which proves the trace context is the
// manager's: an HMAC-SHA256, under the route's signing secret, of the two W3C fields and the
// body. A provider never sends that header, and nobody without the secret can make one, so
// the receiver links its span to a traceparent only when the header checks out; any other
// traceparent (a provider's, a proxy's) is ignored.
const HeaderRecovery = "Hookwarden-Recovery"

// handoverDomain keeps the MAC apart from any provider's signature under the same secret.
const handoverDomain = "hookwarden-recovery-v1\x00"

// SignHandover writes ctx's span context (traceparent, tracestate) and its HeaderRecovery MAC
// under secret into header, for the hand-over of body. Without a valid span context (tracing
// off) it writes nothing.
func SignHandover(ctx context.Context, header http.Header, secret string, body []byte) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	var c kv
	propagation.TraceContext{}.Inject(ctx, &c)
	header.Set("traceparent", c.parent)
	if c.state != "" {
		header.Set("tracestate", c.state)
	}
	header.Set(HeaderRecovery, hex.EncodeToString(handoverMAC([]byte(secret), c.parent, c.state, body)))
}

// Handover returns the span context a hand-over signed by SignHandover carries, when its
// HeaderRecovery MAC is that of one of secrets over its trace context and body; ok false for
// any other request (no header, a wrong MAC, no valid traceparent).
func Handover(header http.Header, secrets [][]byte, body []byte) (sc trace.SpanContext, ok bool) {
	got := header.Get(HeaderRecovery)
	if got == "" {
		return trace.SpanContext{}, false
	}
	mac, err := hex.DecodeString(got)
	if err != nil {
		return trace.SpanContext{}, false
	}
	c := kv{parent: header.Get("traceparent"), state: header.Get("tracestate")}
	for _, s := range secrets {
		if hmac.Equal(mac, handoverMAC(s, c.parent, c.state, body)) {
			sc = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &c))
			return sc, sc.IsValid()
		}
	}
	return trace.SpanContext{}, false
}

func handoverMAC(secret []byte, parent, state string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(handoverDomain))
	m.Write([]byte(parent))
	m.Write([]byte{0})
	m.Write([]byte(state))
	m.Write([]byte{0})
	m.Write(body)
	return m.Sum(nil)
}
