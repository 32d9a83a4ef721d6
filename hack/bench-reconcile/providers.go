package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	githubfake "github.com/hookwarden/hookwarden/providers/github/fake"
	gitlabfake "github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// clientPageSize is the page every provider client asks for (Stripe limit=100, GitHub
// per_page=100, the GitLab profile's per_page 100).
const clientPageSize = 100

// lookScope is how many looks at missed events a steady resync wave makes.
type lookScope int

const (
	// noLooks: the provider reports delivery health where the list shows it (GitHub).
	noLooks lookScope = iota
	// looksPerAccount: one shared listing of the account's undelivered events (Stripe).
	looksPerAccount
	// looksPerSubscription: one page of each hook's failure log (GitLab, which neither
	// retries nor reports a failure short of disabling the hook).
	looksPerSubscription
)

// per is how many looks an account of subs subscriptions makes in a wave.
func (l lookScope) per(subs int) int {
	switch l {
	case looksPerAccount:
		return 1
	case looksPerSubscription:
		return subs
	}
	return 0
}

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
	// look is the route of the looks at missed events a resync wave makes, and how many
	// (lookScope): Stripe's one shared /v1/events listing per account, GitLab's one failure
	// log page per hook, none on GitHub (it reports delivery health in its list).
	look() (fakeapi.Route, lookScope)
	// boundRequests are the fewest requests the meter limits that a cold start of n
	// subscriptions must make with one credential: the list of the empty account (where lists
	// are limited) and per subscription its create, and on GitHub the ping after it that
	// status.ping reports.
	boundRequests(n int) int
	// limit is how the fake is metered: the provider's limit for one credential.
	limit() fakeapi.MeterOptions
	// objects are what the subscriptions refer to besides their credential Secret (GitLab's
	// profile ConfigMap), read from profiles (setup.Profiles) and created before them.
	objects(profiles string) ([]client.Object, error)
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

func (b *stripeBench) look() (fakeapi.Route, lookScope) {
	return fakeapi.Route{Method: http.MethodGet, Pattern: "/v1/events"}, looksPerAccount
}

func (b *stripeBench) boundRequests(n int) int { return 1 + n }

func (b *stripeBench) objects(string) ([]client.Object, error) { return nil, nil }

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

func (b *githubBench) look() (fakeapi.Route, lookScope) { return fakeapi.Route{}, noLooks }

func (b *githubBench) boundRequests(n int) int { return 1 + 2*n }

func (b *githubBench) objects(string) ([]client.Object, error) { return nil, nil }

func (b *githubBench) limit() fakeapi.MeterOptions {
	return fakeapi.MeterOptions{Rate: 80.0 / 60, Burst: 80, Latency: 20 * time.Millisecond}
}

// GitLab: one project per account, each with a token of its own, a Maintainer of it; the
// subscriptions use the shipped profile (config/samples/rest/gitlab-project-hooks.profile.yaml)
// through a ConfigMap, as its sample subscription does. The meter is GitLab's hook creation
// limit, 5 a minute per project and user (REST-PROVIDERS.md §1.6; 429 with Retry-After: 60),
// as a bucket of 5 refilled one every 12 s (GitLab counts in fixed one-minute windows: as many
// at once, and as many a minute). Lists and looks are not limited: GitLab.com's 2,000
// authenticated API requests a minute per user is far above what one project's wave sends (a
// page per 100 hooks and a look per hook, at most a few hundred a minute at the bench's 20 s
// resync). 20 ms a request.
type gitlabBench struct{ srv *gitlabfake.Server }

const (
	gitlabProfileConfigMap = "hookwarden-rest-profiles"
	gitlabProfileKey       = "gitlab-project-hooks.yaml"
	gitlabHooks            = "/api/v4/projects/{id}/hooks"
)

func (b *gitlabBench) start(m *fakeapi.Meter, pageCap, accounts, perAccount int) (string, func()) {
	b.srv = gitlabfake.New(gitlabfake.WithMeter(m), gitlabfake.WithPageSize(pageCap))
	for a := range accounts {
		b.srv.AddProject(b.project(a), fmt.Sprintf("bench/project-%d", a))
		b.srv.SetRole(b.credential(a), false, b.project(a), gitlabfake.Maintainer)
	}
	return b.srv.Start()
}

func (b *gitlabBench) credential(acct int) string { return fmt.Sprintf("glpat-bench%09d", acct) }

func (b *gitlabBench) project(acct int) string { return strconv.Itoa(1000 + acct) }

func (b *gitlabBench) spec(acct int, baseURL, secret string) hookv1.ProviderSpec {
	return hookv1.ProviderSpec{Type: hookv1.ProviderREST, APIURL: baseURL + "/api/v4", CredentialsRef: hookv1.SecretKeySelector{Name: secret, Key: "token"},
		REST: &hookv1.RESTProvider{ProfileRef: &hookv1.ConfigMapKeySelector{Name: gitlabProfileConfigMap, Key: gitlabProfileKey}, Parameters: map[string]string{"project": b.project(acct)}}}
}

func (b *gitlabBench) held(acct int) []string {
	var urls []string
	for _, h := range b.srv.Hooks(b.project(acct)) {
		urls = append(urls, h.URL)
	}
	return urls
}

func (b *gitlabBench) routes() (list, create fakeapi.Route) {
	return fakeapi.Route{Method: http.MethodGet, Pattern: gitlabHooks}, fakeapi.Route{Method: http.MethodPost, Pattern: gitlabHooks}
}

// look: the failure log's first page of each hook (status=client_failure,server_failure). The
// succeeded listing a run makes when failures are found shares the route, so one would count
// as a second look.
func (b *gitlabBench) look() (fakeapi.Route, lookScope) {
	return fakeapi.Route{Method: http.MethodGet, Pattern: gitlabHooks + "/{hook_id}/events"}, looksPerSubscription
}

// boundRequests: the creates alone, the only requests the meter limits.
func (b *gitlabBench) boundRequests(n int) int { return n }

func (b *gitlabBench) limit() fakeapi.MeterOptions {
	_, create := b.routes()
	return fakeapi.MeterOptions{Rate: 5.0 / 60, Burst: 5, Latency: 20 * time.Millisecond, Routes: []fakeapi.Route{create}}
}

func (b *gitlabBench) objects(profiles string) ([]client.Object, error) {
	profile, err := os.ReadFile(filepath.Join(profiles, "gitlab-project-hooks.profile.yaml"))
	if err != nil {
		return nil, err
	}
	return []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitlabProfileConfigMap},
		Data: map[string]string{gitlabProfileKey: string(profile)}}}, nil
}

func newFakeProvider(name string) (fakeProvider, error) {
	switch name {
	case "stripe":
		return &stripeBench{}, nil
	case "github":
		return &githubBench{}, nil
	case "gitlab":
		return &gitlabBench{}, nil
	}
	return nil, fmt.Errorf("provider %q: want stripe, github or gitlab", name)
}
