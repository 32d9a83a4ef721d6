package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// reorderingStripe serves the fake Stripe, but lists every endpoint's enabled_events in the
// order reorder gives: Stripe promises no order, so a client must not depend on one.
func reorderingStripe(t *testing.T, reorder func([]string) []string) string {
	t.Helper()
	srv := fake.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	target, _ := url.Parse(base)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, target.ResolveReference(r.URL).String(), r.Body)
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
			body = reorderEvents(t, body, reorder)
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL
}

func reorderEvents(t *testing.T, body []byte, reorder func([]string) []string) []byte {
	var page map[string]any
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("list body: %v", err)
	}
	items, _ := page["data"].([]any)
	for _, it := range items {
		ep := it.(map[string]any)
		var events []string
		for _, e := range ep["enabled_events"].([]any) {
			events = append(events, e.(string))
		}
		ep["enabled_events"] = reorder(events)
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(page); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReplayWhateverTheListOrder: the crash-recovery replay is rebuilt from the listed endpoint;
// it must be the identical request Stripe stored under the key, whatever order Stripe lists
// enabled_events in, or recovery falls back to rotating to a new endpoint.
func TestReplayWhateverTheListOrder(t *testing.T) {
	orders := map[string]func([]string) []string{
		"reversed": func(e []string) []string { slices.Reverse(e); return e },
		"rotated":  func(e []string) []string { return append(e[1:], e[0]) },
		"as sent":  func(e []string) []string { return e },
	}
	for name, reorder := range orders {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, reorderingStripe(t, reorder))
			ctx := context.Background()
			owner := providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "uid-1"}
			const key = "hookwarden-create-uid-1-g1"
			created, err := c.Create(ctx, providers.Desired{
				URL: "https://hooks.example.com/orders", Description: "orders", Owner: owner,
				Events: []string{"invoice.paid", "checkout.session.completed", "charge.refunded"},
			}, key)
			if err != nil {
				t.Fatal(err)
			}
			listed, err := c.List(ctx)
			if err != nil || len(listed) != 1 {
				t.Fatalf("List = %v, %v; want the one endpoint", listed, err)
			}
			got := listed[0]
			replayed, err := c.Create(ctx, providers.Desired{URL: got.URL, Events: got.Events, Description: got.Description, Owner: got.Owner}, got.CreateKey)
			if err != nil {
				t.Fatalf("replay with events listed as %v: %v", got.Events, err)
			}
			if replayed.ID != created.ID || replayed.Secret != created.Secret || replayed.Secret == "" {
				t.Errorf("replay = %s (secret %t); want the original %s with its secret", replayed.ID, replayed.Secret == created.Secret, created.ID)
			}
		})
	}
}
