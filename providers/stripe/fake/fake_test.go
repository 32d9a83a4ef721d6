package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

const (
	keyA = "sk_test_accountA0000000001"
	keyB = "sk_test_accountB0000000002"
)

// testClock is a settable clock, because idempotency expiry and "created" are time-based.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock { return &testClock{t: time.Unix(1_700_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func start(t *testing.T, opts ...fake.Option) (*fake.Server, string) {
	t.Helper()
	s := fake.New(opts...)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// newClient builds the stripe-go client the way PROVIDERS.md §1.4 does.
func newClient(baseURL, key string, hc *http.Client) *client.API {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	cfg := &stripe.BackendConfig{
		URL:               stripe.String(baseURL),
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	return client.New(key, &stripe.Backends{
		API:     stripe.GetBackendWithConfig(stripe.APIBackend, cfg),
		Connect: stripe.GetBackendWithConfig(stripe.ConnectBackend, cfg),
		Uploads: stripe.GetBackendWithConfig(stripe.UploadsBackend, cfg),
	})
}

func createParams(u string, events ...string) *stripe.WebhookEndpointParams {
	return &stripe.WebhookEndpointParams{URL: stripe.String(u), EnabledEvents: stripe.StringSlice(events)}
}

// apiErr is the part of *stripe.Error the tests compare.
type apiErr struct {
	Status                 int
	Type, Code, Param, Msg string
}

func toAPIErr(t *testing.T, err error) apiErr {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *stripe.Error", err, err)
	}
	return apiErr{se.HTTPStatusCode, string(se.Type), string(se.Code), se.Param, se.Msg}
}

func rawFields(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return m
}

func TestCreateReturnsSecretOnlyOnCreate(t *testing.T) {
	clk := newClock()
	s, base := start(t, fake.WithClock(clk.Now))
	sc := newClient(base, keyA, nil)

	p := createParams("https://example.com/hook", "charge.succeeded", "invoice.paid")
	p.Description = stripe.String("primary")
	p.APIVersion = stripe.String(stripe.APIVersion)
	p.AddMetadata("owner", "team-a")
	created, err := sc.WebhookEndpoints.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.ID, "we_") || !strings.HasPrefix(created.Secret, "whsec_") {
		t.Fatalf("id %q / secret %q do not have Stripe's prefixes", created.ID, created.Secret)
	}
	want := stripe.WebhookEndpoint{
		ID: created.ID, Object: "webhook_endpoint", URL: "https://example.com/hook",
		EnabledEvents: []string{"charge.succeeded", "invoice.paid"}, Description: "primary",
		Metadata: map[string]string{"owner": "team-a"}, Status: "enabled", APIVersion: stripe.APIVersion,
		Created: clk.Now().Unix(), Secret: created.Secret,
	}
	ignoreResp := cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "APIResource" }, cmp.Ignore())
	if d := cmp.Diff(want, *created, ignoreResp); d != "" {
		t.Errorf("create response (-want +got):\n%s", d)
	}
	if ct, rid := created.LastResponse.Header.Get("Content-Type"), created.LastResponse.RequestID; ct != "application/json" || !strings.HasPrefix(rid, "req_") {
		t.Errorf("Content-Type %q, Request-Id %q; want application/json and req_...", ct, rid)
	}

	got, err := sc.WebhookEndpoints.Get(created.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	want.Secret = ""
	if d := cmp.Diff(want, *got, ignoreResp); d != "" {
		t.Errorf("retrieve (-want +got):\n%s", d)
	}
	if _, ok := rawFields(t, got.LastResponse.RawJSON)["secret"]; ok {
		t.Errorf("retrieve JSON carries a secret: %s", got.LastResponse.RawJSON)
	}

	it := sc.WebhookEndpoints.List(&stripe.WebhookEndpointListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(100)}})
	for it.Next() {
		if it.WebhookEndpoint().Secret != "" {
			t.Errorf("list returned secret for %s", it.WebhookEndpoint().ID)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(it.WebhookEndpointList().LastResponse.RawJSON), `"url": "/v1/webhook_endpoints"`) {
		t.Errorf("list envelope lacks url: %s", it.WebhookEndpointList().LastResponse.RawJSON)
	}

	stored := s.Endpoints(keyA)
	if len(stored) != 1 || stored[0].Secret != created.Secret {
		t.Errorf("Endpoints(keyA) = %+v, want the one endpoint with the created secret", stored)
	}
}

