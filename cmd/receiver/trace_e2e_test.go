package main_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// collector is an OTLP/HTTP endpoint inside the test: it decodes the export requests and keeps
// their spans.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	names map[string]bool // service.name of the resources seen
}

func newCollector(t *testing.T) *collector {
	c := &collector{names: map[string]bool{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) all() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return anyValue(a.Value)
		}
	}
	return ""
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return v.String()
}

func id(b []byte) string { return hex.EncodeToString(b) }

// traceSink is an HTTP sink that answers from a script and keeps each request's traceparent.
type traceSink struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []int    // next answers; then 200
	parents []string // traceparent of each request, in order
	probes  int      // WaitRoute's probe events received
}

func newTraceSink(t *testing.T, answers ...int) *traceSink {
	s := &traceSink{answers: answers}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if strings.HasPrefix(r.Header.Get("ce-id"), probePrefix) {
			s.probes++ // WaitRoute's
			return
		}
		s.parents = append(s.parents, r.Header.Get("traceparent"))
		status := http.StatusOK
		if len(s.answers) > 0 {
			status, s.answers = s.answers[0], s.answers[1:]
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *traceSink) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.parents...)
}

// Issue 31: the spans of a real receiver, exported over OTLP/HTTP: a live delivery to two HTTP
// sinks, one of which fails once, is one trace (server span → verify, ledger commit; one
// attempt span per sink and attempt, children of the server span), each sink receives a
// traceparent naming its attempt's span, and a duplicate delivery is a trace of its own with
// no attempts.
func TestTracesOfOneDelivery(t *testing.T) {
	ns := newNamespace(t)
	col := newCollector(t)
	flaky, steady := newTraceSink(t, http.StatusServiceUnavailable), newTraceSink(t)
	sub := createSubscription(t, ns, "traced", flaky.srv.URL+"/events", 5)
	var obj hookv1.WebhookSubscription
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "traced"}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Spec.Delivery = &hookv1.DeliverySpec{MaxAttempts: 5, Sinks: []hookv1.Sink{
		{Name: "flaky", HTTP: &hookv1.HTTPSink{URL: flaky.srv.URL + "/events"}},
		{Name: "steady", HTTP: &hookv1.HTTPSink{URL: steady.srv.URL + "/events"}},
	}}
	if err := k8s.Update(context.Background(), &obj); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeAddr(t)
	rcv := newReceiver(t, "traced", receiverConfig{Namespace: ns, Store: "sqlite://" + filepath.Join(t.TempDir(), "ledger.db"),
		Extra: []string{"--metrics-bind-address", metricsAddr},
		Env:   []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL, "OTEL_SERVICE_NAME=receiver-under-test", "OTEL_BSP_SCHEDULE_DELAY=100"}})
	rcv.Start()
	rcv.WaitRoute(sub, sub.Secret)
	cl := newClient(rcv.URL())
	eventually(t, 30*time.Second, "the route with both sinks (a probe reaches the steady one)", func() (bool, string) {
		steady.mu.Lock()
		n := steady.probes
		steady.mu.Unlock()
		if n == 0 {
			_, _ = cl.Post(sub, stripeEvent(probePrefix+randHex(6)), sub.Secret)
		}
		return n > 0, fmt.Sprint(n, " probes")
	})
	const eventID = "evt_traced"
	if status, err := cl.Post(sub, stripeEvent(eventID), sub.Secret); err != nil || status != http.StatusAccepted {
		t.Fatalf("delivery: %d %v, want 202", status, err)
	}
	if status, err := cl.Post(sub, stripeEvent(eventID), sub.Secret); err != nil || status != http.StatusOK {
		t.Fatalf("redelivery: %d %v, want 200 (duplicate)", status, err)
	}

	var server, dupServer *tracepb.Span
	var spans []*tracepb.Span
	eventually(t, 30*time.Second, "the spans of both deliveries and three attempts", func() (bool, string) {
		spans = col.all()
		server, dupServer = nil, nil
		attempts := 0
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER && attr(s, "cloudevents.event_id") == eventID {
				switch attr(s, "hookwarden.result") {
				case "accepted":
					server = s
				case "duplicate":
					dupServer = s
				}
			}
			if strings.HasPrefix(s.Name, "send ") && attr(s, "cloudevents.event_id") == eventID && attr(s, "hookwarden.outcome") != "" {
				attempts++
			}
		}
		return server != nil && dupServer != nil && attempts == 3 && len(flaky.received()) == 2 && len(steady.received()) == 1,
			fmt.Sprintf("%d spans, %d attempts", len(spans), attempts)
	})
	if !col.names["receiver-under-test"] {
		t.Errorf("service names %v, want OTEL_SERVICE_NAME's", col.names)
	}
	children := func(parent *tracepb.Span) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if bytes.Equal(s.ParentSpanId, parent.SpanId) && bytes.Equal(s.TraceId, parent.TraceId) {
				out = append(out, s)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].StartTimeUnixNano < out[j].StartTimeUnixNano })
		return out
	}
	if got := attr(server, "hookwarden.subscription"); got != ns+"/traced" {
		t.Errorf("server span subscription %q", got)
	}
	if got := attr(server, "http.route"); got != "/hooks/{namespace}/{name}" {
		t.Errorf("server span http.route %q", got)
	}
	if got := attr(server, "http.response.status_code"); got != "202" {
		t.Errorf("server span status %q, want 202", got)
	}
	var names []string
	bySink := map[string][]*tracepb.Span{}
	for _, c := range children(server) {
		names = append(names, c.Name)
		if sink := attr(c, "hookwarden.sink"); sink != "" {
			bySink[sink] = append(bySink[sink], c)
		}
	}
	want := []string{"verify", "ledger commit", "send flaky", "send steady", "send flaky"}
	if len(names) != 5 || names[0] != "verify" || names[1] != "ledger commit" {
		t.Errorf("children of the server span %q, want %q (attempts in any order)", names, want)
	}
	for _, c := range children(server) {
		if c.Name == "ledger commit" && attr(c, "hookwarden.ledger.batch_size") == "" {
			t.Errorf("the ledger commit span has no batch size: %v", c.Attributes)
		}
	}
	check := func(sink string, got []*tracepb.Span, received []string, outcomes ...string) {
		t.Helper()
		if len(got) != len(outcomes) || len(received) != len(outcomes) {
			t.Errorf("sink %s: %d attempt spans, %d requests, want %d", sink, len(got), len(received), len(outcomes))
			return
		}
		for i, s := range got {
			if a, o := attr(s, "hookwarden.attempt"), attr(s, "hookwarden.outcome"); a != fmt.Sprint(i+1) || o != outcomes[i] {
				t.Errorf("sink %s attempt span %d: attempt %s outcome %s, want %d %s", sink, i, a, o, i+1, outcomes[i])
			}
			if wantTP := "00-" + id(s.TraceId) + "-" + id(s.SpanId) + "-01"; received[i] != wantTP {
				t.Errorf("sink %s request %d: traceparent %q, want the attempt span's %q", sink, i, received[i], wantTP)
			}
			if attr(s, "hookwarden.replica") == "" || attr(s, "hookwarden.sink.type") != "http" {
				t.Errorf("sink %s attempt span %d attributes %v", sink, i, s.Attributes)
			}
		}
	}
	check("flaky", bySink["flaky"], flaky.received(), "retry", "delivered")
	check("steady", bySink["steady"], steady.received(), "delivered")

	if bytes.Equal(dupServer.TraceId, server.TraceId) {
		t.Error("the duplicate delivery shares the first one's trace")
	}
	var dupNames []string
	for _, c := range children(dupServer) {
		dupNames = append(dupNames, c.Name)
		if c.Name == "ledger commit" && attr(c, "hookwarden.duplicate") != "true" {
			t.Errorf("the duplicate's commit span says duplicate=%s", attr(c, "hookwarden.duplicate"))
		}
	}
	if strings.Join(dupNames, ",") != "verify,ledger commit" {
		t.Errorf("children of the duplicate's server span %q, want verify and ledger commit only", dupNames)
	}
	t.Logf("the trace of %s:\n%s", eventID, render(server, spans, ""))
	t.Logf("the trace of its duplicate:\n%s", render(dupServer, spans, ""))
	replayLinked(t, col, metricsAddr, eventID, server, steady)
}

