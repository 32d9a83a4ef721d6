package receiver_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// routeFrom builds a route the way the receiver does: from a subscription and its route
// Secret (the manager's copy of the signing Secret's data in the receiver's namespace), through
// the RouteReconciler.
func routeFrom(t *testing.T, provider hookv1.ProviderType, data map[string][]byte) receiver.Route {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-1"},
		Spec: hookv1.WebhookSubscriptionSpec{Provider: hookv1.ProviderSpec{Type: provider}, SigningSecret: hookv1.SigningSecretSpec{Name: "orders-signing"},
			Delivery: &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: "http://sink.invalid/"}}}}
	sec := routesecret.New("hookwarden-system", routesecret.Source{Namespace: "shop", Name: "orders", UID: "uid-1"}, data)
	routes := receiver.NewRoutes()
	r := &receiver.RouteReconciler{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(sub, sec).Build(), Routes: routes, Namespace: "hookwarden-system",
		Schemes: map[string]func([]byte) (providers.Verifier, error){"rest": rest.NewVerifierFromSpec}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}); err != nil {
		t.Fatal(err)
	}
	route, ok := routes.Lookup("shop", "orders")
	if !ok {
		t.Fatal("no route")
	}
	return route
}

type providerHarness struct {
	srv     *httptest.Server
	st      *store.SQL
	metrics *prometheus.Registry
}

func newProviderHarness(t *testing.T, route receiver.Route) *providerHarness {
	t.Helper()
	st, err := store.OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	batcher := store.NewBatcher(st, store.BatcherOptions{})
	routes := receiver.NewRoutes()
	routes.Set(route)
	reg := prometheus.NewRegistry()
	h := &receiver.Handler{
		Routes: routes, Verifiers: map[string]providers.Verifier{"github": github.NewVerifier()}, Claims: batcher,
		MaxBody: 1 << 16, ClaimTimeout: 5 * time.Second, Metrics: receiver.NewMetrics(reg), Log: logr.Discard(), Now: time.Now,
	}
	srv := httptest.NewServer(h.Mux())
	t.Cleanup(func() { srv.Close(); batcher.Close(); st.Close() })
	return &providerHarness{srv: srv, st: st, metrics: reg}
}