func TestCreateDefaultsAreNull(t *testing.T) {
	_, base := start(t)
	sc := newClient(base, keyA, nil)
	we, err := sc.WebhookEndpoints.New(createParams("https://example.com/h", "*"))
	if err != nil {
		t.Fatal(err)
	}
	m := rawFields(t, we.LastResponse.RawJSON)
	want := map[string]any{
		"description": nil, "api_version": nil, "application": nil,
		"metadata": map[string]any{}, "livemode": false, "status": "enabled", "object": "webhook_endpoint",
	}
	for k, v := range want {
		if d := cmp.Diff(v, m[k]); d != "" {
			t.Errorf("field %q (-want +got):\n%s", k, d)
		}
	}
}

func TestCreateValidation(t *testing.T) {
	_, base := start(t)
	sc := newClient(base, keyA, nil)
	withExtra := createParams("https://example.com/h", "*")
	withExtra.AddExtra("colour", "blue")
	for _, tc := range []struct {
		name, reason string
		params       *stripe.WebhookEndpointParams
		want         apiErr
	}{
		{"missing url", "url is required on create",
			&stripe.WebhookEndpointParams{EnabledEvents: stripe.StringSlice([]string{"*"})},
			apiErr{400, "invalid_request_error", "parameter_missing", "url", "Missing required param: url."}},
		{"missing events", "enabled_events is required on create",
			&stripe.WebhookEndpointParams{URL: stripe.String("https://example.com/h")},
			apiErr{400, "invalid_request_error", "parameter_missing", "enabled_events", "Missing required param: enabled_events."}},
		{"empty events", "stripe-go encodes an empty non-nil slice as enabled_events= (an unset attempt)",
			&stripe.WebhookEndpointParams{URL: stripe.String("https://example.com/h"), EnabledEvents: []*string{}},
			apiErr{400, "invalid_request_error", "parameter_invalid_empty", "enabled_events", "You passed an empty string for 'enabled_events'. We assume empty values are an attempt to unset a parameter; however 'enabled_events' cannot be unset. You should remove 'enabled_events' from your request or supply a non-empty value."}},
		{"bad url", "url must be absolute http(s)",
			createParams("not a url", "*"),
			apiErr{400, "invalid_request_error", "url_invalid", "url", "Invalid URL: not a url"}},
		{"unknown param", "Stripe rejects parameters it does not know",
			withExtra,
			apiErr{400, "invalid_request_error", "parameter_unknown", "colour", "Received unknown parameter: colour"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sc.WebhookEndpoints.New(tc.params)
			if err == nil {
				t.Fatalf("want error: %s", tc.reason)
			}
			if d := cmp.Diff(tc.want, toAPIErr(t, err)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestListPagination(t *testing.T) {
	// A fixed clock gives every endpoint the same "created" second, so the order must come from
	// creation order, as Stripe's does.
	s, base := start(t, fake.WithPageSize(2), fake.WithClock(newClock().Now))
	sc := newClient(base, keyA, nil)
	var ids []string // oldest first
	for i := range 5 {
		we, err := sc.WebhookEndpoints.New(createParams(fmt.Sprintf("https://example.com/%d", i), "*"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, we.ID)
	}
	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	for _, tc := range []struct {
		name, reason string
		params       stripe.ListParams
		wantIDs      []string
		wantQueries  []string
	}{
		{"auto paging", "PageSize 2 caps limit=100; the iterator follows starting_after = last id of each page",
			stripe.ListParams{Limit: stripe.Int64(100)},
			[]string{ids[4], ids[3], ids[2], ids[1], ids[0]},
			[]string{q("limit", "100"), q("limit", "100", "starting_after", ids[3]), q("limit", "100", "starting_after", ids[1])}},
		{"single page", "Single turns auto-paging off, so only the first (newest) page is read",
			stripe.ListParams{Limit: stripe.Int64(100), Single: true},
			[]string{ids[4], ids[3]},
			[]string{q("limit", "100")}},
		{"backwards", "ending_before returns the page nearest the cursor; stripe-go reverses it and continues with ending_before",
			stripe.ListParams{Limit: stripe.Int64(100), EndingBefore: stripe.String(ids[0])},
			[]string{ids[1], ids[2], ids[3], ids[4]},
			[]string{q("ending_before", ids[0], "limit", "100"), q("ending_before", ids[2], "limit", "100")}},
		{"default limit", "without limit the client gets Stripe's default of 10, still capped by PageSize",
			stripe.ListParams{StartingAfter: stripe.String(ids[3])},
			[]string{ids[2], ids[1], ids[0]},
			[]string{q("starting_after", ids[3]), q("starting_after", ids[1])}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.ResetRequests()
			params := &stripe.WebhookEndpointListParams{ListParams: tc.params}
			it := sc.WebhookEndpoints.List(params)
			var got []string
			for it.Next() {
				got = append(got, it.WebhookEndpoint().ID)
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantIDs, got); d != "" {
				t.Errorf("%s: ids (-want +got):\n%s", tc.reason, d)
			}
			var queries []string
			for _, r := range s.Requests() {
				queries = append(queries, r.Query.Encode())
			}
			if d := cmp.Diff(tc.wantQueries, queries); d != "" {
				t.Errorf("%s: request queries (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestListParamErrors(t *testing.T) {
	_, base := start(t)
	sc := newClient(base, keyA, nil)
	if _, err := sc.WebhookEndpoints.New(createParams("https://example.com/h", "*")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, reason string
		params       stripe.ListParams
		want         apiErr
	}{
		{"limit zero", "limit must be 1..100",
			stripe.ListParams{Limit: stripe.Int64(0)},
			apiErr{400, "invalid_request_error", "", "limit", "This value must be greater than or equal to 1."}},
		{"limit too big", "limit must be 1..100",
			stripe.ListParams{Limit: stripe.Int64(101)},
			apiErr{400, "invalid_request_error", "", "limit", "This value must be less than or equal to 100."}},
		{"unknown cursor", "a cursor naming no endpoint is a resource_missing 400",
			stripe.ListParams{StartingAfter: stripe.String("we_gone")},
			apiErr{400, "invalid_request_error", "resource_missing", "starting_after", "No such webhook endpoint: 'we_gone'"}},
		{"both cursors", "Stripe allows only one direction",
			stripe.ListParams{StartingAfter: stripe.String("we_a"), EndingBefore: stripe.String("we_b")},
			apiErr{400, "invalid_request_error", "", "", "You may only specify one of these parameters: starting_after, ending_before."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := sc.WebhookEndpoints.List(&stripe.WebhookEndpointListParams{ListParams: tc.params})
			for it.Next() {
			}
			if it.Err() == nil {
				t.Fatalf("want error: %s", tc.reason)
			}
			if d := cmp.Diff(tc.want, toAPIErr(t, it.Err())); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestIdempotency(t *testing.T) {
	clk := newClock()
	s, base := start(t, fake.WithClock(clk.Now))
	sc := newClient(base, keyA, nil)
	create := func(key, u string) (*stripe.WebhookEndpoint, error) {
		p := createParams(u, "charge.succeeded")
		p.AddMetadata("a", "1")
		p.AddMetadata("b", "2") // two keys: the fingerprint must not depend on map order
		p.SetIdempotencyKey(key)
		return sc.WebhookEndpoints.New(p)
	}

	first, err := create("uid-1-gen-1-create", "https://example.com/h")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("replay", func(t *testing.T) {
		again, err := create("uid-1-gen-1-create", "https://example.com/h")
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID || again.Secret != first.Secret {
			t.Errorf("replay gave %s/%s, want the original %s/%s", again.ID, again.Secret, first.ID, first.Secret)
		}
		if d := cmp.Diff(string(first.LastResponse.RawJSON), string(again.LastResponse.RawJSON)); d != "" {
			t.Errorf("replayed body differs from the original (-first +replay):\n%s", d)
		}
		if h := again.LastResponse.Header.Get("Idempotent-Replayed"); h != "true" {
			t.Errorf("Idempotent-Replayed = %q, want true", h)
		}
		if n := len(s.Endpoints(keyA)); n != 1 {
			t.Errorf("%d endpoints after replay, want 1", n)
		}
		reqs := s.Requests()
		if last := reqs[len(reqs)-1]; !last.Replayed || last.IdempotencyKey != "uid-1-gen-1-create" {
			t.Errorf("last logged request = %+v, want a replay with the key", last)
		}
	})

	t.Run("other params", func(t *testing.T) {
		_, err := create("uid-1-gen-1-create", "https://example.com/other")
		want := apiErr{400, "idempotency_error", "", "", "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'uid-1-gen-1-create' if you meant to execute a different request."}
		if d := cmp.Diff(want, toAPIErr(t, err)); d != "" {
			t.Errorf("reused key with new params (-want +got):\n%s", d)
		}
		var ie *stripe.IdempotencyError
		if !errors.As(err, &ie) {
			t.Errorf("stripe-go did not map the error to *stripe.IdempotencyError: %T", errors.Unwrap(err))
		}
	})

	t.Run("other account", func(t *testing.T) {
		other, err := newClient(base, keyB, nil).WebhookEndpoints.New(func() *stripe.WebhookEndpointParams {
			p := createParams("https://example.com/h", "charge.succeeded")
			p.AddMetadata("a", "1")
			p.AddMetadata("b", "2")
			p.SetIdempotencyKey("uid-1-gen-1-create")
			return p
		}())
		if err != nil {
			t.Fatal(err)
		}
		if other.ID == first.ID {
			t.Errorf("account B got account A's replay; idempotency caches must be per account")
		}
	})

	for _, tc := range []struct {
		name, reason string
		expire       func()
	}{
		{"ttl passes", "keys are pruned after 24 h of the fake's clock", func() { clk.Add(24 * time.Hour) }},
		{"expire all", "ExpireIdempotencyKeys simulates the window passing", s.ExpireIdempotencyKeys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.Endpoints(keyA))
			tc.expire()
			we, err := create("uid-1-gen-1-create", "https://example.com/h")
			if err != nil {
				t.Fatal(err)
			}
			if we.ID == first.ID || len(s.Endpoints(keyA)) != before+1 {
				t.Errorf("%s: got %s and %d endpoints, want a new endpoint", tc.reason, we.ID, len(s.Endpoints(keyA)))
			}
		})
	}
}

func TestEndpointCap(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		opts         []fake.Option
		seed         int
		wantMsg      string
	}{
		{"default", "Stripe allows 16 endpoints per account", nil, 16,
			"You have reached the maximum of 16 test webhook endpoints."},
		{"configured", "MaxEndpoints lets tests hit the cap cheaply", []fake.Option{fake.WithMaxEndpoints(2)}, 2,
			"You have reached the maximum of 2 test webhook endpoints."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t, tc.opts...)
			for i := range tc.seed {
				s.Seed(keyA, fake.Endpoint{URL: fmt.Sprintf("https://example.com/%d", i), EnabledEvents: []string{"*"}})
			}
			_, err := newClient(base, keyA, nil).WebhookEndpoints.New(createParams("https://example.com/more", "*"))
			want := apiErr{400, "invalid_request_error", "", "", tc.wantMsg}
			if d := cmp.Diff(want, toAPIErr(t, err)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
			if _, err := newClient(base, keyB, nil).WebhookEndpoints.New(createParams("https://example.com/b", "*")); err != nil {
				t.Errorf("account B hit account A's cap: %v", err)
			}
		})
	}
}

func TestMissingEndpoint(t *testing.T) {
	_, base := start(t)
	sc := newClient(base, keyA, nil)
	want := apiErr{404, "invalid_request_error", "resource_missing", "id", "No such webhook endpoint: 'we_missing'"}
	for _, tc := range []struct {
		name, reason string
		call         func() error
	}{
		{"get", "retrieve of an absent id", func() error { _, err := sc.WebhookEndpoints.Get("we_missing", nil); return err }},
		{"update", "update of an absent id", func() error {
			_, err := sc.WebhookEndpoints.Update("we_missing", &stripe.WebhookEndpointParams{URL: stripe.String("https://example.com/x")})
			return err
		}},
		{"delete", "delete of an absent id", func() error {
			_, err := sc.WebhookEndpoints.Del("we_missing", &stripe.WebhookEndpointParams{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(want, toAPIErr(t, tc.call())); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	s, base := start(t)
	sc := newClient(base, keyA, nil)
	we, err := sc.WebhookEndpoints.New(createParams("https://example.com/h", "*"))
	if err != nil {
		t.Fatal(err)
	}
	p := &stripe.WebhookEndpointParams{}
	p.SetIdempotencyKey("delete-once")
	del, err := sc.WebhookEndpoints.Del(we.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	if !del.Deleted || del.ID != we.ID {
		t.Errorf("delete = %+v, want deleted %s", del, we.ID)
	}
	if n := len(s.Endpoints(keyA)); n != 0 {
		t.Errorf("%d endpoints left", n)
	}
	// Stripe documents idempotency keys as having no effect on DELETE, so the retry is a 404
	// rather than a replay, and the operator has to treat that 404 as success.
	_, err = sc.WebhookEndpoints.Del(we.ID, p)
	if got := toAPIErr(t, err); got.Status != 404 || got.Code != "resource_missing" {
		t.Errorf("repeated DELETE = %+v, want 404 resource_missing", got)
	}
}

func TestUpdate(t *testing.T) {
	s, base := start(t)
	sc := newClient(base, keyA, nil)
	type state struct {
		URL, Description, Status string
		Events                   []string
		Metadata                 map[string]string
	}
	initial := state{"https://example.com/h", "desc", "enabled", []string{"*"}, map[string]string{"a": "1", "b": "2"}}
	for _, tc := range []struct {
		name, reason string
		params       func(p *stripe.WebhookEndpointParams)
		want         func(s *state)
	}{
		{"set one key", "metadata merges key by key",
			func(p *stripe.WebhookEndpointParams) { p.AddMetadata("c", "3") },
			func(s *state) { s.Metadata = map[string]string{"a": "1", "b": "2", "c": "3"} }},
		{"unset one key", "metadata[k]= unsets k",
			func(p *stripe.WebhookEndpointParams) { p.AddMetadata("a", "") },
			func(s *state) { s.Metadata = map[string]string{"b": "2"} }},
		{"clear all", "metadata= clears; stripe-go can only send it through AddExtra",
			func(p *stripe.WebhookEndpointParams) { p.AddExtra("metadata", "") },
			func(s *state) { s.Metadata = map[string]string{} }},
		{"empty map", "stripe-go encodes an empty map as nothing, so it does NOT clear metadata",
			func(p *stripe.WebhookEndpointParams) { p.Metadata = map[string]string{} },
			func(s *state) {}},
		{"clear and set", "clearing and setting in one request leaves just the new keys",
			func(p *stripe.WebhookEndpointParams) { p.AddExtra("metadata", ""); p.AddMetadata("z", "9") },
			func(s *state) { s.Metadata = map[string]string{"z": "9"} }},
		{"clear description", "description= clears it to null",
			func(p *stripe.WebhookEndpointParams) { p.Description = stripe.String("") },
			func(s *state) { s.Description = "" }},
		{"disable", "disabled=true sets status disabled",
			func(p *stripe.WebhookEndpointParams) { p.Disabled = stripe.Bool(true) },
			func(s *state) { s.Status = "disabled" }},
		{"url and events", "url and enabled_events are replaced whole",
			func(p *stripe.WebhookEndpointParams) {
				p.URL = stripe.String("https://example.com/new")
				p.EnabledEvents = stripe.StringSlice([]string{"invoice.paid", "charge.failed"})
			},
			func(s *state) {
				s.URL = "https://example.com/new"
				s.Events = []string{"invoice.paid", "charge.failed"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeded := s.Seed(keyA, fake.Endpoint{URL: initial.URL, Description: initial.Description,
				EnabledEvents: initial.Events, Metadata: initial.Metadata})
			p := &stripe.WebhookEndpointParams{}
			tc.params(p)
			got, err := sc.WebhookEndpoints.Update(seeded.ID, p)
			if err != nil {
				t.Fatal(err)
			}
			want := initial
			want.Metadata = map[string]string{"a": "1", "b": "2"}
			tc.want(&want)
			gotState := state{got.URL, got.Description, got.Status, got.EnabledEvents, got.Metadata}
			if d := cmp.Diff(want, gotState); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
			if got.Secret != "" {
				t.Errorf("update returned the secret")
			}
		})
	}
}

func TestUpdateRejectsCreateOnlyParams(t *testing.T) {
	s, base := start(t)
	sc := newClient(base, keyA, nil)
	we := s.Seed(keyA, fake.Endpoint{URL: "https://example.com/h", EnabledEvents: []string{"*"}})
	for _, tc := range []struct {
		name, reason string
		params       *stripe.WebhookEndpointParams
		param        string
	}{
		{"api_version", "api_version is create-only; changing it needs delete+recreate",
			&stripe.WebhookEndpointParams{APIVersion: stripe.String(stripe.APIVersion)}, "api_version"},
		{"connect", "connect is create-only",
			&stripe.WebhookEndpointParams{Connect: stripe.Bool(true)}, "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sc.WebhookEndpoints.Update(we.ID, tc.params)
			want := apiErr{400, "invalid_request_error", "parameter_unknown", tc.param, "Received unknown parameter: " + tc.param}
			if d := cmp.Diff(want, toAPIErr(t, err)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		fault        fake.Fault
		call         func(sc *client.API) error
		want         apiErr
	}{
		{"rate limit", "a 429 rate_limit surfaces as *stripe.Error; stripe-go does not retry it",
			fake.Fault{Method: "POST", PathPrefix: "/v1/webhook_endpoints", Status: 429, Code: "rate_limit", RetryAfter: 1500 * time.Millisecond},
			func(sc *client.API) error {
				_, err := sc.WebhookEndpoints.New(createParams("https://example.com/h", "*"))
				return err
			},
			apiErr{429, "invalid_request_error", "rate_limit", "", "Request rate limit exceeded. You can learn more about rate limits here https://stripe.com/docs/rate-limits."}},
		{"server error", "5xx defaults to type api_error",
			fake.Fault{Method: "GET", Status: 500, Message: "boom"},
			func(sc *client.API) error {
				it := sc.WebhookEndpoints.List(&stripe.WebhookEndpointListParams{})
				it.Next()
				return it.Err()
			},
			apiErr{500, "api_error", "", "", "boom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t)
			tc.fault.Times = 1
			s.Inject(tc.fault)
			sc := newClient(base, keyA, nil)
			err := tc.call(sc)
			if d := cmp.Diff(tc.want, toAPIErr(t, err)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
			if err := tc.call(sc); err != nil {
				t.Errorf("Times: 1 fault applied twice: %v", err)
			}
			if n := s.CountRequests("", "/v1/"); n != 2 {
				t.Errorf("logged %d requests, want 2 (faulted requests are logged too)", n)
			}
		})
	}
}

func TestFaultRetryAfterAndRemoval(t *testing.T) {
	s, base := start(t)
	remove := s.Inject(fake.Fault{Status: 429, Code: "rate_limit", RetryAfter: 1500 * time.Millisecond})
	get := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/v1/webhook_endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := get(); r.StatusCode != 429 || r.Header.Get("Retry-After") != "2" {
		t.Errorf("got %d Retry-After %q, want 429 with Retry-After 2 (rounded up)", r.StatusCode, r.Header.Get("Retry-After"))
	}
	remove()
	remove() // idempotent
	if r := get(); r.StatusCode != 200 {
		t.Errorf("after remove: %d, want 200", r.StatusCode)
	}
	s.Inject(fake.Fault{Status: 503})
	s.ClearFaults()
	if r := get(); r.StatusCode != 200 {
		t.Errorf("after ClearFaults: %d, want 200", r.StatusCode)
	}
}

func TestLatencyRespectsClientTimeout(t *testing.T) {
	s, base := start(t)
	s.Inject(fake.Fault{Latency: 10 * time.Second})
	sc := newClient(base, keyA, &http.Client{Timeout: 100 * time.Millisecond})
	begin := time.Now()
	_, err := sc.WebhookEndpoints.New(createParams("https://example.com/h", "*"))
	if err == nil {
		t.Fatal("want a client timeout")
	}
	// The handler must notice the client left instead of sleeping 10 s.
	deadline := time.Now().Add(5 * time.Second)
	for s.CountRequests("POST", "/v1/") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Status != 499 || time.Since(begin) > 5*time.Second {
		t.Fatalf("requests %+v after %v, want one with status 499 well before the latency elapsed", reqs, time.Since(begin))
	}
	if n := len(s.Endpoints(keyA)); n != 0 {
		t.Errorf("abandoned request still created %d endpoints", n)
	}
}

func TestLostResponseReplays(t *testing.T) {
	// AfterApply: Stripe created the endpoint but the response was lost. A retry with the
	// same key must return the original object, secret included, and create nothing.
	s, base := start(t)
	s.Inject(fake.Fault{Method: "POST", Status: 502, Times: 1, AfterApply: true})
	sc := newClient(base, keyA, nil)
	p := createParams("https://example.com/h", "*")
	p.SetIdempotencyKey("cr-uid-create")
	if _, err := sc.WebhookEndpoints.New(p); err == nil {
		t.Fatal("want the injected 502")
	}
	stored := s.Endpoints(keyA)
	if len(stored) != 1 {
		t.Fatalf("%d endpoints after lost response, want 1", len(stored))
	}
	we, err := sc.WebhookEndpoints.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if we.ID != stored[0].ID || we.Secret != stored[0].Secret || len(s.Endpoints(keyA)) != 1 {
		t.Errorf("retry gave %s/%s, want replay of %s/%s", we.ID, we.Secret, stored[0].ID, stored[0].Secret)
	}
}

func TestAccountsAreIsolated(t *testing.T) {
	s, base := start(t)
	a, b := newClient(base, keyA, nil), newClient(base, keyB, nil)
	we, err := a.WebhookEndpoints.New(createParams("https://example.com/a", "*"))
	if err != nil {
		t.Fatal(err)
	}
	it := b.WebhookEndpoints.List(&stripe.WebhookEndpointListParams{})
	for it.Next() {
		t.Errorf("account B lists %s", it.WebhookEndpoint().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WebhookEndpoints.Get(we.ID, nil); toAPIErr(t, err).Status != 404 {
		t.Errorf("account B can read account A's endpoint")
	}
	reqs := s.Requests()
	if reqs[0].Account == reqs[1].Account || reqs[0].Account != fake.AccountLabel(keyA) {
		t.Errorf("account labels %q, %q: want distinct, derived from the key", reqs[0].Account, reqs[1].Account)
	}
	for _, r := range reqs {
		if strings.Contains(r.Account, "sk_") {
			t.Errorf("request log leaks the key: %q", r.Account)
		}
	}
}

func TestAuth(t *testing.T) {
	s, base := start(t)
	s.RejectKey(keyB)
	for _, tc := range []struct {
		name, reason, key string
		want              apiErr
	}{
		{"no key", "stripe-go sends 'Bearer ' with an empty key; Stripe answers 401", "",
			apiErr{401, "invalid_request_error", "", "", "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/."}},
		{"rejected key", "RejectKey simulates a rolled key; the message masks the key", keyB,
			apiErr{401, "invalid_request_error", "", "", "Invalid API Key provided: sk_test_**************0002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newClient(base, tc.key, nil).WebhookEndpoints.Get("we_x", nil)
			if d := cmp.Diff(tc.want, toAPIErr(t, err)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
		})
	}
	s.AcceptKey(keyB)
	if _, err := newClient(base, keyB, nil).WebhookEndpoints.New(createParams("https://example.com/h", "*")); err != nil {
		t.Errorf("after AcceptKey: %v", err)
	}
}

func TestOutOfBandHelpers(t *testing.T) {
	s, base := start(t)
	sc := newClient(base, keyA, nil)
	created := time.Unix(1_600_000_000, 0)
	we := s.Seed(keyA, fake.Endpoint{URL: "https://example.com/h", EnabledEvents: []string{"*"}, Created: created})
	if !strings.HasPrefix(we.ID, "we_") || !strings.HasPrefix(we.Secret, "whsec_") || we.Status != "enabled" {
		t.Fatalf("Seed did not fill defaults: %+v", we)
	}
	if !s.Edit(keyA, we.ID, func(e *fake.Endpoint) { e.URL = "https://drifted.example.com"; e.Status = "disabled" }) {
		t.Fatal("Edit: not found")
	}
	got, err := sc.WebhookEndpoints.Get(we.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "https://drifted.example.com" || got.Status != "disabled" || got.Created != created.Unix() {
		t.Errorf("after Edit got %+v", got)
	}
	if !s.Remove(keyA, we.ID) || s.Remove(keyA, we.ID) || s.Edit(keyA, we.ID, func(*fake.Endpoint) {}) {
		t.Error("Remove/Edit do not report existence correctly")
	}
	if n := s.CountRequests("", ""); n != 1 {
		t.Errorf("out-of-band helpers were logged: %d requests", n)
	}
}

func TestStartAndConcurrency(t *testing.T) {
	s := fake.New(fake.WithMaxEndpoints(3))
	base, stop := s.Start()
	defer stop()
	var wg sync.WaitGroup
	for _, key := range []string{keyA, keyB} {
		sc := newClient(base, key, nil)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = sc.WebhookEndpoints.New(createParams(fmt.Sprintf("https://example.com/%d", i), "*"))
				_ = s.Requests()
				_ = s.Endpoints(key)
			}()
		}
	}
	wg.Wait()
	for _, key := range []string{keyA, keyB} {
		if n := len(s.Endpoints(key)); n != 3 {
			t.Errorf("%d endpoints for %s, want the cap of 3 under concurrent creates", n, fake.AccountLabel(key))
		}
	}
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/webhook_endpoints", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Error("server still answering after stop")
	}
}

func TestMeterAnswersLikeStripesRateLimiter(t *testing.T) {
	m := fakeapi.NewMeter(fakeapi.MeterOptions{Rate: 1, Burst: 1})
	s, base := start(t, fake.WithMeter(m))
	api := newClient(base, keyA, nil)
	ep, err := api.WebhookEndpoints.New(createParams("https://example.com/a", "charge.succeeded"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.WebhookEndpoints.Update(ep.ID, &stripe.WebhookEndpointParams{Description: stripe.String("x")})
	want := apiErr{Status: 429, Type: "invalid_request_error", Code: "rate_limit", Msg: "Request rate limit exceeded. You can learn more about rate limits here https://stripe.com/docs/rate-limits."}
	if d := cmp.Diff(want, toAPIErr(t, err)); d != "" {
		t.Errorf("over the rate: -want +got\n%s", d)
	}
	if got := s.Endpoints(keyA)[0].Description; got != "" {
		t.Errorf("a refused update was applied: description %q", got)
	}
	if _, err := newClient(base, keyB, nil).WebhookEndpoints.New(createParams("https://example.com/b", "charge.succeeded")); err != nil {
		t.Errorf("another key has its own rate: %v", err)
	}
	wantCounts := []fakeapi.RouteCount{
		{Route: fakeapi.Route{Method: "POST", Pattern: "/v1/webhook_endpoints"}, Requests: 2},
		{Route: fakeapi.Route{Method: "POST", Pattern: "/v1/webhook_endpoints/{id}"}, Requests: 1, Limited: 1},
	}
	if d := cmp.Diff(wantCounts, m.Counts()); d != "" {
		t.Errorf("counts: -want +got\n%s", d)
	}
}
