package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// TestStatus: the tree of a subscription the manager made Ready, with the figures of a real
// receiver (its handler, a SQLite ledger, its metrics) that accepted one delivery, saw it again
// as a duplicate and refused a forged one.
func TestStatus(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "status")
	orders := tn.stripeSub("orders", "https://hooks.example.com/orders", "invoice.paid")
	g.Expect(env.Client.Create(ctx, orders.DeepCopy())).To(Succeed())
	stop := startManager(t)
	live := expectReady(g, orders)
	// What the tree prints has settled: the Ready message names the registration, and the
	// recovery pass of the same reconcile has said what the provider reports on deliveries.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(orders), live)).To(Succeed())
		g.Expect(messageOf(live)).To(Equal("registration " + live.Status.EndpointID + " matches the spec and its signing secret is stored"))
		g.Expect(meta.FindStatusCondition(live.Status.Conditions, hookv1.ConditionDelivering)).NotTo(BeNil())
	}).Should(Succeed())
	stop()

	st, err := store.OpenSQLite(storetest.SQLitePath(t))
	g.Expect(err).NotTo(HaveOccurred())
	batcher := store.NewBatcher(st, store.BatcherOptions{})
	t.Cleanup(func() { batcher.Close(); st.Close() })
	reg := prometheus.NewRegistry()
	_, err = deliver.NewMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred())
	routes := receiver.NewRoutes()
	const secret = "whsec_status"
	routes.Set(receiver.Route{Namespace: tn.ns, Name: "orders", UID: string(live.UID), Provider: "stripe", Secrets: [][]byte{[]byte(secret)}})
	h := &receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: batcher,
		MaxBody: 1 << 16, ClaimTimeout: 5 * time.Second, Metrics: receiver.NewMetrics(reg), Log: logr.Discard(), Now: time.Now}
	hooks := httptest.NewServer(h.Mux())
	t.Cleanup(hooks.Close)
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metrics.Close)

	body := []byte(`{"id":"evt_status_1","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{}}}`)
	post := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, hooks.URL+"/hooks/"+tn.ns+"/orders", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(stripe.SignatureHeader, sig)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}
	g.Expect(post(stripe.SignHeader(secret, time.Now(), body))).To(BeNumerically("<", 300))
	g.Expect(post(stripe.SignHeader(secret, time.Now(), body))).To(BeNumerically("<", 300))
	g.Expect(post(stripe.SignHeader("whsec_forged", time.Now(), body))).NotTo(BeNumerically("<", 300))

	code, stdout, stderr := run(t, nil, "status", "-n", tn.ns, "--receiver-metrics", metrics.URL)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	golden(t, "status.txt", stdout, map[string]string{live.Status.EndpointID: "<orders-id>"})
	g.Expect(stdout).To(ContainSubstring("accepted 1  duplicates 1  rejected 1"))

	// Without the receiver: the tree alone; a name that does not exist is bad input.
	code, stdout, _ = run(t, nil, "status", "orders", "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(stdout).NotTo(ContainSubstring("receiver"))
	code, _, stderr = run(t, nil, "status", "absent", "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	// An unreachable receiver is an error, one line.
	metrics.Close()
	code, _, stderr = run(t, nil, "status", "-n", tn.ns, "--receiver-metrics", metrics.URL)
	g.Expect(code).To(Equal(cli.ExitError), stderr)
}

func messageOf(s *hookv1.WebhookSubscription) string {
	for _, c := range s.Status.Conditions {
		if c.Type == hookv1.ConditionReady {
			return c.Message
		}
	}
	return ""
}
