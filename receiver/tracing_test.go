package receiver_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Issue 31: a recovery run's hand-over (the manager's page span as traceparent, signed with
// Hookwarden-Recovery under the route's secret) gives a server span that is the root of its
// own trace with a link to the page span and hookwarden.delivery.via=recovery. A provider's
// delivery carrying a traceparent, or one with a Hookwarden-Recovery made under another secret,
// is neither linked nor parented.
func TestServerSpanLinksOnlyTheManagersHandover(t *testing.T) {
	const secret = "whsec_link"
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	batcher := store.NewBatcher(st, store.BatcherOptions{})
	t.Cleanup(batcher.Close)
	routes := receiver.NewRoutes()
	routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe", Secrets: [][]byte{[]byte(secret)},
		Sinks: receiver.OneHTTPSink("http://127.0.0.1:9/unused"), MaxAttempts: 5, DedupeWindow: time.Hour})
	h := (&receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()},
		Claims: batcher, MaxBody: 1 << 20, ClaimTimeout: 30 * time.Second, Metrics: receiver.NewMetrics(prometheus.NewRegistry()),
		Log: logr.Discard(), Now: time.Now, Tracing: telemetry.New(tp)}).Mux()

	// The manager's page span, from a provider of its own (another process).
	mgr := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = mgr.Shutdown(context.Background()) })
	pctx, page := mgr.Tracer("manager").Start(context.Background(), "recovery page")
	defer page.End()

	post := func(id string, extra func(http.Header, []byte)) tracetest.SpanStub {
		t.Helper()
		body := []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid"}`)
		r := httptest.NewRequest(http.MethodPost, "/hooks/shop/orders", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(stripe.SignatureHeader, stripe.SignHeader(secret, time.Now(), body))
		extra(r.Header, body)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusAccepted {
			t.Fatalf("%s: status %d %s", id, w.Code, w.Body)
		}
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindServer && attrOf(s, "cloudevents.event_id") == id {
				return s
			}
		}
		t.Fatalf("%s: no server span among %d", id, len(exp.GetSpans()))
		return tracetest.SpanStub{}
	}

	handed := post("evt_handed", func(hd http.Header, body []byte) { telemetry.SignHandover(pctx, hd, secret, body) })
	want := page.SpanContext()
	if handed.Parent.IsValid() || handed.SpanContext.TraceID() == want.TraceID() {
		t.Errorf("hand-over: parent %v, trace %s: want the root of a trace of its own", handed.Parent, handed.SpanContext.TraceID())
	}
	if len(handed.Links) != 1 || handed.Links[0].SpanContext.TraceID() != want.TraceID() || handed.Links[0].SpanContext.SpanID() != want.SpanID() {
		t.Errorf("hand-over: links %v, want one to the page span %s/%s", handed.Links, want.TraceID(), want.SpanID())
	}
	if via := attrOf(handed, "hookwarden.delivery.via"); via != "recovery" {
		t.Errorf("hand-over: hookwarden.delivery.via %q, want recovery", via)
	}

	for _, c := range []struct {
		id    string
		extra func(http.Header, []byte)
	}{
		{"evt_provider", func(hd http.Header, _ []byte) {
			hd.Set("traceparent", "00-"+want.TraceID().String()+"-"+want.SpanID().String()+"-01")
			hd.Set("tracestate", "vendor=1")
		}},
		{"evt_forged", func(hd http.Header, body []byte) { telemetry.SignHandover(pctx, hd, "whsec_other", body) }},
	} {
		s := post(c.id, c.extra)
		if s.Parent.IsValid() || len(s.Links) != 0 || attrOf(s, "hookwarden.delivery.via") != "" {
			t.Errorf("%s: parent %v, links %v, via %q: want a root, no link, no via", c.id, s.Parent, s.Links, attrOf(s, "hookwarden.delivery.via"))
		}
	}
}

func attrOf(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}
