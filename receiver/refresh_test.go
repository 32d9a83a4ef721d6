package receiver_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/receiver"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

type refreshHarness struct {
	srv   *httptest.Server
	api   *countingReader
	clock *time.Time
	mu    *sync.Mutex
}

// newRefreshHarness routes shop/orders (GitHub) from a cache that holds the route Secret with
// cached, while the API server already holds live: the manager has just written it and the
// watch has not shown it yet.
func newRefreshHarness(t *testing.T, cached, live map[string][]byte, refresher bool) *refreshHarness {
	t.Helper()
	scheme := testScheme(t)
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-1"},
		Spec: hookv1.WebhookSubscriptionSpec{Provider: hookv1.ProviderSpec{Type: hookv1.ProviderGitHub}}}
	src := routesecret.Source{Namespace: "shop", Name: "orders", UID: "uid-1"}
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sub, routesecret.New("hookwarden-system", src, cached)).Build()
	api := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(sub.DeepCopy(), routesecret.New("hookwarden-system", src, live)).Build()}
	routes := receiver.NewRoutes()
	now, mu := time.Unix(1_700_000_000, 0), &sync.Mutex{}
	rr := &receiver.RouteReconciler{Reader: cache, APIReader: api, Namespace: "hookwarden-system", Routes: routes,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	if _, err := rr.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}); err != nil {
		t.Fatal(err)
	}
	h := &receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"github": github.NewVerifier()},
		MaxBody: 1 << 16, ClaimTimeout: time.Second, Metrics: receiver.NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: time.Now}
	if refresher {
		h.Refresher = rr
	}
	srv := httptest.NewServer(h.Mux())
	t.Cleanup(srv.Close)
	return &refreshHarness{srv: srv, api: api, clock: &now, mu: mu}
}

func (h *refreshHarness) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.clock = h.clock.Add(d)
}

// ping sends GitHub's ping signed with secret and returns the status.
func (h *refreshHarness) ping(t *testing.T, secret string) int {
	t.Helper()
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":7}`)
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/hooks/shop/orders", bytes.NewReader(body))
	req.Header.Set(github.SignatureHeader, github.Sign([]byte(secret), body))
	req.Header.Set(github.DeliveryHeader, "guid-ping")
	req.Header.Set(github.EventHeader, "ping")
	req.Header.Set(github.HookIDHeader, "7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// GitHub pings a hook right after its create, signed with the secret the manager chose and
// wrote (as pending) just before: the receiver accepts it although its watch has not shown
// that write yet, by reading the route's Secret once more.
func TestFirstPingAfterAWriteTheWatchHasNotShown(t *testing.T) {
	const old, pending = "old-secret-0123456789abcdef", "pending-secret-fedcba9876543210"
	cached := map[string][]byte{hookv1.SecretKeyCurrent: []byte(old)}
	live := map[string][]byte{hookv1.SecretKeyCurrent: []byte(old), hookv1.SecretKeyPending: []byte(pending)}

	if got := newRefreshHarness(t, cached, live, false).ping(t, pending); got != http.StatusUnauthorized {
		t.Fatalf("without re-reading, the first ping got %d: the harness does not reproduce a lagging watch", got)
	}
	h := newRefreshHarness(t, cached, live, true)
	if got := h.ping(t, pending); got != http.StatusOK {
		t.Errorf("the first ping, signed with the pending secret the manager had written: %d, want 200", got)
	}
	if got := h.api.gets.Load(); got != 1 {
		t.Errorf("%d reads of the route Secret, want 1", got)
	}
	// The route now holds the secret: the next ping needs no read.
	if got := h.ping(t, pending); got != http.StatusOK {
		t.Errorf("the second ping: %d, want 200", got)
	}
	if got := h.api.gets.Load(); got != 1 {
		t.Errorf("%d reads of the route Secret after a verified ping, want still 1", got)
	}
}

// Forged deliveries cost at most one read of the route Secret per interval, however many
// arrive and however concurrently.
func TestForgedDeliveriesDoNotAmplifyReads(t *testing.T) {
	const secret = "secret-0123456789abcdef"
	data := map[string][]byte{hookv1.SecretKeyCurrent: []byte(secret)}
	h := newRefreshHarness(t, data, data, true)
	forge := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if got := h.ping(t, "forged"); got != http.StatusUnauthorized {
					t.Errorf("a forged ping: %d, want 401", got)
				}
			})
		}
		wg.Wait()
	}
	forge(50)
	if got := h.api.gets.Load(); got != 1 {
		t.Errorf("50 concurrent forged deliveries: %d reads, want 1", got)
	}
	h.advance(receiver.DefaultRefreshInterval / 2)
	forge(20)
	if got := h.api.gets.Load(); got != 1 {
		t.Errorf("20 more within the interval: %d reads in all, want 1", got)
	}
	h.advance(receiver.DefaultRefreshInterval)
	forge(20)
	if got := h.api.gets.Load(); got != 2 {
		t.Errorf("20 more after the interval: %d reads in all, want 2", got)
	}
}
