package receiver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
)

// requestSeries returns "namespace/name result" of every hookwarden_receiver_requests_total
// series in reg, with its value.
func requestSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return seriesOf(t, reg, "hookwarden_receiver_requests_total", "result")
}

// seriesOf returns "namespace/name <label>" of every series of the counter or gauge named name
// in reg, with its value.
func seriesOf(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["namespace"]+"/"+l["name"]+" "+l[label]] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// Alerts on a result (absent(), rate() over a series that appears mid-window) break when the
// series only exists after the first such request, so every result of every route is exported
// at 0 from the moment the route is known; requests for unknown routes are counted without the
// stranger's path, so the series are bounded by the subscriptions.
func TestRequestSeriesPerRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := receiver.NewMetrics(reg)
	if diff := cmp.Diff(map[string]float64{"/ unknown_route": 0}, requestSeries(t, reg)); diff != "" {
		t.Errorf("series at start (-want +got)\n%s", diff)
	}

	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-1"},
		Spec: hookv1.WebhookSubscriptionSpec{Provider: hookv1.ProviderSpec{Type: hookv1.ProviderStripe}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(sub).Build()
	routes := receiver.NewRoutes()
	rr := &receiver.RouteReconciler{Reader: c, Routes: routes, Namespace: "hookwarden-system", Metrics: m}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}
	if _, err := rr.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"/ unknown_route": 0}
	label := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for _, r := range receiver.Results() {
		if !label.MatchString(r) {
			t.Errorf("result %q is not snake_case like the other label values", r)
		}
		want["shop/orders "+r] = 0
	}
	if diff := cmp.Diff(want, requestSeries(t, reg)); diff != "" {
		t.Errorf("series once shop/orders is routed (-want +got)\n%s", diff)
	}

	h := &receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()},
		MaxBody: 1 << 10, ClaimTimeout: time.Second, Metrics: m, Log: logr.Discard(), Now: time.Now}
	srv := httptest.NewServer(h.Mux())
	defer srv.Close()
	for _, path := range []string{"/hooks/shop/orders", "/hooks/shop/nope", "/hooks/random-" + strings.Repeat("x", 40) + "/y"} {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want["shop/orders bad_signature"] = 1
	want["/ unknown_route"] = 2
	if diff := cmp.Diff(want, requestSeries(t, reg)); diff != "" {
		t.Errorf("series after a refused delivery and two unknown routes (-want +got)\n%s", diff)
	}

	// The subscription goes: so do its series.
	if err := c.Delete(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	if _, err := rr.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := requestSeries(t, reg)
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if diff := cmp.Diff([]string{"/ unknown_route"}, keys); diff != "" {
		t.Errorf("series once shop/orders is deleted (-want +got)\n%s", diff)
	}
}
