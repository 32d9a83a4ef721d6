package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/stripe"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// chaosProvider is one provider's fake binary as TestChaos drives it: its accounts, its
// endpoints in a common shape, and its request log read as creates and writes.
type chaosProvider interface {
	name() string
	pkg() string    // the fake's package, from cmd/manager
	args() []string // its flags besides -addr and the fault flags
	// account sets up account a at the fake (the credential, and what it may reach).
	account(ctx context.Context, f *fakeClient, a int) (chaosAccount, error)
	// foreign are the endpoints to seed on an account besides the unrelated ones: look-alikes
	// of the subscription whose URL is like.
	lookAlikes(like, name string) []endpoint
	seed(ctx context.Context, f *fakeClient, acct chaosAccount, e endpoint) (endpoint, error)
	endpoints(ctx context.Context, f *fakeClient, acct chaosAccount) ([]endpoint, error)
	requests(ctx context.Context, f *fakeClient) ([]request, error)
	providerSpec(acct chaosAccount, apiURL string) hookv1.ProviderSpec
	events() []string
	fullSize() (subs, accounts int) // with -chaos.full
}

// chaosAccount is one provider account: a credential Secret and what one list covers.
type chaosAccount struct {
	credential string // the API key or token
	secretName string // the credentials Secret
	secretKey  string
	target     string // GitHub: repos/<owner>/<repo>
}

// endpoint is a registration at a fake in the shape the checks need. raw is the fake's own
// record, compared whole for the foreign endpoints.
type endpoint struct {
	ID, URL, Secret, Description string
	Events                       []string
	Metadata                     map[string]string // Stripe only
	raw                          any
}

// request is one logged request as the figures count it.
type request struct {
	kind     string // list, create, update, delete, other
	id       string // the endpoint addressed, for update and delete
	applied  bool   // a create the fake carried out (whatever the client was told)
	replayed bool   // a create answered from the idempotency cache
}

func unrelated(a, i int, events []string) endpoint {
	return endpoint{URL: fmt.Sprintf("https://other-app.example/a%d/hook-%d", a, i), Events: events, Description: "someone else's"}
}

// --- Stripe

type stripeChaos struct{}

func (stripeChaos) name() string                   { return "stripe" }
func (stripeChaos) fullSize() (subs, accounts int) { return 200, 8 }
func (stripeChaos) pkg() string                    { return "../fakestripe" }

// The endpoint cap is raised: a duplicate must show as a count, not as a create refused.
func (stripeChaos) args() []string   { return []string{"-max-endpoints", "1000"} }
func (stripeChaos) events() []string { return []string{"invoice.paid", "charge.refunded"} }

func (stripeChaos) account(_ context.Context, _ *fakeClient, a int) (chaosAccount, error) {
	return chaosAccount{credential: fmt.Sprintf("sk_test_chaos_%d_%08x", a, rand.Uint32()), secretName: fmt.Sprintf("stripe-%d", a), secretKey: "apiKey"}, nil
}

func (stripeChaos) lookAlikes(like, name string) []endpoint {
	return []endpoint{
		{URL: like + "/", Events: []string{"invoice.paid"}, Description: "near twin: trailing slash"},
		{URL: strings.Replace(like, "https://", "http://", 1), Events: []string{"invoice.paid"}, Description: "near twin: http"},
		// Same namespace and name in another cluster, at its own URL: never stale to us.
		{URL: strings.Replace(like, "hooks.chaos.example", "hooks.other-cluster.example", 1), Events: []string{"invoice.paid", "charge.refunded"}, Description: "another cluster's",
			Metadata: stripe.MarkerMetadata(providers.Owner{Cluster: "other-cluster", Namespace: chaosNamespace, Name: name, UID: "0000"}, "hookwarden-create-other")},
	}
}

func (stripeChaos) seed(ctx context.Context, f *fakeClient, acct chaosAccount, e endpoint) (endpoint, error) {
	var out stripefake.Endpoint
	in := stripefake.Endpoint{URL: e.URL, EnabledEvents: e.Events, Description: e.Description, Metadata: e.Metadata}
	if err := f.do(ctx, http.MethodPost, "/_fake/endpoints?key="+url.QueryEscape(acct.credential), in, &out); err != nil {
		return endpoint{}, err
	}
	return stripeEndpoint(out), nil
}

func (stripeChaos) endpoints(ctx context.Context, f *fakeClient, acct chaosAccount) ([]endpoint, error) {
	var eps []stripefake.Endpoint
	if err := f.do(ctx, http.MethodGet, "/_fake/endpoints?key="+url.QueryEscape(acct.credential), nil, &eps); err != nil {
		return nil, err
	}
	out := make([]endpoint, len(eps))
	for i, e := range eps {
		out[i] = stripeEndpoint(e)
	}
	return out, nil
}

func stripeEndpoint(e stripefake.Endpoint) endpoint {
	return endpoint{ID: e.ID, URL: e.URL, Secret: e.Secret, Description: e.Description, Events: e.EnabledEvents, Metadata: e.Metadata, raw: e}
}

const stripeEndpoints = "/v1/webhook_endpoints"

