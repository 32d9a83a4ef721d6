package rest_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/svix"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/zendesk"
)

// The behaviour suite runs the shipped REST profiles (config/samples/rest) through the fake of
// the API each describes. The fakes are written from the APIs' documentation, not from the
// profiles, so a profile that misreads its API fails here. Bitbucket's harness is in
// bitbucket_behaviour_test.go.

// TestMain prints the behaviour suite's matrix (case × provider) after the package's tests.
func TestMain(m *testing.M) { providerstest.BehaviourMain(m) }

// behaviourClient is a client of the shipped profile at apiURL, for the target params.
func behaviourClient(t *testing.T, profile, apiURL string, params map[string]string, credential string) providers.Client {
	t.Helper()
	c, err := rest.Factory().New(providers.Config{APIURL: apiURL, Target: rest.Target(params), Settings: sampleProfile(t, profile), Credential: credential, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rateLimit makes the fake's next request fail with a 429, stating retryAfter when it is not
// zero.
func rateLimit(c *core.Core) func(retryAfter time.Duration) {
	return func(retryAfter time.Duration) { c.Inject(core.RateLimit(retryAfter, `{"error":"rate limited"}`)) }
}

func TestBehaviourRESTGitLab(t *testing.T) {
	srv := gitlab.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	providerstest.RunBehaviour(t, providerstest.Provider{
		Name:   "rest/gitlab",
		Events: []string{"push", "merge_requests", "pipeline"},
		NewAccount: func(t *testing.T) providerstest.Account {
			project := fmt.Sprint(1000 + n.Add(1))
			srv.AddProject(project, "group/p"+project)
			flags := map[string]string{"push": "push_events", "merge_requests": "merge_requests_events", "pipeline": "pipeline_events"}
			return &providerstest.FuncAccount{
				C:             behaviourClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": "group/p" + project}, "glpat-behaviour"),
				Page:          100,
				RateLimitFunc: rateLimit(&srv.Core),
				SeedFunc: func(url string, events []string) string {
					h := gitlab.Hook{URL: url, Token: "made-by-hand", Flags: map[string]bool{}}
					for _, e := range events {
						h.Flags[flags[e]] = true
					}
					return fmt.Sprint(srv.Seed(project, h))
				},
				IDsFunc: func() []string {
					var ids []string
					for _, h := range srv.Hooks(project) {
						ids = append(ids, fmt.Sprint(h.ID))
					}
					return ids
				},
			}
		},
	})
}

func TestBehaviourRESTZendesk(t *testing.T) {
	srv := zendesk.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	providerstest.RunBehaviour(t, providerstest.Provider{
		Name:   "rest/zendesk",
		Events: []string{"zen:event-type:ticket.created", "zen:event-type:user.created", "zen:event-type:organization.created"},
		NewAccount: func(t *testing.T) providerstest.Account {
			email := fmt.Sprintf("agent%d@acme.example", n.Add(1))
			return &providerstest.FuncAccount{
				C:             behaviourClient(t, "zendesk-webhooks", base+"/api/v2", map[string]string{"subdomain": "acme", "email": email}, "zd-token"),
				Page:          100,
				RateLimitFunc: rateLimit(&srv.Core),
				SeedFunc: func(url string, events []string) string {
					return srv.Seed(email, zendesk.Webhook{Endpoint: url, Subscriptions: events})
				},
				IDsFunc: func() []string {
					var ids []string
					for _, h := range srv.Webhooks(email) {
						ids = append(ids, h.ID)
					}
					return ids
				},
			}
		},
	})
}

func TestBehaviourRESTPagerDuty(t *testing.T) {
	srv := pagerduty.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	providerstest.RunBehaviour(t, providerstest.Provider{
		Name:   "rest/pagerduty",
		Events: []string{"incident.triggered", "incident.acknowledged", "incident.resolved"},
		NewAccount: func(t *testing.T) providerstest.Account {
			key := fmt.Sprintf("pd-key-%d", n.Add(1))
			return &providerstest.FuncAccount{
				C:             behaviourClient(t, "pagerduty-webhook-subscriptions", base, nil, key),
				Page:          100,
				RateLimitFunc: rateLimit(&srv.Core),
				SeedFunc: func(url string, events []string) string {
					return srv.Seed(key, pagerduty.Subscription{URL: url, Events: events})
				},
				IDsFunc: func() []string {
					var ids []string
					for _, s := range srv.Subscriptions(key) {
						ids = append(ids, s.ID)
					}
					return ids
				},
			}
		},
	})
}

func TestBehaviourRESTSvix(t *testing.T) {
	srv := svix.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	providerstest.RunBehaviour(t, providerstest.Provider{
		Name:   "rest/svix",
		Events: []string{"invoice.paid", "invoice.voided", "customer.created"},
		NewAccount: func(t *testing.T) providerstest.Account {
			app := fmt.Sprintf("app_%d", n.Add(1))
			srv.AddApp("sk-behaviour", app)
			return &providerstest.FuncAccount{
				C:             behaviourClient(t, "svix-endpoints", base, map[string]string{"app": app}, "sk-behaviour"),
				Page:          250,
				RateLimitFunc: rateLimit(&srv.Core),
				SeedFunc: func(url string, events []string) string {
					return srv.Seed("sk-behaviour", app, svix.Endpoint{URL: url, FilterTypes: events})
				},
				IDsFunc: func() []string {
					var ids []string
					for _, e := range srv.Endpoints("sk-behaviour", app) {
						ids = append(ids, e.ID)
					}
					return ids
				},
			}
		},
	})
}
