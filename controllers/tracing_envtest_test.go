package controllers_test

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
)

// Issue 31: the manager's spans, from a manager whose tracing exports to memory. A first
// reconcile of a Stripe subscription is one span with the decision "created" and its provider
// requests as client children, the list before the create; the provider never receives a
// traceparent. A fetch recovery hands each event to the receiver with its page span as
// traceparent, signed with Hookwarden-Recovery under the subscription's secret.
var _ = Describe("Tracing the manager", Ordered, func() {
	var (
		mgr  *runningManager
		exp  *tracetest.InMemoryExporter
		recs = &sync.Map{}
	)
	BeforeAll(func() {
		exp = tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		DeferCleanup(func() { _ = tp.Shutdown(suiteCtx) })
		mgr = startManager(managerOptions{tracing: telemetry.New(tp), registry: recoveryRegistry(recs)})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	It("writes a reconcile span with the plan's decision and a client span per provider request, and sends the provider no trace context", func() {
		t := newTenant()
		s := t.sub("traced", "https://hooks.example.com/traced")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		got := expectReady(s)

		key := t.ns + "/traced"
		var rec tracetest.SpanStub
		var spans tracetest.SpanStubs
		Eventually(func(g Gomega) {
			spans = exp.GetSpans()
			found := false
			for _, sp := range spans {
				if sp.Name == "reconcile" && spanAttr(sp, "hookwarden.subscription") == key && spanAttr(sp, "hookwarden.decision") == "created" {
					rec, found = sp, true
				}
			}
			g.Expect(found).To(BeTrue(), "a reconcile span of %s with decision created among %d spans", key, len(spans))
		}).Should(Succeed())
		Expect(spanAttr(rec, "hookwarden.result")).To(Equal("ready"))
		Expect(spanAttr(rec, "hookwarden.reason")).To(Equal("Succeeded"))
		Expect(spanAttr(rec, "hookwarden.provider")).To(Equal("stripe"))
		Expect(spanAttr(rec, "hookwarden.endpoint_id")).To(Equal(got.Status.EndpointID))
		Expect(spanAttr(rec, "hookwarden.plan.steps")).To(HavePrefix("create"))

		kids := childrenOf(rec, spans)
		var calls []string
		for _, k := range kids {
			if k.SpanKind == trace.SpanKindClient {
				Expect(spanAttr(k, "http.request.method")).To(Equal(k.Name), "a client span is named by its method")
				Expect(spanAttr(k, "server.address")).To(Equal("127.0.0.1"))
				calls = append(calls, fmt.Sprintf("%s %s %s", spanAttr(k, "http.request.method"), spanAttr(k, "url.path"), spanAttr(k, "http.response.status_code")))
			}
		}
		Expect(len(calls)).To(BeNumerically(">=", 2), "client children of the reconcile: %q", calls)
		Expect(calls[:2]).To(Equal([]string{"GET /v1/webhook_endpoints 200", "POST /v1/webhook_endpoints 200"}),
			"the list, then the create: %q", calls)

		reqs := t.requests("", "/v1/")
		Expect(reqs).NotTo(BeEmpty())
		for _, r := range reqs {
			Expect(r.TraceParent).To(BeEmpty(), "%s %s carried our trace context to the provider", r.Method, r.Path)
		}
		GinkgoWriter.Printf("the trace of the first reconcile of %s:\n%s", key, renderStub(rec, spans, ""))
	})

	It("hands a recovered event to the receiver under its recovery page's trace context, signed as the manager's", func() {
		rec := &envRecovery{caps: providers.RecoveryCapabilities{Mode: providers.RecoveryFetch, Window: 720 * time.Hour}, log: []providers.Missed{
			{ID: "evt_traced", Type: "invoice.paid", At: time.Now().Add(-time.Hour).Truncate(time.Second), Payload: []byte(`{"id":"evt_traced","type":"invoice.paid"}`)},
		}}
		t := newTenant()
		recs.Store(t.apiKey, rec)
		ep, url := newEnvEndpoint()
		s := t.sub("recovered", url+"/hooks/shop/recovered")
		s.Spec.Endpoint.AllowInsecureHTTP = true
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)

		var page tracetest.SpanStub
		Eventually(func(g Gomega) {
			found := false
			for _, sp := range exp.GetSpans() {
				if sp.Name == "recovery page" && slices.Contains(spanAttrs(sp, "hookwarden.recovery.event_ids"), "evt_traced") {
					page, found = sp, true
				}
			}
			g.Expect(found).To(BeTrue(), "a recovery page span naming evt_traced")
		}).Should(Succeed())
		var header http.Header
		var body []byte
		Eventually(func(g Gomega) {
			ep.mu.Lock()
			defer ep.mu.Unlock()
			header, body = ep.headers["evt_traced"], ep.bodies["evt_traced"]
			g.Expect(header).NotTo(BeNil(), "the endpoint received evt_traced")
		}).Should(Succeed())
		want := "00-" + page.SpanContext.TraceID().String() + "-" + page.SpanContext.SpanID().String() + "-01"
		Expect(header.Get("traceparent")).To(Equal(want), "the hand-over carries the page span as its parent")
		secret := signingSecret(Default, s).Data[hookv1.SecretKeyCurrent]
		sc, ok := telemetry.Handover(header, [][]byte{secret}, body)
		Expect(ok).To(BeTrue(), "Hookwarden-Recovery verifies under the subscription's secret: %q", header.Get(telemetry.HeaderRecovery))
		Expect(sc.TraceID()).To(Equal(page.SpanContext.TraceID()))
	})
})

// spanAttrs is the string slice attribute key of s.
func spanAttrs(s tracetest.SpanStub, key string) []string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.AsStringSlice()
		}
	}
	return nil
}

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// childrenOf are the spans whose parent is s, in start order.
func childrenOf(s tracetest.SpanStub, all tracetest.SpanStubs) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, c := range all {
		if c.Parent.SpanID() == s.SpanContext.SpanID() && c.Parent.TraceID() == s.SpanContext.TraceID() {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartTime.Before(out[j].StartTime) })
	return out
}

// renderStub draws s and its descendants with their attributes.
func renderStub(s tracetest.SpanStub, all tracetest.SpanStubs, indent string) string {
	var kv []string
	for _, a := range s.Attributes {
		if a.Key != attribute.Key("server.port") && a.Key != attribute.Key("url.scheme") {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
	}
	out := fmt.Sprintf("%s%s [%s] %s\n", indent, s.Name, strings.ToUpper(s.SpanKind.String()), strings.Join(kv, " "))
	for _, c := range childrenOf(s, all) {
		out += renderStub(c, all, indent+"  ")
	}
	return out
}
