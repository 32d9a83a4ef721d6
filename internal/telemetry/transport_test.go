package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A provider request is a client span, a child of the caller's, with the HTTP client
// attributes and the provider's Retry-After; the provider gets no traceparent or tracestate.
// Disabled, Transport is next itself.
func TestTransport(t *testing.T) {
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers = append(headers, r.Header.Clone())
		if r.URL.Path == "/limited" {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	if got := (*Tracing)(nil).Transport(http.DefaultTransport); got != http.DefaultTransport {
		t.Errorf("disabled: Transport wraps next (%T)", got)
	}

	exp := tracetest.NewInMemoryExporter()
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	hc := &http.Client{Transport: tr.Transport(nil)}
	ctx, parent := tr.Start(context.Background(), "reconcile", trace.SpanKindInternal)
	for _, path := range []string{"/v1/webhook_endpoints?limit=100", "/limited"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	parent.End()

	for _, h := range headers {
		if h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
			t.Errorf("the provider got our trace context: %v", h)
		}
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want the parent and two requests", len(spans))
	}
	u, _ := url.Parse(srv.URL)
	for i, want := range []struct{ path, status, retryAfter string }{{"/v1/webhook_endpoints", "200", ""}, {"/limited", "429", `["7"]`}} {
		s := spans[i]
		a := map[string]string{}
		for _, kv := range s.Attributes {
			a[string(kv.Key)] = kv.Value.String()
		}
		if s.Name != "GET" || s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %d: %s %v, parent %v; want a GET client span under the caller's", i, s.Name, s.SpanKind, s.Parent.SpanID())
		}
		if a["http.request.method"] != "GET" || a["url.path"] != want.path || a["http.response.status_code"] != want.status ||
			a["server.address"] != u.Hostname() || a["server.port"] != u.Port() || a["http.response.header.retry-after"] != want.retryAfter {
			t.Errorf("span %d attributes %v, want path %s status %s retry-after %q", i, a, want.path, want.status, want.retryAfter)
		}
		if failed := s.Status.Code == codes.Error; failed != (want.status != "200") || (failed && a["error.type"] != strconv.Itoa(429)) {
			t.Errorf("span %d status %v error.type %q", i, s.Status, a["error.type"])
		}
	}
}