func (stripeChaos) requests(ctx context.Context, f *fakeClient) ([]request, error) {
	var reqs []stripefake.Request
	if err := f.do(ctx, http.MethodGet, "/_fake/requests", nil, &reqs); err != nil {
		return nil, err
	}
	out := make([]request, len(reqs))
	for i, r := range reqs {
		id, byID := strings.CutPrefix(r.Path, stripeEndpoints+"/")
		switch {
		case r.Path == stripeEndpoints && r.Method == http.MethodGet:
			out[i] = request{kind: "list"}
		case r.Path == stripeEndpoints && r.Method == http.MethodPost:
			out[i] = request{kind: "create", replayed: r.Replayed,
				applied: !r.Replayed && (r.Status == http.StatusOK || strings.HasSuffix(r.Chaos, "after apply"))}
		case byID && r.Method == http.MethodPost:
			out[i] = request{kind: "update", id: id}
		case byID && r.Method == http.MethodDelete:
			out[i] = request{kind: "delete", id: id}
		default:
			out[i] = request{kind: "other"}
		}
	}
	return out, nil
}

func (stripeChaos) providerSpec(acct chaosAccount, apiURL string) hookv1.ProviderSpec {
	return hookv1.ProviderSpec{Type: hookv1.ProviderStripe, APIURL: apiURL,
		CredentialsRef: hookv1.SecretKeySelector{Name: acct.secretName, Key: acct.secretKey}}
}

// --- GitHub

type githubChaos struct{}

func (githubChaos) name() string                   { return "github" }
func (githubChaos) fullSize() (subs, accounts int) { return 100, 4 }
func (githubChaos) pkg() string                    { return "../fakegithub" }

// No deliveries (the hooks' URLs are not on this machine); the per-event cap is raised so a
// duplicate shows as a count.
func (githubChaos) args() []string   { return []string{"-deliveries=false", "-hook-cap", "1000"} }
func (githubChaos) events() []string { return []string{"push", "pull_request"} }

func (githubChaos) account(ctx context.Context, f *fakeClient, a int) (chaosAccount, error) {
	acct := chaosAccount{credential: fmt.Sprintf("ghp_chaos%d%08x", a, rand.Uint32()), secretName: fmt.Sprintf("github-%d", a), secretKey: "token", target: fmt.Sprintf("repos/chaos/r%d", a)}
	grant := map[string]any{"token": acct.credential, "targets": []string{acct.target}}
	return acct, f.do(ctx, http.MethodPost, "/_fake/grant", grant, nil)
}

func (githubChaos) lookAlikes(like, _ string) []endpoint {
	return []endpoint{
		{URL: like + "/", Events: []string{"push"}, Description: "near twin: trailing slash"},
		{URL: strings.Replace(like, "https://", "http://", 1), Events: []string{"push"}, Description: "near twin: http"},
		// GitHub keeps no marker: a hook for the same URL with other events cannot be proven
		// ours, and is reported, never adopted or pruned.
		{URL: like, Events: []string{"issues"}, Description: "same URL, other events"},
	}
}

func (githubChaos) seed(ctx context.Context, f *fakeClient, acct chaosAccount, e endpoint) (endpoint, error) {
	var out ghfake.Hook
	in := ghfake.Hook{Active: true, Events: e.Events, Config: ghfake.Config{URL: e.URL, ContentType: "json", Secret: "not-ours-" + strconv.Itoa(rand.Int())}}
	if err := f.do(ctx, http.MethodPost, "/_fake/hooks?target="+url.QueryEscape(acct.target), in, &out); err != nil {
		return endpoint{}, err
	}
	return githubEndpoint(out, e.Description), nil
}

func (githubChaos) endpoints(ctx context.Context, f *fakeClient, acct chaosAccount) ([]endpoint, error) {
	var hooks []ghfake.Hook
	if err := f.do(ctx, http.MethodGet, "/_fake/hooks?target="+url.QueryEscape(acct.target), nil, &hooks); err != nil {
		return nil, err
	}
	out := make([]endpoint, len(hooks))
	for i, h := range hooks {
		out[i] = githubEndpoint(h, "")
	}
	return out, nil
}

// githubEndpoint: GitHub hooks have no description; the seeded ones keep the test's for its
// messages.
func githubEndpoint(h ghfake.Hook, description string) endpoint {
	return endpoint{ID: strconv.FormatInt(h.ID, 10), URL: h.Config.URL, Secret: h.Config.Secret, Description: description, Events: h.Events, raw: h}
}

func (githubChaos) requests(ctx context.Context, f *fakeClient) ([]request, error) {
	var reqs []ghfake.Request
	if err := f.do(ctx, http.MethodGet, "/_fake/requests", nil, &reqs); err != nil {
		return nil, err
	}
	out := make([]request, len(reqs))
	for i, r := range reqs {
		id := r.Path[strings.LastIndex(r.Path, "/")+1:]
		switch r.Op {
		case ghfake.OpList:
			out[i] = request{kind: "list"}
		case ghfake.OpCreate:
			out[i] = request{kind: "create", applied: r.Status == http.StatusCreated || strings.HasSuffix(r.Chaos, "after apply")}
		case ghfake.OpUpdate:
			out[i] = request{kind: "update", id: id}
		case ghfake.OpDelete:
			out[i] = request{kind: "delete", id: id}
		default:
			out[i] = request{kind: "other"}
		}
	}
	return out, nil
}

func (githubChaos) providerSpec(acct chaosAccount, apiURL string) hookv1.ProviderSpec {
	parts := strings.Split(acct.target, "/")
	return hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, APIURL: apiURL,
		CredentialsRef: hookv1.SecretKeySelector{Name: acct.secretName, Key: acct.secretKey},
		GitHub:         &hookv1.GitHubTarget{Owner: parts[1], Repository: parts[2]}}
}
