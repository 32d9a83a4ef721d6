package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// testKey looks like a real secret key so that a leak is easy to spot in any error string.
const testKey = "sk_test_51HookwardenLeakCanary0123456789abcdef"

// request is what the fake Stripe API saw.
type request struct {
	Method         string
	Path           string
	Query          url.Values
	Form           url.Values
	Authorization  string
	IdempotencyKey string
	StripeVersion  string
}

// fakeAPI is an httptest server that records each request and answers with handle.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newFakeAPI(t *testing.T, handle http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("parse form: %v", err)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, request{
			Method:         r.Method,
			Path:           r.URL.Path,
			Query:          r.URL.Query(),
			Form:           r.PostForm,
			Authorization:  r.Header.Get("Authorization"),
			IdempotencyKey: r.Header.Get("Idempotency-Key"),
			StripeVersion:  r.Header.Get("Stripe-Version"),
		})
		f.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

func newClient(t *testing.T, apiURL string) *stripe.Client {
	t.Helper()
	c, err := stripe.New(providers.Config{APIURL: apiURL, Credential: testKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func writeJSON(t *testing.T, w http.ResponseWriter, status int, v any) {
	t.Helper()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		t.Errorf("encode response: %v", err)
	}
}

// endpoint is a webhook_endpoint object as Stripe returns it.
func endpoint(id string, md map[string]string) map[string]any {
	if md == nil {
		md = map[string]string{}
	}
	return map[string]any{
		"id":             id,
		"object":         "webhook_endpoint",
		"url":            "https://hooks.example.com/" + id,
		"enabled_events": []string{"charge.succeeded"},
		"description":    "desc " + id,
		"status":         "enabled",
		"created":        1700000000,
		"livemode":       false,
		"metadata":       md,
		"api_version":    "2023-10-16",
	}
}

func stripeError(typ, code, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg}}
}

var (
	owner = providers.Owner{Cluster: "prod-eu", Namespace: "payments", Name: "checkout", UID: "6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b"}
	// created is endpoint()'s "created" timestamp.
	created = time.Unix(1700000000, 0).UTC()
)

