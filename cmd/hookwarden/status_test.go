package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
	rm := receiver.NewMetrics(reg)
	h := &receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: batcher,
		MaxBody: 1 << 16, ClaimTimeout: 5 * time.Second, Metrics: rm, Log: logr.Discard(), Now: time.Now}
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

	// The accepted event waits for its sink (no pool delivers here): the store's backlog as
	// the receiver polls it.
	g.Expect(rm.PollStore(ctx, st, time.Now())).To(Succeed())
	age := regexp.MustCompile(`oldest \d+s`)
	code, stdout, stderr := run(t, nil, "status", "-n", tn.ns, "--receiver-metrics", metrics.URL)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	golden(t, "status.txt", age.ReplaceAllString(stdout, "oldest <age>"), map[string]string{live.Status.EndpointID: "<orders-id>"})
	g.Expect(stdout).To(ContainSubstring("accepted 1  duplicates 1  rejected 1  (all routes: pending 1, dead letters 0)"))
	g.Expect(stdout).To(MatchRegexp(`sink default  pending 1  oldest \d+s`))

	// --receiver-figures finds the receiver as deadletters does: its Service, a ready pod
	// behind its metrics port, a port-forward (the test's stands in for the tunnel: envtest has
	// no kubelet) to the same metrics.
	labels := map[string]string{"app.kubernetes.io/name": "hookwarden-receiver"}
	g.Expect(env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "receiver", Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "metrics", Port: 9090}}}})).To(Succeed())
	ready := true
	g.Expect(env.Client.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: tn.ns, Name: "receiver-x1", Labels: map[string]string{discoveryv1.LabelServiceName: "receiver"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: tn.ns, Name: "receiver-0"}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)}},
	})).To(Succeed())
	var forwarded []string
	o := cli.Options{PortForward: func(_ context.Context, _ *rest.Config, namespace, pod string, port int32) (string, func(), error) {
		forwarded = append(forwarded, fmt.Sprintf("%s/%s:%d", namespace, pod, port))
		return strings.TrimPrefix(metrics.URL, "http://"), func() {}, nil
	}}
	code, found, stderr := runFirst(t, o, "status", "-n", tn.ns, "--receiver-figures", "--receiver-service", tn.ns+"/receiver")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(forwarded).To(Equal([]string{tn.ns + "/receiver-0:9090"}))
	g.Expect(age.ReplaceAllString(found, "")).To(Equal(age.ReplaceAllString(stdout, "")))
	code, _, stderr = runFirst(t, o, "status", "-n", tn.ns, "--receiver-metrics", metrics.URL, "--receiver-service", tn.ns+"/receiver")
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	g.Expect(stderr).To(ContainSubstring("--receiver-metrics names the receiver's /metrics itself"))

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
