package stripe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

const unfitKey = "sk_test_unfit"

func fakeClient(t *testing.T, opts ...fake.Option) (*fake.Server, *stripe.Client) {
	t.Helper()
	srv := fake.New(opts...)
	base, stop := srv.Start()
	t.Cleanup(stop)
	c, err := stripe.New(providers.Config{APIURL: base, Credential: unfitKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// stripe-go decodes a list page in one go: one endpoint with a field of an unexpected type
// fails the page, and so the list of every subscription on the account. The client decodes
// endpoint by endpoint instead: the odd one is listed with Unfit, the others intact, over
// several pages.
func TestListKeepsEveryEndpointWhenOneDoesNotFit(t *testing.T) {
	ctx := context.Background()
	srv, c := fakeClient(t, fake.WithPageSize(2))
	ours, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/ours", Events: []string{"invoice.paid"}, Owner: providers.Owner{Cluster: "c", Namespace: "n", Name: "s", UID: "u"}}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	srv.Seed(unfitKey, fake.Endpoint{ID: "we_plain", URL: "https://plain.example.com", EnabledEvents: []string{"*"}, Created: base})
	srv.Seed(unfitKey, fake.Endpoint{ID: "we_meta", URL: "https://meta.example.com", EnabledEvents: []string{"charge.failed"}, Created: base.Add(time.Second),
		Quirks: []fakeapi.Quirk{{Path: "metadata.count", Value: []byte("3")}}})
	srv.Seed(unfitKey, fake.Endpoint{ID: "we_when", URL: "https://when.example.com", EnabledEvents: []string{"charge.failed"}, Created: base.Add(2 * time.Second),
		Quirks: []fakeapi.Quirk{{Path: "created", Value: []byte(`"yesterday"`)}, {Path: "enabled_events", Value: []byte(`"*"`)}}})
	srv.Seed(unfitKey, fake.Endpoint{ID: "we_nulls", URL: "https://nulls.example.com", EnabledEvents: []string{"charge.failed"}, Created: base.Add(3 * time.Second),
		Quirks: []fakeapi.Quirk{{Path: "metadata", Value: []byte("null")}, {Path: "status", Value: []byte("null")}}})

	regs, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v; want every endpoint, the odd ones marked", err)
	}
	byID := map[string]providers.Registration{}
	for _, r := range regs {
		byID[r.ID] = r
	}
	if len(regs) != 5 || len(byID) != 5 {
		t.Fatalf("List = %d endpoints (%d ids); want 5 over three pages", len(regs), len(byID))
	}
	if r := byID[ours.ID]; r.Unfit != "" || r.Owner.UID != "u" || r.CreateKey != "key-1" {
		t.Errorf("our endpoint = %+v; want it intact, marker included", r)
	}
	if r := byID["we_plain"]; r.Unfit != "" || r.URL != "https://plain.example.com" {
		t.Errorf("plain endpoint = %+v", r)
	}
	if r := byID["we_meta"]; r.Unfit != "metadata is not an object of strings" || r.URL != "https://meta.example.com" || len(r.Events) != 1 {
		t.Errorf("endpoint with a number in metadata = %+v; want metadata reported, the rest read", r)
	}
	if r := byID["we_when"]; r.Unfit != "enabled_events is not an array of strings; created is not a number" || r.URL != "https://when.example.com" {
		t.Errorf("endpoint with odd events and created = %+v", r)
	}
	if r := byID["we_nulls"]; r.Unfit != "" || r.Disabled {
		t.Errorf("endpoint with null metadata and status = %+v; want it read", r)
	}
	if n := srv.CountRequests("GET", "/v1/webhook_endpoints"); n != 3 {
		t.Errorf("%d list requests; want 3 pages", n)
	}
}

// An endpoint whose id cannot be read is listed without id, to be reported, not changed.
func TestListReportsAnEndpointWithoutID(t *testing.T) {
	srv, c := fakeClient(t)
	srv.Seed(unfitKey, fake.Endpoint{ID: "we_odd", URL: "https://odd.example.com", EnabledEvents: []string{"*"}, Quirks: []fakeapi.Quirk{{Path: "id", Value: []byte("7")}}})
	srv.Seed(unfitKey, fake.Endpoint{ID: "we_ok", URL: "https://ok.example.com", EnabledEvents: []string{"*"}})
	regs, err := c.List(context.Background())
	if err != nil || len(regs) != 2 {
		t.Fatalf("List = %+v, %v", regs, err)
	}
	var odd providers.Registration
	for _, r := range regs {
		if r.ID == "" {
			odd = r
		}
	}
	if odd.Unfit != "id is not a string" || odd.URL != "https://odd.example.com" {
		t.Errorf("endpoint without a readable id = %+v", odd)
	}
}

// Every request names Hookwarden and its version after stripe-go's own token, as
// stripe.SetAppInfo would, without its process-wide state.
func TestRequestsCarryHookwardensUserAgent(t *testing.T) {
	ctx := context.Background()
	srv, c := fakeClient(t)
	reg, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"invoice.paid"}}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests; want 3", len(reqs))
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.UserAgent, "Stripe/v1 GoBindings/") || !strings.HasSuffix(r.UserAgent, " "+providers.UserAgent()) {
			t.Errorf("%s %s: User-Agent %q; want stripe-go's followed by %q", r.Method, r.Path, r.UserAgent, providers.UserAgent())
		}
	}
}