func TestList(t *testing.T) {
	marked := stripe.MarkerMetadata(owner, "uid-gen1-create")
	type page struct {
		ids     []string
		hasMore bool
	}
	cases := []struct {
		name   string
		reason string
		// pages is keyed by the starting_after the client sends ("" for the first page).
		pages             map[string]page
		wantStartingAfter []string
		wantIDs           []string
		wantErr           bool
	}{
		{
			name:   "three pages",
			reason: "the iterator must follow has_more with starting_after = the last ID of the previous page",
			pages: map[string]page{
				"":     {ids: []string{"we_1", "we_2"}, hasMore: true},
				"we_2": {ids: []string{"we_3", "we_4"}, hasMore: true},
				"we_4": {ids: []string{"we_5"}},
			},
			wantStartingAfter: []string{"", "we_2", "we_4"},
			wantIDs:           []string{"we_1", "we_2", "we_3", "we_4", "we_5"},
		},
		{
			name:              "empty account",
			reason:            "no endpoints is an empty result, not an error",
			pages:             map[string]page{"": {}},
			wantStartingAfter: []string{""},
		},
		{
			name:   "second page fails",
			reason: "a partial list would make the reconciler prune or recreate endpoints it did not see",
			pages: map[string]page{
				"": {ids: []string{"we_1", "we_2"}, hasMore: true},
			},
			wantStartingAfter: []string{"", "we_2"},
			wantErr:           true,
		},
		{
			name:   "server repeats a page",
			reason: "a misbehaving API that never advances must not hang the reconciler",
			pages: map[string]page{
				"":     {ids: []string{"we_1", "we_2"}, hasMore: true},
				"we_2": {ids: []string{"we_1", "we_2"}, hasMore: true},
			},
			wantStartingAfter: []string{"", "we_2"},
			wantErr:           true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				p, ok := tc.pages[r.URL.Query().Get("starting_after")]
				if !ok {
					writeJSON(t, w, http.StatusInternalServerError, stripeError("api_error", "", "boom"))
					return
				}
				data := []any{}
				for _, id := range p.ids {
					data = append(data, endpoint(id, marked))
				}
				writeJSON(t, w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/webhook_endpoints", "has_more": p.hasMore, "data": data})
			})

			regs, err := newClient(t, api.URL).List(t.Context())

			var gotStartingAfter []string
			for _, r := range api.requests() {
				if r.Method != http.MethodGet || r.Path != "/v1/webhook_endpoints" {
					t.Errorf("unexpected request %s %s", r.Method, r.Path)
				}
				if got := r.Query.Get("limit"); got != "100" {
					t.Errorf("limit = %q, want 100", got)
				}
				gotStartingAfter = append(gotStartingAfter, r.Query.Get("starting_after"))
			}
			if diff := cmp.Diff(tc.wantStartingAfter, gotStartingAfter); diff != "" {
				t.Errorf("starting_after sequence (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
			if tc.wantErr {
				if err == nil || providers.KindOf(err) != providers.Transient {
					t.Fatalf("List error = %v, want Transient (reason: %s)", err, tc.reason)
				}
				if regs != nil {
					t.Errorf("List returned %d registrations with an error, want none", len(regs))
				}
				return
			}
			if err != nil {
				t.Fatalf("List: %v (reason: %s)", err, tc.reason)
			}
			var want []providers.Registration
			for _, id := range tc.wantIDs {
				want = append(want, providers.Registration{
					ID: id, URL: "https://hooks.example.com/" + id, Events: []string{"charge.succeeded"},
					Description: "desc " + id, Owner: owner, CreateKey: "uid-gen1-create", Created: created,
				})
			}
			if diff := cmp.Diff(want, regs); diff != "" {
				t.Errorf("List (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	const key = "6f1c9a52-gen3-create"
	wantMarker := url.Values{
		"metadata[hookwarden_cluster]":    {"prod-eu"},
		"metadata[hookwarden_namespace]":  {"payments"},
		"metadata[hookwarden_name]":       {"checkout"},
		"metadata[hookwarden_uid]":        {"6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b"},
		"metadata[hookwarden_create_key]": {key},
	}
	merge := func(vs ...url.Values) url.Values {
		out := url.Values{}
		for _, v := range vs {
			for k, x := range v {
				out[k] = x
			}
		}
		return out
	}
	base := url.Values{
		"url":               {"https://hooks.example.com/stripe"},
		"enabled_events[0]": {"charge.succeeded"},
		"enabled_events[1]": {"invoice.paid"},
		"api_version":       {"2023-10-16"},
	}
	cases := []struct {
		name      string
		reason    string
		desired   providers.Desired
		wantForms []url.Values // one per request, in order
		wantPaths []string
		want      providers.Registration
	}{
		{
			name:   "enabled with description",
			reason: "one POST carrying url, events, description, the marker and the pinned api_version",
			desired: providers.Desired{
				URL: "https://hooks.example.com/stripe", Events: []string{"charge.succeeded", "invoice.paid"},
				Description: "checkout events", Owner: owner,
			},
			wantForms: []url.Values{merge(base, wantMarker, url.Values{"description": {"checkout events"}})},
			wantPaths: []string{"/v1/webhook_endpoints"},
			want: providers.Registration{
				ID: "we_new", URL: "https://hooks.example.com/stripe", Events: []string{"charge.succeeded", "invoice.paid"},
				Description: "checkout events", Owner: owner, CreateKey: key, Secret: "whsec_abc", Created: created,
			},
		},
		{
			name:   "empty description is not sent",
			reason: "an empty description param on create is noise; Stripe stores none either way",
			desired: providers.Desired{
				URL: "https://hooks.example.com/stripe", Events: []string{"charge.succeeded", "invoice.paid"}, Owner: owner,
			},
			wantForms: []url.Values{merge(base, wantMarker)},
			wantPaths: []string{"/v1/webhook_endpoints"},
			want: providers.Registration{
				ID: "we_new", URL: "https://hooks.example.com/stripe", Events: []string{"charge.succeeded", "invoice.paid"},
				Owner: owner, CreateKey: key, Secret: "whsec_abc", Created: created,
			},
		},
		{
			name:   "disabled is create then update",
			reason: "Stripe's create has no disabled param; the secret from the create must survive the update",
			desired: providers.Desired{
				URL: "https://hooks.example.com/stripe", Events: []string{"charge.succeeded", "invoice.paid"},
				Disabled: true, Owner: owner,
			},
			wantForms: []url.Values{merge(base, wantMarker), {"disabled": {"true"}}},
			wantPaths: []string{"/v1/webhook_endpoints", "/v1/webhook_endpoints/we_new"},
			want: providers.Registration{
				ID: "we_new", URL: "https://hooks.example.com/stripe", Events: []string{"charge.succeeded", "invoice.paid"},
				Disabled: true, Owner: owner, CreateKey: key, Secret: "whsec_abc", Created: created,
				Health: &providers.DeliveryHealth{State: providers.HealthDisabled},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu         sync.Mutex
				createResp map[string]any // for the disable update that follows the create
			)
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				// Echo the params like Stripe does; the secret only on create.
				we := endpoint("we_new", nil)
				if r.URL.Path == "/v1/webhook_endpoints" {
					we["url"] = r.PostForm.Get("url")
					we["enabled_events"] = []string{r.PostForm.Get("enabled_events[0]"), r.PostForm.Get("enabled_events[1]")}
					we["description"] = r.PostForm.Get("description")
					md := map[string]string{}
					for k, v := range r.PostForm {
						if name, ok := strings.CutPrefix(k, "metadata["); ok {
							md[strings.TrimSuffix(name, "]")] = v[0]
						}
					}
					we["metadata"] = md
					we["secret"] = "whsec_abc"
					createResp = we
				} else {
					we = createResp
					delete(we, "secret")
					if r.PostForm.Get("disabled") == "true" {
						we["status"] = "disabled"
					}
				}
				writeJSON(t, w, http.StatusOK, we)
			})
			c := newClient(t, api.URL)

			got, err := c.Create(t.Context(), tc.desired, key)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(providers.DeliveryHealth{}, "Message")); diff != "" {
				t.Errorf("Create (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
			reqs := api.requests()
			var gotForms []url.Values
			var gotPaths []string
			for _, r := range reqs {
				gotForms = append(gotForms, r.Form)
				gotPaths = append(gotPaths, r.Path)
				if r.Method != http.MethodPost {
					t.Errorf("%s %s, want POST", r.Method, r.Path)
				}
				if r.Authorization != "Bearer "+testKey {
					t.Errorf("Authorization header does not carry the configured key")
				}
				if r.StripeVersion != "2023-10-16" {
					t.Errorf("Stripe-Version = %q, want 2023-10-16", r.StripeVersion)
				}
			}
			if diff := cmp.Diff(tc.wantForms, gotForms); diff != "" {
				t.Errorf("request params (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
			if diff := cmp.Diff(tc.wantPaths, gotPaths); diff != "" {
				t.Errorf("request paths (-want +got):\n%s", diff)
			}
			if len(reqs) > 0 && reqs[0].IdempotencyKey != key {
				t.Errorf("create Idempotency-Key = %q, want the caller's key %q", reqs[0].IdempotencyKey, key)
			}
			if len(reqs) > 1 && (reqs[1].IdempotencyKey == "" || reqs[1].IdempotencyKey == key) {
				t.Errorf("disable Idempotency-Key = %q, want a fresh key distinct from the create key", reqs[1].IdempotencyKey)
			}
		})
	}
}

func TestCreateIdempotencyKeyIsDeterministic(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(t, w, http.StatusOK, endpoint("we_1", nil))
	})
	c := newClient(t, api.URL)
	d := providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"*"}, Owner: owner}
	for _, key := range []string{"uid-1-create", "uid-1-create", "uid-2-create"} {
		if _, err := c.Create(t.Context(), d, key); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	var got []string
	for _, r := range api.requests() {
		got = append(got, r.IdempotencyKey)
	}
	// A replay after a crash only returns the original secret if the key is the caller's, not a
	// random one per call (stripe-go's default).
	if diff := cmp.Diff([]string{"uid-1-create", "uid-1-create", "uid-2-create"}, got); diff != "" {
		t.Errorf("Idempotency-Key per call (-want +got):\n%s", diff)
	}
}

func TestCreateRejectsBadInputWithoutCalling(t *testing.T) {
	valid := providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"*"}}
	cases := []struct {
		name   string
		reason string
		d      providers.Desired
		key    string
	}{
		{name: "empty key", reason: "stripe-go would send a random key and the secret could never be recovered", d: valid, key: ""},
		{name: "padded key", reason: "stripe-go trims the header but the metadata copy would differ", d: valid, key: " k "},
		{name: "key too long", reason: "Stripe allows at most 255 characters", d: valid, key: strings.Repeat("k", 256)},
		{name: "no URL", reason: "url is required", d: providers.Desired{Events: []string{"*"}}, key: "k"},
		{name: "no events", reason: "enabled_events is required", d: providers.Desired{URL: "https://hooks.example.com/a"}, key: "k"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(t, w, http.StatusOK, endpoint("we_1", nil))
			})
			_, err := newClient(t, api.URL).Create(t.Context(), tc.d, tc.key)
			if got := providers.KindOf(err); err == nil || got != providers.Permanent {
				t.Errorf("Create error = %v, want Permanent (reason: %s)", err, tc.reason)
			}
			if n := len(api.requests()); n != 0 {
				t.Errorf("sent %d requests, want none", n)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	cases := []struct {
		name     string
		reason   string
		desired  providers.Desired
		wantForm url.Values
	}{
		{
			name:   "clear description and re-enable",
			reason: `description "" clears it and disabled=false must be sent explicitly, or neither changes`,
			desired: providers.Desired{
				URL: "https://hooks.example.com/b", Events: []string{"*"}, Owner: owner,
			},
			wantForm: url.Values{
				"url":                            {"https://hooks.example.com/b"},
				"enabled_events[0]":              {"*"},
				"description":                    {""},
				"disabled":                       {"false"},
				"metadata[hookwarden_cluster]":   {"prod-eu"},
				"metadata[hookwarden_namespace]": {"payments"},
				"metadata[hookwarden_name]":      {"checkout"},
				"metadata[hookwarden_uid]":       {"6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b"},
			},
		},
		{
			name:   "disable with partial owner",
			reason: `an owner field that became empty is sent as "" so Stripe unsets that key`,
			desired: providers.Desired{
				URL: "https://hooks.example.com/b", Events: []string{"charge.succeeded"}, Description: "d",
				Disabled: true, Owner: providers.Owner{Namespace: "ns", Name: "n", UID: "u"},
			},
			wantForm: url.Values{
				"url":                            {"https://hooks.example.com/b"},
				"enabled_events[0]":              {"charge.succeeded"},
				"description":                    {"d"},
				"disabled":                       {"true"},
				"metadata[hookwarden_cluster]":   {""},
				"metadata[hookwarden_namespace]": {"ns"},
				"metadata[hookwarden_name]":      {"n"},
				"metadata[hookwarden_uid]":       {"u"},
			},
		},
		{
			name:   "zero owner leaves the marker alone",
			reason: "a caller that does not know the owner must not strip the marker and orphan the endpoint",
			desired: providers.Desired{
				URL: "https://hooks.example.com/b", Events: []string{"*"},
			},
			wantForm: url.Values{
				"url":               {"https://hooks.example.com/b"},
				"enabled_events[0]": {"*"},
				"description":       {""},
				"disabled":          {"false"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Stripe merges metadata on update, so the stored create key survives.
			stored := stripe.MarkerMetadata(owner, "uid-gen1-create")
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(t, w, http.StatusOK, endpoint("we_9", stored))
			})
			got, err := newClient(t, api.URL).Update(t.Context(), "we_9", tc.desired)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			reqs := api.requests()
			if len(reqs) != 1 {
				t.Fatalf("sent %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodPost || r.Path != "/v1/webhook_endpoints/we_9" {
				t.Errorf("request %s %s, want POST /v1/webhook_endpoints/we_9", r.Method, r.Path)
			}
			// No api_version, connect or hookwarden_create_key: the exact form proves their absence.
			if diff := cmp.Diff(tc.wantForm, r.Form); diff != "" {
				t.Errorf("update params (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
			if r.IdempotencyKey == "" {
				t.Errorf("update sent no Idempotency-Key")
			}
			if got.Owner != owner || got.CreateKey != "uid-gen1-create" {
				t.Errorf("Update decoded owner %+v, create key %q; want the stored marker", got.Owner, got.CreateKey)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	cases := []struct {
		name    string
		reason  string
		status  int
		body    any
		wantErr bool
	}{
		{name: "deleted", reason: "the normal case", status: 200, body: map[string]any{"id": "we_1", "object": "webhook_endpoint", "deleted": true}},
		{name: "already gone", reason: "Delete is idempotent: a 404 means the goal is reached", status: 404, body: stripeError("invalid_request_error", "resource_missing", "No such webhook endpoint: 'we_1'")},
		{name: "server error", reason: "a 5xx must be retried, not mistaken for success", status: 500, body: stripeError("api_error", "", "boom"), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(t, w, tc.status, tc.body)
			})
			err := newClient(t, api.URL).Delete(t.Context(), "we_1")
			if (err != nil) != tc.wantErr {
				t.Errorf("Delete error = %v, want error %v (reason: %s)", err, tc.wantErr, tc.reason)
			}
			reqs := api.requests()
			if len(reqs) != 1 || reqs[0].Method != http.MethodDelete || reqs[0].Path != "/v1/webhook_endpoints/we_1" {
				t.Fatalf("requests %+v, want one DELETE /v1/webhook_endpoints/we_1", reqs)
			}
			if reqs[0].IdempotencyKey == "" {
				t.Errorf("DELETE sent no Idempotency-Key (stripe-go omits it when params are nil)")
			}
		})
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	cases := []struct {
		name      string
		reason    string
		owner     providers.Owner
		createKey string
		wantMD    map[string]string
	}{
		{
			name: "full marker", reason: "the keys are stored in Stripe accounts and must never change",
			owner: owner, createKey: "k1",
			wantMD: map[string]string{
				"hookwarden_cluster": "prod-eu", "hookwarden_namespace": "payments", "hookwarden_name": "checkout",
				"hookwarden_uid": "6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b", "hookwarden_create_key": "k1",
			},
		},
		{
			name: "no cluster, no key", reason: "empty fields are left out rather than stored as empty strings",
			owner:  providers.Owner{Namespace: "ns", Name: "n", UID: "u"},
			wantMD: map[string]string{"hookwarden_namespace": "ns", "hookwarden_name": "n", "hookwarden_uid": "u"},
		},
		{
			name: "unmarked", reason: "an endpoint created by someone else decodes to a zero owner",
			wantMD: map[string]string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := stripe.MarkerMetadata(tc.owner, tc.createKey)
			if diff := cmp.Diff(tc.wantMD, md); diff != "" {
				t.Errorf("MarkerMetadata (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
			// Someone else's metadata next to ours must not disturb decoding.
			md["team"] = "billing"
			gotOwner, gotKey := stripe.OwnerFromMetadata(md)
			if diff := cmp.Diff(tc.owner, gotOwner); diff != "" {
				t.Errorf("OwnerFromMetadata owner (-want +got):\n%s", diff)
			}
			if gotKey != tc.createKey {
				t.Errorf("OwnerFromMetadata key = %q, want %q", gotKey, tc.createKey)
			}
		})
	}

	t.Run("through the API", func(t *testing.T) {
		// What Create sends is what List decodes, when the API stores metadata as sent.
		var (
			mu     sync.Mutex
			stored map[string]string
		)
		api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method == http.MethodPost {
				stored = map[string]string{}
				for k, v := range r.PostForm {
					if name, ok := strings.CutPrefix(k, "metadata["); ok {
						stored[strings.TrimSuffix(name, "]")] = v[0]
					}
				}
				writeJSON(t, w, http.StatusOK, endpoint("we_1", stored))
				return
			}
			writeJSON(t, w, http.StatusOK, map[string]any{"object": "list", "has_more": false, "data": []any{endpoint("we_1", stored)}})
		})
		c := newClient(t, api.URL)
		d := providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"*"}, Owner: owner}
		if _, err := c.Create(t.Context(), d, "uid-gen7-create"); err != nil {
			t.Fatalf("Create: %v", err)
		}
		regs, err := c.List(t.Context())
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(regs) != 1 || regs[0].Owner != owner || regs[0].CreateKey != "uid-gen7-create" {
			t.Errorf("List = %+v, want one registration with owner %+v and create key uid-gen7-create", regs, owner)
		}
	})
}

func TestErrorClassification(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		status int
		header map[string]string
		body   any
		// down points the client at a closed port; hang makes the server outlive the timeout.
		down, hang bool
		want       *providers.Error
		// anyMessage is set where the message is Go's network error text, not Stripe's.
		anyMessage bool
	}{
		{
			name: "429 rate_limit with Retry-After", reason: "the reconciler must wait what Stripe asks",
			status: 429, header: map[string]string{"Retry-After": "7", "Request-Id": "req_1"},
			body: stripeError("invalid_request_error", "rate_limit", "Too many requests"),
			want: &providers.Error{Kind: providers.RateLimited, StatusCode: 429, Message: "Too many requests", RetryAfter: 7 * time.Second, RequestID: "req_1"},
		},
		{
			name: "429 rate_limit without Retry-After", reason: "no header: the provider says nothing, and the reconciler's growing backoff decides",
			status: 429, body: stripeError("invalid_request_error", "rate_limit", "Too many requests"),
			want: &providers.Error{Kind: providers.RateLimited, StatusCode: 429, Message: "Too many requests"},
		},
		{
			name: "429 with unparsable Retry-After", reason: "garbage in the header counts as no header",
			status: 429, header: map[string]string{"Retry-After": "soon"},
			body: stripeError("invalid_request_error", "rate_limit", "Too many requests"),
			want: &providers.Error{Kind: providers.RateLimited, StatusCode: 429, Message: "Too many requests"},
		},
		{
			name: "429 lock_timeout", reason: "contention on the object: back off like any 429",
			status: 429, body: stripeError("invalid_request_error", "lock_timeout", "This object cannot be accessed right now"),
			want: &providers.Error{Kind: providers.RateLimited, StatusCode: 429, Message: "This object cannot be accessed right now"},
		},
		{
			name: "404 resource_missing", reason: "the reconciler recreates or forgets the endpoint",
			status: 404, header: map[string]string{"Request-Id": "req_2"},
			body: stripeError("invalid_request_error", "resource_missing", "No such webhook endpoint: 'we_1'"),
			want: &providers.Error{Kind: providers.NotFound, StatusCode: 404, Message: "No such webhook endpoint: 'we_1'", RequestID: "req_2"},
		},
		{
			name: "401", reason: "a revoked key must be reported as a credential problem",
			status: 401, body: stripeError("invalid_request_error", "", "Invalid API Key provided: sk_test_********************cdef"),
			want: &providers.Error{Kind: providers.Unauthorized, StatusCode: 401, Message: "Invalid API Key provided: sk_test_********************cdef"},
		},
		{
			name: "403", reason: "a restricted key without webhook permission is a credential problem too",
			status: 403, body: stripeError("invalid_request_error", "", "The provided key does not have the required permissions"),
			want: &providers.Error{Kind: providers.Unauthorized, StatusCode: 403, Message: "The provided key does not have the required permissions"},
		},
		{
			name: "400 generic", reason: "the user must see Stripe's own message to fix the spec",
			status: 400, header: map[string]string{"Request-Id": "req_3"},
			body: stripeError("invalid_request_error", "url_invalid", "Invalid URL: URL must be publicly accessible."),
			want: &providers.Error{Kind: providers.Permanent, StatusCode: 400, Message: "Invalid URL: URL must be publicly accessible.", RequestID: "req_3"},
		},
		{
			name: "400 endpoint limit", reason: "16 endpoints per account is a quota, not a spec error",
			status: 400, body: stripeError("invalid_request_error", "", "You have reached the maximum of 16 test webhook endpoints."),
			want: &providers.Error{Kind: providers.QuotaExceeded, StatusCode: 400, Message: "You have reached the maximum of 16 test webhook endpoints."},
		},
		{
			name: "400 echoing the key", reason: "even if an API echoed the key, the message must not carry it",
			status: 400, body: stripeError("invalid_request_error", "", "bad key "+testKey),
			want: &providers.Error{Kind: providers.Permanent, StatusCode: 400, Message: "bad key [redacted]"},
		},
		{
			name: "409 idempotency_key_in_use", reason: "the same call succeeds once the concurrent one finishes",
			status: 409, body: stripeError("invalid_request_error", "idempotency_key_in_use", "There is currently another in-progress request using this Idempotent Key"),
			want: &providers.Error{Kind: providers.Transient, StatusCode: 409, Message: "There is currently another in-progress request using this Idempotent Key"},
		},
		{
			name: "500", reason: "Stripe outages are retried with backoff",
			status: 500, body: stripeError("api_error", "", "An unknown error occurred"),
			want: &providers.Error{Kind: providers.Transient, StatusCode: 500, Message: "An unknown error occurred"},
		},
		{
			name: "502 from a proxy", reason: "a non-JSON error page is still transient",
			status: 502, body: "<html>Bad Gateway</html>", anyMessage: true,
			want: &providers.Error{Kind: providers.Transient},
		},
		{
			name: "connection refused", reason: "network errors are transient",
			down: true, anyMessage: true,
			want: &providers.Error{Kind: providers.Transient},
		},
		{
			name: "timeout", reason: "a hung API must end within the configured timeout, as a transient error",
			hang: true, anyMessage: true,
			want: &providers.Error{Kind: providers.Transient},
		},
	}
	ops := []struct {
		name string
		call func(context.Context, *stripe.Client) error
	}{
		{"List", func(ctx context.Context, c *stripe.Client) error { _, err := c.List(ctx); return err }},
		{"Create", func(ctx context.Context, c *stripe.Client) error {
			_, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"*"}, Owner: owner}, "k")
			return err
		}},
		{"Update", func(ctx context.Context, c *stripe.Client) error {
			_, err := c.Update(ctx, "we_1", providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"*"}})
			return err
		}},
		{"Delete", func(ctx context.Context, c *stripe.Client) error { return c.Delete(ctx, "we_1") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.hang {
					select {
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				if s, ok := tc.body.(string); ok {
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(s))
					return
				}
				writeJSON(t, w, tc.status, tc.body)
			})
			t.Cleanup(func() { close(release) }) // runs before the server's Close
			apiURL := api.URL
			if tc.down {
				apiURL = "http://" + closedAddr(t)
			}
			timeout := 5 * time.Second
			if tc.hang {
				timeout = 100 * time.Millisecond
			}
			c, err := stripe.New(providers.Config{APIURL: apiURL, Credential: testKey, Timeout: timeout})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			for _, op := range ops {
				err := op.call(t.Context(), c)
				if op.name == "Delete" && tc.want.Kind == providers.NotFound {
					if err != nil {
						t.Errorf("Delete = %v, want nil: a missing endpoint is already deleted", err)
					}
					continue
				}
				var got *providers.Error
				if !errors.As(err, &got) {
					t.Fatalf("%s error = %v (%T), want *providers.Error", op.name, err, err)
				}
				opts := []cmp.Option{}
				if tc.anyMessage {
					opts = append(opts, cmpopts.IgnoreFields(providers.Error{}, "Message", "StatusCode"))
					if got.Message == "" {
						t.Errorf("%s: empty message for %s", op.name, tc.name)
					}
					t.Logf("%s: %v", op.name, err)
				}
				if diff := cmp.Diff(tc.want, got, opts...); diff != "" {
					t.Errorf("%s error (-want +got):\n%s\nreason: %s", op.name, diff, tc.reason)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("%s error leaks the API key: %q", op.name, err.Error())
				}
			}
		})
	}
}