// replayLinked replays the event to the steady sink through the admin API (hookwarden events
// replay): the replay's attempt span starts a trace of its own, marked hookwarden.replay=1 and
// linked to the event's delivery span (the trace context the ledger keeps), and the sink gets
// that span's traceparent.
func replayLinked(t *testing.T, col *collector, metricsAddr, eventID string, server *tracepb.Span, steady *traceSink) {
	t.Helper()
	q := url.Values{"since": {time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, "sink": {"steady"}}
	resp, err := http.Post("http://"+metricsAddr+"/events/replay?"+q.Encode(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replay: %s %s", resp.Status, body)
	}
	var replay *tracepb.Span
	eventually(t, 30*time.Second, "the replay's attempt span", func() (bool, string) {
		for _, s := range col.all() {
			if s.Name == "send steady" && attr(s, "cloudevents.event_id") == eventID && attr(s, "hookwarden.replay") == "1" && attr(s, "hookwarden.outcome") != "" {
				replay = s
			}
		}
		return replay != nil && len(steady.received()) == 2, string(body)
	})
	if len(replay.ParentSpanId) != 0 || bytes.Equal(replay.TraceId, server.TraceId) {
		t.Errorf("the replay's attempt span has parent %x in trace %x: want a root of a trace of its own", replay.ParentSpanId, replay.TraceId)
	}
	if len(replay.Links) != 1 || !bytes.Equal(replay.Links[0].TraceId, server.TraceId) || !bytes.Equal(replay.Links[0].SpanId, server.SpanId) {
		t.Errorf("the replay's attempt span links %v, want one to the delivery span %x/%x", replay.Links, server.TraceId, server.SpanId)
	}
	if want := "00-" + id(replay.TraceId) + "-" + id(replay.SpanId) + "-01"; steady.received()[1] != want {
		t.Errorf("the replay reached the sink with traceparent %q, want the replay span's %q", steady.received()[1], want)
	}
	t.Logf("the replay's trace:\n%s", render(replay, col.all(), ""))
}

// render draws s and its descendants as a tree with their main attributes.
func render(s *tracepb.Span, all []*tracepb.Span, indent string) string {
	var keys []string
	for _, a := range s.Attributes {
		switch a.Key {
		case "hookwarden.result", "hookwarden.subscription", "hookwarden.provider", "cloudevents.event_id",
			"http.response.status_code", "hookwarden.ledger.batch_size", "hookwarden.duplicate", "hookwarden.sink",
			"hookwarden.attempt", "hookwarden.outcome", "hookwarden.sink.type":
			keys = append(keys, a.Key+"="+anyValue(a.Value))
		}
	}
	out := fmt.Sprintf("%s%s [%s] %s\n", indent, s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), strings.Join(keys, " "))
	var kids []*tracepb.Span
	for _, c := range all {
		if bytes.Equal(c.ParentSpanId, s.SpanId) && bytes.Equal(c.TraceId, s.TraceId) {
			kids = append(kids, c)
		}
	}
	sort.Slice(kids, func(i, j int) bool { return kids[i].StartTimeUnixNano < kids[j].StartTimeUnixNano })
	for _, c := range kids {
		out += render(c, all, indent+"  ")
	}
	return out
}
