package main_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/otlptest"
)

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
	col := otlptest.NewCollector(t)
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
		Env:   []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL, "OTEL_SERVICE_NAME=receiver-under-test", "OTEL_BSP_SCHEDULE_DELAY=100"}})
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
		spans = col.All()
		server, dupServer = nil, nil
		attempts := 0
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER && otlptest.Attr(s, "cloudevents.event_id") == eventID {
				switch otlptest.Attr(s, "hookwarden.result") {
				case "accepted":
					server = s
				case "duplicate":
					dupServer = s
				}
			}
			if strings.HasPrefix(s.Name, "send ") && otlptest.Attr(s, "cloudevents.event_id") == eventID && otlptest.Attr(s, "hookwarden.outcome") != "" {
				attempts++
			}
		}
		return server != nil && dupServer != nil && attempts == 3 && len(flaky.received()) == 2 && len(steady.received()) == 1,
			fmt.Sprintf("%d spans, %d attempts", len(spans), attempts)
	})
	if !col.Services("receiver-under-test") {
		t.Error("no spans from a service named by OTEL_SERVICE_NAME")
	}
	children := func(parent *tracepb.Span) []*tracepb.Span { return otlptest.Children(parent, spans) }
	if got := otlptest.Attr(server, "hookwarden.subscription"); got != ns+"/traced" {
		t.Errorf("server span subscription %q", got)
	}
	if got := otlptest.Attr(server, "http.route"); got != "/hooks/{namespace}/{name}" {
		t.Errorf("server span http.route %q", got)
	}
	if got := otlptest.Attr(server, "http.response.status_code"); got != "202" {
		t.Errorf("server span status %q, want 202", got)
	}
	var names []string
	bySink := map[string][]*tracepb.Span{}
	for _, c := range children(server) {
		names = append(names, c.Name)
		if sink := otlptest.Attr(c, "hookwarden.sink"); sink != "" {
			bySink[sink] = append(bySink[sink], c)
		}
	}
	want := []string{"verify", "ledger commit", "send flaky", "send steady", "send flaky"}
	if len(names) != 5 || names[0] != "verify" || names[1] != "ledger commit" {
		t.Errorf("children of the server span %q, want %q (attempts in any order)", names, want)
	}
	for _, c := range children(server) {
		if c.Name == "ledger commit" && otlptest.Attr(c, "hookwarden.ledger.batch_size") == "" {
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
			if a, o := otlptest.Attr(s, "hookwarden.attempt"), otlptest.Attr(s, "hookwarden.outcome"); a != fmt.Sprint(i+1) || o != outcomes[i] {
				t.Errorf("sink %s attempt span %d: attempt %s outcome %s, want %d %s", sink, i, a, o, i+1, outcomes[i])
			}
			if wantTP := otlptest.Traceparent(s); received[i] != wantTP {
				t.Errorf("sink %s request %d: traceparent %q, want the attempt span's %q", sink, i, received[i], wantTP)
			}
			if otlptest.Attr(s, "hookwarden.replica") == "" || otlptest.Attr(s, "hookwarden.sink.type") != "http" {
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
		if c.Name == "ledger commit" && otlptest.Attr(c, "hookwarden.duplicate") != "true" {
			t.Errorf("the duplicate's commit span says duplicate=%s", otlptest.Attr(c, "hookwarden.duplicate"))
		}
	}
	if strings.Join(dupNames, ",") != "verify,ledger commit" {
		t.Errorf("children of the duplicate's server span %q, want verify and ledger commit only", dupNames)
	}
	t.Logf("the trace of %s:\n%s", eventID, otlptest.Render(server, spans, ""))
	t.Logf("the trace of its duplicate:\n%s", otlptest.Render(dupServer, spans, ""))
	replayLinked(t, col, metricsAddr, eventID, server, steady)
}

// replayLinked replays the event to the steady sink through the admin API (hookwarden events
// replay): the replay's attempt span starts a trace of its own, marked hookwarden.replay=1 and
// linked to the event's delivery span (the trace context the ledger keeps), and the sink gets
// that span's traceparent.
func replayLinked(t *testing.T, col *otlptest.Collector, metricsAddr, eventID string, server *tracepb.Span, steady *traceSink) {
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
		for _, s := range col.All() {
			if s.Name == "send steady" && otlptest.Attr(s, "cloudevents.event_id") == eventID && otlptest.Attr(s, "hookwarden.replay") == "1" && otlptest.Attr(s, "hookwarden.outcome") != "" {
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
	if want := otlptest.Traceparent(replay); steady.received()[1] != want {
		t.Errorf("the replay reached the sink with traceparent %q, want the replay span's %q", steady.received()[1], want)
	}
	t.Logf("the replay's trace:\n%s", otlptest.Render(replay, col.All(), ""))
}
