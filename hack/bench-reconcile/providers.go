package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	githubfake "github.com/hookwarden/hookwarden/providers/github/fake"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// clientPageSize is the page both provider clients ask for (Stripe limit=100, GitHub
// per_page=100).
const clientPageSize = 100

// fakeProvider is one provider's fake as the bench drives it: started with a meter, one
// credential per account, and read back to count what it holds.
type fakeProvider interface {
	// start serves the fake for accounts accounts of perAccount subscriptions each.
	start(m *fakeapi.Meter, pageCap, accounts, perAccount int) (baseURL string, stop func())
	credential(acct int) string
	spec(acct int, baseURL, secret string) hookv1.ProviderSpec
	// held returns the URLs of the registrations account acct holds.
	held(acct int) []string
	// routes are the meter's names of a list page and of a create.
	routes() (list, create fakeapi.Route)
	// look is the route of the one shared look at an account's missed events per resync
	// wave, where the provider keeps them account-wide (Stripe's /v1/events); ok false where
	// a healthy fleet needs no look (GitHub reports delivery health in its list).
	look() (route fakeapi.Route, ok bool)
	// perSubscription is what a new subscription costs at the provider: its create, and on
	// GitHub the ping after it that status.ping reports.
	perSubscription() int
	// limit is how the fake is metered: the provider's limit for one credential.
	limit() fakeapi.MeterOptions
}

// Stripe test mode: 25 operations per second per account (PROVIDERS.md §1.3), 20 ms a request.
type stripeBench struct{ srv *stripefake.Server }

func (b *stripeBench) start(m *fakeapi.Meter, pageCap, accounts, perAccount int) (string, func()) {
	b.srv = stripefake.New(stripefake.WithMeter(m), stripefake.WithPageSize(pageCap), stripefake.WithMaxEndpoints(max(perAccount, stripefake.DefaultMaxEndpoints)))
	return fakeapi.Start(b.srv)
}

func (b *stripeBench) credential(acct int) string { return fmt.Sprintf("sk_test_bench%04d", acct) }

func (b *stripeBench) spec(acct int, baseURL, secret string) hookv1.ProviderSpec {
	return hookv1.ProviderSpec{Type: hookv1.ProviderStripe, APIURL: baseURL, CredentialsRef: hookv1.SecretKeySelector{Name: secret, Key: "apiKey"}}
}

func (b *stripeBench) held(acct int) []string {
	var urls []string
	for _, e := range b.srv.Endpoints(b.credential(acct)) {
		urls = append(urls, e.URL)
	}
	return urls
}

func (b *stripeBench) routes() (list, create fakeapi.Route) {
	return fakeapi.Route{Method: http.MethodGet, Pattern: "/v1/webhook_endpoints"}, fakeapi.Route{Method: http.MethodPost, Pattern: "/v1/webhook_endpoints"}
}

func (b *stripeBench) look() (fakeapi.Route, bool) {
	return fakeapi.Route{Method: http.MethodGet, Pattern: "/v1/events"}, true
}

func (b *stripeBench) perSubscription() int { return 1 }

func (b *stripeBench) limit() fakeapi.MeterOptions {
	return fakeapi.MeterOptions{Rate: 25, Latency: 20 * time.Millisecond}
}

// GitHub: one token and one repository per account; its secondary limit of 80 content-creating
// requests a minute (PROVIDERS.md §2.2) metered as a bucket of one minute's worth, on top of
// the fake's hourly primary limit; 20 ms a request.
type githubBench struct{ srv *githubfake.Server }

func (b *githubBench) start(m *fakeapi.Meter, pageCap, accounts, perAccount int) (string, func()) {
	b.srv = githubfake.New(githubfake.WithMeter(m), githubfake.WithPageSize(pageCap), githubfake.WithHookCap(max(perAccount, githubfake.DefaultHookCap)))
	for a := range accounts {
		b.srv.Grant(b.credential(a), b.target(a))
	}
	return b.srv.Start()
}

func (b *githubBench) credential(acct int) string { return fmt.Sprintf("ghp_bench%031d", acct) }

func (b *githubBench) target(acct int) string { return fmt.Sprintf("repos/bench/repo-%d", acct) }

func (b *githubBench) spec(acct int, baseURL, secret string) hookv1.ProviderSpec {
	return hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, APIURL: baseURL, CredentialsRef: hookv1.SecretKeySelector{Name: secret, Key: "token"},
		GitHub: &hookv1.GitHubTarget{Owner: "bench", Repository: fmt.Sprintf("repo-%d", acct)}}
}

func (b *githubBench) held(acct int) []string {
	var urls []string
	for _, h := range b.srv.Hooks(b.target(acct)) {
		urls = append(urls, h.Config.URL)
	}
	return urls
}

func (b *githubBench) routes() (list, create fakeapi.Route) {
	const hooks = "/repos/{owner}/{repo}/hooks"
	return fakeapi.Route{Method: http.MethodGet, Pattern: hooks}, fakeapi.Route{Method: http.MethodPost, Pattern: hooks}
}

func (b *githubBench) look() (fakeapi.Route, bool) { return fakeapi.Route{}, false }

func (b *githubBench) perSubscription() int { return 2 }

func (b *githubBench) limit() fakeapi.MeterOptions {
	return fakeapi.MeterOptions{Rate: 80.0 / 60, Burst: 80, Latency: 20 * time.Millisecond}
}

func newFakeProvider(name string) (fakeProvider, error) {
	switch name {
	case "stripe":
		return &stripeBench{}, nil
	case "github":
		return &githubBench{}, nil
	}
	return nil, fmt.Errorf("provider %q: want stripe or github", name)
}