// closedAddr returns a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestNewRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		cfg    providers.Config
	}{
		{name: "no key", reason: "every call would fail with 401", cfg: providers.Config{}},
		{name: "key with newline", reason: "a key pasted into a Secret with a trailing newline fails every request", cfg: providers.Config{Credential: testKey + "\n"}},
		{name: "relative URL", reason: "requests would go nowhere", cfg: providers.Config{Credential: testKey, APIURL: "localhost:12111"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := stripe.New(tc.cfg)
			if err == nil || c != nil {
				t.Fatalf("New = %v, %v; want an error (reason: %s)", c, err, tc.reason)
			}
			if providers.KindOf(err) != providers.Permanent {
				t.Errorf("New error kind = %v, want Permanent", providers.KindOf(err))
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("New error leaks the API key: %q", err.Error())
			}
		})
	}
}

func TestFactory(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(t, w, http.StatusOK, map[string]any{"object": "list", "has_more": false, "data": []any{}})
	})
	c, err := stripe.Factory().New(providers.Config{APIURL: api.URL, Credential: testKey})
	if err != nil {
		t.Fatalf("Factory().New: %v", err)
	}
	if _, err := c.List(t.Context()); err != nil {
		t.Errorf("List through the factory-built client: %v", err)
	}
	// A failed build must be a nil interface, not a typed nil the caller would try to use.
	if c, err := stripe.Factory().New(providers.Config{}); err == nil || c != nil {
		t.Errorf("Factory().New(empty) = %v, %v; want nil client and an error", c, err)
	}
}

func TestRateByKeyMode(t *testing.T) {
	cases := []struct {
		key, reason string
		want        providers.Rate
	}{
		{"sk_test_abc", "test-mode secret key: sandbox limit, 25/s", providers.Rate{PerSecond: 25, Burst: 5}},
		{"rk_test_abc", "test-mode restricted key: sandbox limit", providers.Rate{PerSecond: 25, Burst: 5}},
		{"sk_live_abc", "live secret key: 100/s", providers.Rate{PerSecond: 100, Burst: 10}},
		{"rk_live_abc", "live restricted key: 100/s", providers.Rate{PerSecond: 100, Burst: 10}},
		{"whatever", "an unknown prefix gets the lower, test-mode limit", providers.Rate{PerSecond: 25, Burst: 5}},
	}
	for _, c := range cases {
		cl, err := stripe.New(providers.Config{Credential: c.key})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, cl.Capabilities().Rate); d != "" {
			t.Errorf("%s (%s): -want +got\n%s", c.key, c.reason, d)
		}
	}
}
