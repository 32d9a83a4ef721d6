// Package otlptest is an OTLP/HTTP trace endpoint for tests: it decodes the export requests the
// binaries under test send (protobuf, gzip or not) and keeps their spans, and it renders a span
// and its descendants as a tree. No collector binary is needed.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is an OTLP/HTTP endpoint inside the test (OTEL_EXPORTER_OTLP_ENDPOINT=URL).
type Collector struct {
	URL   string
	mu    sync.Mutex
	spans []*tracepb.Span
	names map[string]bool // service.name of the resources seen
}

// NewCollector starts one, closed when t ends.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{names: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(c.export))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *Collector) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				c.names[a.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// All is every span received so far.
func (c *Collector) All() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// Services reports whether a resource named service.name sent spans.
func (c *Collector) Services(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[name]
}

// Attr is the span's attribute key as a string ("" when it has none).
func Attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return Value(a.Value)
		}
	}
	return ""
}

// Value renders an attribute value.
func Value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var vs []string
		for _, e := range x.ArrayValue.GetValues() {
			vs = append(vs, Value(e))
		}
		return "[" + strings.Join(vs, ",") + "]"
	}
	return v.String()
}

// ID is a trace or span id in hex, as traceparent writes it.
func ID(b []byte) string { return hex.EncodeToString(b) }

// Traceparent is the W3C traceparent naming s (sampled).
func Traceparent(s *tracepb.Span) string { return "00-" + ID(s.TraceId) + "-" + ID(s.SpanId) + "-01" }

// Children are the spans of all whose parent is s, in start order.
func Children(s *tracepb.Span, all []*tracepb.Span) []*tracepb.Span {
	var kids []*tracepb.Span
	for _, c := range all {
		if bytes.Equal(c.ParentSpanId, s.SpanId) && bytes.Equal(c.TraceId, s.TraceId) {
			kids = append(kids, c)
		}
	}
	sort.Slice(kids, func(i, j int) bool { return kids[i].StartTimeUnixNano < kids[j].StartTimeUnixNano })
	return kids
}

// LinksTo reports whether s links to the span to.
func LinksTo(s, to *tracepb.Span) bool {
	for _, l := range s.Links {
		if bytes.Equal(l.TraceId, to.TraceId) && bytes.Equal(l.SpanId, to.SpanId) {
			return true
		}
	}
	return false
}

// shown are the attributes Render prints.
var shown = map[string]bool{
	"hookwarden.result": true, "hookwarden.subscription": true, "hookwarden.provider": true, "cloudevents.event_id": true,
	"http.response.status_code": true, "hookwarden.ledger.batch_size": true, "hookwarden.duplicate": true, "hookwarden.sink": true,
	"hookwarden.attempt": true, "hookwarden.outcome": true, "hookwarden.sink.type": true, "hookwarden.delivery.via": true,
	"hookwarden.replay": true, "hookwarden.recovery.trigger": true, "hookwarden.recovery.mode": true,
	"hookwarden.recovery.recovered": true, "hookwarden.recovery.page": true, "hookwarden.recovery.event_ids": true,
	"http.request.method": true, "url.path": true,
}

// Render draws s and its descendants among all as a tree with their main attributes and
// their links.
func Render(s *tracepb.Span, all []*tracepb.Span, indent string) string {
	var keys []string
	for _, a := range s.Attributes {
		if shown[a.Key] {
			keys = append(keys, a.Key+"="+Value(a.Value))
		}
	}
	for _, l := range s.Links {
		keys = append(keys, "link="+ID(l.TraceId)[:8]+"…/"+ID(l.SpanId))
	}
	out := fmt.Sprintf("%s%s [%s] %s\n", indent, s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), strings.Join(keys, " "))
	for _, c := range Children(s, all) {
		out += Render(c, all, indent+"  ")
	}
	return out
}
