package controllers

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/account/accounttest"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/svix"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/zendesk"
)

// The behaviour suite runs every shipped REST profile (config/samples/rest) through the fake of
// the API it describes. The fakes are written from the APIs' documentation, not from the
// profiles, so a profile that misreads its API fails here.

func restClient(t *testing.T, profile []byte, apiURL string, params map[string]string, credential string) providers.Client {
	t.Helper()
	c, err := rest.Factory().New(providers.Config{APIURL: apiURL, Target: rest.Target(params), Settings: profile, Credential: credential, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// restAccount is one account on one REST fake.
type restAccount struct {
	client   providers.Client
	pageSize int
	seed     func(url string, events []string) string
	ids      func() []string
	core     *core.Core
}

func (a *restAccount) Client() providers.Client { return a.client }
func (a *restAccount) PageSize() int            { return a.pageSize }
func (a *restAccount) Seed(t *testing.T, url string, events []string) string {
	return a.seed(url, events)
}
func (a *restAccount) IDs(t *testing.T) []string { return a.ids() }
func (a *restAccount) RateLimitNext(t *testing.T, retryAfter time.Duration) {
	a.core.Inject(core.RateLimit(retryAfter, `{"error":"rate limited"}`))
}

func TestBehaviourRESTGitLab(t *testing.T) {
	srv := gitlab.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	profile := accounttest.RestProfile(t, "gitlab-project-hooks")
	var n atomic.Int64
	runBehaviourSuite(t, behaviourProvider{
		name:   "rest/gitlab",
		events: []string{"push", "merge_requests", "pipeline"},
		newAccount: func(t *testing.T) behaviourAccount {
			project := fmt.Sprint(1000 + n.Add(1))
			srv.AddProject(project, "group/p"+project)
			flags := map[string]string{"push": "push_events", "merge_requests": "merge_requests_events", "pipeline": "pipeline_events"}
			return &restAccount{
				client:   restClient(t, profile, base+"/api/v4", map[string]string{"project": "group/p" + project}, "glpat-behaviour"),
				pageSize: 100,
				core:     &srv.Core,
				seed: func(url string, events []string) string {
					h := gitlab.Hook{URL: url, Token: "made-by-hand", Flags: map[string]bool{}}
					for _, e := range events {
						h.Flags[flags[e]] = true
					}
					return fmt.Sprint(srv.Seed(project, h))
				},
				ids: func() []string {
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
	profile := accounttest.RestProfile(t, "zendesk-webhooks")
	var n atomic.Int64
	runBehaviourSuite(t, behaviourProvider{
		name:   "rest/zendesk",
		events: []string{"zen:event-type:ticket.created", "zen:event-type:user.created", "zen:event-type:organization.created"},
		newAccount: func(t *testing.T) behaviourAccount {
			email := fmt.Sprintf("agent%d@acme.example", n.Add(1))
			return &restAccount{
				client:   restClient(t, profile, base+"/api/v2", map[string]string{"subdomain": "acme", "email": email}, "zd-token"),
				pageSize: 100,
				core:     &srv.Core,
				seed: func(url string, events []string) string {
					return srv.Seed(email, zendesk.Webhook{Endpoint: url, Subscriptions: events})
				},
				ids: func() []string {
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
	profile := accounttest.RestProfile(t, "pagerduty-webhook-subscriptions")
	var n atomic.Int64
	runBehaviourSuite(t, behaviourProvider{
		name:   "rest/pagerduty",
		events: []string{"incident.triggered", "incident.acknowledged", "incident.resolved"},
		newAccount: func(t *testing.T) behaviourAccount {
			key := fmt.Sprintf("pd-key-%d", n.Add(1))
			return &restAccount{
				client:   restClient(t, profile, base, nil, key),
				pageSize: 100,
				core:     &srv.Core,
				seed: func(url string, events []string) string {
					return srv.Seed(key, pagerduty.Subscription{URL: url, Events: events})
				},
				ids: func() []string {
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
	profile := accounttest.RestProfile(t, "svix-endpoints")
	var n atomic.Int64
	runBehaviourSuite(t, behaviourProvider{
		name:   "rest/svix",
		events: []string{"invoice.paid", "invoice.voided", "customer.created"},
		newAccount: func(t *testing.T) behaviourAccount {
			app := fmt.Sprintf("app_%d", n.Add(1))
			srv.AddApp("sk-behaviour", app)
			return &restAccount{
				client:   restClient(t, profile, base, map[string]string{"app": app}, "sk-behaviour"),
				pageSize: 250,
				core:     &srv.Core,
				seed: func(url string, events []string) string {
					return srv.Seed("sk-behaviour", app, svix.Endpoint{URL: url, FilterTypes: events})
				},
				ids: func() []string {
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