func (h *providerHarness) post(t *testing.T, body []byte, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/hooks/shop/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (h *providerHarness) depth(t *testing.T) int {
	n, err := h.st.Depth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGitHubRoutes: deliveries verify against every secret in the signing Secret (the pending
// one too: GitHub signs its first ping with it), dedupe on X-GitHub-Delivery, and a ping is
// answered and counted but never recorded for the sink.
func TestGitHubRoutes(t *testing.T) {
	const current, pending = "current-secret-0123456789abcdef", "pending-secret-fedcba9876543210"
	route := routeFrom(t, hookv1.ProviderGitHub, map[string][]byte{
		hookv1.SecretKeyCurrent: []byte(current), hookv1.SecretKeyPrefix + "101": []byte(current), hookv1.SecretKeyPending: []byte(pending),
	})
	h := newProviderHarness(t, route)
	deliver := func(secret, guid, event string) int {
		body := []byte(`{"zen":"Design for failure.","hook_id":101}`)
		return h.post(t, body, map[string]string{
			github.SignatureHeader: github.Sign([]byte(secret), body), github.DeliveryHeader: guid, github.EventHeader: event, github.HookIDHeader: "101",
		})
	}
	if got := deliver(pending, "guid-ping", "ping"); got != http.StatusOK {
		t.Errorf("ping signed with the pending secret: %d; want 200", got)
	}
	if d := h.depth(t); d != 0 {
		t.Errorf("a ping was recorded for the sink (depth %d)", d)
	}
	if got := requests(t, h.metrics, "ping"); got != 1 {
		t.Errorf("ping counted %v times; want 1", got)
	}
	if got := deliver(current, "guid-1", "push"); got != http.StatusAccepted {
		t.Errorf("push: %d; want 202", got)
	}
	if got := deliver(pending, "guid-1", "push"); got != http.StatusOK {
		t.Errorf("the same delivery GUID again (redelivery): %d; want 200 duplicate", got)
	}
	if got := deliver("not-ours", "guid-2", "push"); got != http.StatusUnauthorized {
		t.Errorf("a wrong secret: %d; want 401", got)
	}
	if d := h.depth(t); d != 1 {
		t.Errorf("depth %d; want the one push", d)
	}
	jobs, err := h.st.Lease(context.Background(), 10, time.Now(), time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Lease = %v, %v; want the push", jobs, err)
	}
	if jobs[0].Event.EventID != "guid-1" || jobs[0].Event.EventType != "push" {
		t.Errorf("recorded %q of type %q; want guid-1 of type push (ce-type comes from X-GitHub-Event)", jobs[0].Event.EventID, jobs[0].Event.EventType)
	}
}

// TestRESTRoutes: a REST route verifies with the scheme its signing Secret describes, and
// refuses everything until there is a usable one.
func TestRESTRoutes(t *testing.T) {
	const token = "gitlab-token-0123456789abcdef"
	spec := []byte(`{"scheme":"token","token":{"header":"X-Gitlab-Token","eventIDHeader":"Idempotency-Key"}}`)
	body := []byte(`{"object_kind":"push"}`)
	headers := map[string]string{"X-Gitlab-Token": token, "Idempotency-Key": "b4d8e2a0-1"}
	cases := []struct {
		reason string
		data   map[string][]byte
		want   int
	}{
		{"described scheme, right token", map[string][]byte{hookv1.SecretKeyCurrent: []byte(token), hookv1.SecretKeyVerifier: spec}, http.StatusAccepted},
		{"described scheme, another token", map[string][]byte{hookv1.SecretKeyCurrent: []byte("another"), hookv1.SecretKeyVerifier: spec}, http.StatusUnauthorized},
		{"no description yet", map[string][]byte{hookv1.SecretKeyCurrent: []byte(token)}, http.StatusUnauthorized},
		{"an unusable description", map[string][]byte{hookv1.SecretKeyCurrent: []byte(token), hookv1.SecretKeyVerifier: []byte(`{"scheme":"rot13"}`)}, http.StatusUnauthorized},
		{"unsigned by the profile", map[string][]byte{hookv1.SecretKeyVerifier: []byte(`{"scheme":"none"}`)}, http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			h := newProviderHarness(t, routeFrom(t, hookv1.ProviderREST, c.data))
			if got := h.post(t, body, headers); got != c.want {
				t.Errorf("delivery: %d; want %d (%s)", got, c.want, c.reason)
			}
		})
	}
}

// requests reads sum by (result) (hookwarden_receiver_requests_total) from reg.
func requests(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	return requestsByResult(t, reg)[result]
}

// Issue 4, for REST profiles: an event id header outside the signature (PagerDuty's
// X-Webhook-Id beside an HMAC of the body, GitLab's Idempotency-Key beside a bare token) could
// be swapped for a fresh one; the signed bytes are deduped on too. With a signed timestamp a
// retry's bytes differ, and are recorded as well, though the retry is a duplicate by its id.
func TestRESTRoutesRefuseReplaysUnderAFreshID(t *testing.T) {
	const secret = "rest-secret-0123456789abcdef"
	pagerduty, err := rest.NewVerifier(rest.Config{Header: "X-PagerDuty-Signature", Separator: ",", ElementPrefix: "v1="})
	if err != nil {
		t.Fatal(err)
	}
	stamped, err := rest.NewVerifier(rest.Config{Header: "X-Signature", Content: "{timestamp}.{body}", TimestampHeader: "X-Timestamp"})
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	retryTS := strconv.FormatInt(time.Now().Unix()+1, 10)
	cases := []struct {
		name    string
		spec    string
		idHdr   string
		sign    func(body []byte, ts string) map[string]string // the signature headers of body, signed at ts
		resigns bool                                           // a retry is signed anew (a signed timestamp)
	}{
		{"PagerDuty: HMAC of the body, X-Webhook-Id", `{"scheme":"hmac","hmac":{"header":"X-PagerDuty-Signature","separator":",","elementPrefix":"v1=","eventIDHeader":"X-Webhook-Id"}}`,
			"X-Webhook-Id", func(body []byte, _ string) map[string]string {
				return map[string]string{"X-PagerDuty-Signature": pagerduty.Sign([]byte(secret), body)}
			}, false},
		{"GitLab: a token, Idempotency-Key", `{"scheme":"token","token":{"header":"X-Gitlab-Token","eventIDHeader":"Idempotency-Key"}}`,
			"Idempotency-Key", func([]byte, string) map[string]string { return map[string]string{"X-Gitlab-Token": secret} }, false},
		{"HMAC of timestamp and body, id header", `{"scheme":"hmac","hmac":{"header":"X-Signature","content":"{timestamp}.{body}","timestampHeader":"X-Timestamp","tolerance":"5m","eventIDHeader":"X-Id"}}`,
			"X-Id", func(body []byte, ts string) map[string]string {
				return map[string]string{"X-Signature": stamped.SignAt([]byte(secret), "", ts, body), "X-Timestamp": ts}
			}, true},
	}
	body := []byte(`{"event":{"id":"01ABC","event_type":"incident.triggered"}}`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newProviderHarness(t, routeFrom(t, hookv1.ProviderREST, map[string][]byte{
				hookv1.SecretKeyCurrent: []byte(secret), hookv1.SecretKeyVerifier: []byte(c.spec)}))
			steps := []struct {
				what   string
				body   []byte
				id, ts string
				want   int
				skip   bool
			}{
				{what: "the original", body: body, id: "id-1", ts: ts, want: http.StatusAccepted},
				{what: "its signed bytes under a fresh id", body: body, id: "id-2", ts: ts, want: http.StatusOK},
				{what: "a redelivery under its own id", body: body, id: "id-1", ts: ts, want: http.StatusOK},
				{what: "a retry, signed anew", body: body, id: "id-1", ts: retryTS, want: http.StatusOK, skip: !c.resigns},
				{what: "the retry's signed bytes under a fresh id", body: body, id: "id-3", ts: retryTS, want: http.StatusOK, skip: !c.resigns},
				{what: "another event", body: []byte(`{"event":{"id":"01DEF"}}`), id: "id-4", ts: ts, want: http.StatusAccepted},
			}
			for _, s := range steps {
				if s.skip {
					continue
				}
				hdr := c.sign(s.body, s.ts)
				hdr[c.idHdr] = s.id
				if got := h.post(t, s.body, hdr); got != s.want {
					t.Errorf("%s: %d, want %d", s.what, got, s.want)
				}
			}
			if d := h.depth(t); d != 2 {
				t.Errorf("depth %d, want 2: the original and the other event", d)
			}
		})
	}
}
