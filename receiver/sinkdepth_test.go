package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// gaugeSeries returns "namespace/name sink" of every series of the gauge named name in reg,
// with its value.
func gaugeSeries(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	return seriesOf(t, reg, name, "sink")
}

// Issue 30: the backlog gauges follow each sink of a subscription: a sink that is down keeps
// its events and its oldest one's age grows, while its neighbour drains to 0; once it is back
// it drains too. The route's sinks have their series at 0 from the start, so an alert sees a
// sink before it ever falls behind.
func TestSinkBacklogGauges(t *testing.T) {
	var downOK atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !downOK.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer down.Close()

	reg := prometheus.NewRegistry()
	m := receiver.NewMetrics(reg)
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-1"},
		Spec: hookv1.WebhookSubscriptionSpec{Provider: hookv1.ProviderSpec{Type: hookv1.ProviderStripe},
			Delivery: &hookv1.DeliverySpec{Sinks: []hookv1.Sink{
				{Name: "up", HTTP: &hookv1.HTTPSink{URL: up.URL}},
				{Name: "down", HTTP: &hookv1.HTTPSink{URL: down.URL}},
			}}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(sub).Build()
	routes := receiver.NewRoutes()
	rr := &receiver.RouteReconciler{Reader: c, Routes: routes, Namespace: "hookwarden-system", Metrics: m}
	if _, err := rr.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}); err != nil {
		t.Fatal(err)
	}
	const depthName, oldestName = "hookwarden_receiver_sink_queue_depth", "hookwarden_receiver_sink_oldest_pending_seconds"
	zero := map[string]float64{"shop/orders up": 0, "shop/orders down": 0}
	if diff := cmp.Diff(zero, gaugeSeries(t, reg, depthName)); diff != "" {
		t.Errorf("depth series once shop/orders is routed (-want +got)\n%s", diff)
	}

	st, err := store.OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	received := time.Now().Add(-time.Minute)
	var events []store.Event
	for i := range 20 {
		events = append(events, store.Event{Subscription: "shop/orders", SubscriptionUID: "uid-1", EventID: fmt.Sprintf("evt_%d", i),
			EventType: "charge.succeeded", ContentType: "application/json", Payload: []byte(`{}`), ReceivedAt: received,
			MaxAttempts: 100000, Sinks: []string{"up", "down"}})
	}
	if _, err := st.ClaimBatch(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	pool := deliver.New(st, deliver.NewSender(deliver.SenderOptions{Timeout: 5 * time.Second}), routes.Resolve,
		deliver.Options{PollInterval: 5 * time.Millisecond, Backoff: deliver.Backoff{Base: time.Millisecond, Max: 20 * time.Millisecond}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	defer stop()

	// poll polls the store into the gauges until cond holds for them.
	poll := func(what string, cond func(depth, oldest map[string]float64) bool) {
		t.Helper()
		var depth, oldest map[string]float64
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if err := m.PollStore(t.Context(), st, time.Now()); err != nil {
				t.Fatalf("PollStore: %v", err)
			}
			depth, oldest = gaugeSeries(t, reg, depthName), gaugeSeries(t, reg, oldestName)
			if cond(depth, oldest) {
				return
			}
		}
		t.Fatalf("%s: never; depth %v, oldest %v", what, depth, oldest)
	}
	poll("up drains while down keeps all 20, a minute behind", func(depth, oldest map[string]float64) bool {
		return cmp.Equal(map[string]float64{"shop/orders up": 0, "shop/orders down": 20}, depth) &&
			oldest["shop/orders up"] == 0 && oldest["shop/orders down"] >= 60
	})
	downOK.Store(true)
	poll("down drains once it is back", func(depth, oldest map[string]float64) bool {
		return cmp.Equal(zero, depth) && cmp.Equal(zero, oldest)
	})

	// A sink the route does not have (removed from the spec while events waited for it) has a
	// series while the store holds its backlog, and none once that is dead-lettered.
	stop()
	gone := events[0]
	gone.EventID, gone.Sinks = "evt_gone", []string{"removed"}
	if _, err := st.ClaimBatch(t.Context(), []store.Event{gone}); err != nil {
		t.Fatal(err)
	}
	poll("the removed sink's backlog is seen", func(depth, _ map[string]float64) bool {
		return cmp.Equal(map[string]float64{"shop/orders up": 0, "shop/orders down": 0, "shop/orders removed": 1}, depth)
	})
	jobs, err := st.Lease(t.Context(), 10, time.Now(), time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Lease = %d jobs, %v; want the removed sink's", len(jobs), err)
	}
	if err := st.Dead(t.Context(), jobs[0], "sink removed"); err != nil {
		t.Fatal(err)
	}
	poll("the removed sink's series goes with its backlog", func(depth, oldest map[string]float64) bool {
		return cmp.Equal(zero, depth) && cmp.Equal(zero, oldest)
	})

	// The subscription goes: so do its sinks' series.
	if err := c.Delete(t.Context(), sub); err != nil {
		t.Fatal(err)
	}
	if _, err := rr.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}); err != nil {
		t.Fatal(err)
	}
	if got := gaugeSeries(t, reg, depthName); len(got) != 0 {
		t.Errorf("depth series once shop/orders is deleted: %v, want none", got)
	}
}
