package decide_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/account/accounttest"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
)

// The plan-level cases of the provider behaviour suite: what the plan makes of registrations as
// each shipped provider reads them back, with that provider's own Capabilities. That the
// provider reads them back so (one made through its client as it was made, marked where the
// provider has markers; one made by hand unmarked and fit) is the contract-level suite,
// providerstest.RunBehaviour, run by each provider's tests against its fake.

// TestMain prints the plan cases' matrix (case × provider) after the package's tests.
func TestMain(m *testing.M) { providerstest.BehaviourMain(m) }

// behaviourProvider is a shipped provider's client capabilities and three of its event names.
type behaviourProvider struct {
	name   string
	caps   providers.Capabilities
	events []string
}

// behaviourProviders are the providers the behaviour suite covers, with the capabilities their
// clients state (no request is made).
func behaviourProviders(t *testing.T) []behaviourProvider {
	t.Helper()
	githubCaps := func(target string) providers.Capabilities {
		c, err := github.New(providers.Config{Target: target, Credential: "ghp_behaviour"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Capabilities()
	}
	restCaps := func(profile string, params map[string]string) providers.Capabilities {
		c, err := rest.Factory().New(providers.Config{APIURL: "https://api.example.com", Target: rest.Target(params), Settings: accounttest.RestProfile(t, profile), Credential: "behaviour"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Capabilities()
	}
	return []behaviourProvider{
		{"stripe", decidetest.StripeCaps, []string{"invoice.paid", "checkout.session.completed", "charge.refunded"}},
		{"github-repository", githubCaps("repos/behaviour/shop"), []string{"push", "pull_request", "issues"}},
		{"github-organization", githubCaps("orgs/behaviour"), []string{"push", "pull_request", "issues"}},
		{"rest/gitlab", restCaps("gitlab-project-hooks", map[string]string{"project": "group/shop"}), []string{"push", "merge_requests", "pipeline"}},
		{"rest/zendesk", restCaps("zendesk-webhooks", map[string]string{"subdomain": "acme", "email": "agent@acme.example"}),
			[]string{"zen:event-type:ticket.created", "zen:event-type:user.created", "zen:event-type:organization.created"}},
		{"rest/pagerduty", restCaps("pagerduty-webhook-subscriptions", nil), []string{"incident.triggered", "incident.acknowledged", "incident.resolved"}},
		{"rest/svix", restCaps("svix-endpoints", map[string]string{"app": "app_1"}), []string{"invoice.paid", "invoice.voided", "customer.created"}},
		{"bitbucket-repository-hooks", restCaps("bitbucket-repository-hooks", map[string]string{"workspace": "acme", "repository": "shop"}),
			[]string{"repo:push", "pullrequest:created", "pullrequest:fulfilled"}},
		{"bitbucket-workspace-hooks", restCaps("bitbucket-workspace-hooks", map[string]string{"workspace": "acme"}),
			[]string{"repo:push", "pullrequest:created", "pullrequest:fulfilled"}},
	}
}

// desired is what the cases ask for at url (the first two events unless events are given).
func (p behaviourProvider) desired(url string, events ...string) providers.Desired {
	if len(events) == 0 {
		events = p.events[:2]
	}
	return providers.Desired{URL: url, Events: events, Description: "orders pipeline", Owner: providerstest.Owner, Secret: "behaviour-secret-0123456789abcdef"}
}

// made is a registration made through the client for d, as the provider lists it: its URL and
// events, the fields the provider has, and its owner where the provider stores markers.
func (p behaviourProvider) made(id string, minutesAfterT0 int, d providers.Desired) providers.Registration {
	r := providers.Registration{ID: id, URL: d.URL, Events: d.Events, Created: decidetest.T0.Add(time.Duration(minutesAfterT0) * time.Minute), Variant: p.caps.Variant}
	if p.caps.Has(providers.FieldDescription) {
		r.Description = d.Description
	}
	if p.caps.Has(providers.FieldDisabled) {
		r.Disabled = d.Disabled
	}
	if p.caps.Markers {
		r.Owner = d.Owner
	}
	return r
}

// byHand is a registration made in the provider's dashboard: its URL and events, unmarked.
func (p behaviourProvider) byHand(id string, minutesAfterT0 int, url string, events []string) providers.Registration {
	return providers.Registration{ID: id, URL: url, Events: events, Created: decidetest.T0.Add(time.Duration(minutesAfterT0) * time.Minute), Variant: p.caps.Variant}
}

// planFor plans d over observed as a reconcile under Adopt and Prune does, with recorded as the
// recorded id and held the ids whose secrets are held.
func (p behaviourProvider) planFor(d providers.Desired, observed []providers.Registration, recorded string, held ...string) decide.Plan {
	return decide.ComputePlan(decide.PlanInput{Desired: d, Observed: observed, Caps: p.caps, RecordedID: recorded, HeldSecrets: decidetest.HeldSet(held),
		Adoption: hookv1.AdoptionAdopt, Twins: hookv1.TwinsPrune})
}

// TestPlanBehaviour runs the behaviour suite's plan-level cases with every provider's
// capabilities.
//
//nolint:funlen // the suite's table of cases
func TestPlanBehaviour(t *testing.T) {
	for _, p := range behaviourProviders(t) {
		t.Run(p.name, func(t *testing.T) {
			run := func(name string, fn func(t *testing.T)) { providerstest.RunCase(t, p.name, name, fn) }

			run("created, then observed: kept with no drift", func(t *testing.T) {
				d := p.desired("https://hooks.example.com/b/create")
				r := p.made("created", 0, d)
				pl := p.planFor(d, []providers.Registration{r}, r.ID, r.ID)
				if pl.Keep == nil || pl.Keep.ID != r.ID || len(pl.Drift()) > 0 || (pl.Decision == decide.Create) {
					t.Errorf("plan after create = keep %v, drift %v, create %v; want keep %s, no drift", pl.Keep, pl.Drift(), (pl.Decision == decide.Create), r.ID)
				}
			})

			run("updated, then observed: kept with no drift", func(t *testing.T) {
				d := p.desired("https://hooks.example.com/b/update")
				d.Events = p.events[1:3]
				d.Disabled = true
				r := p.made("updated", 0, d)
				pl := p.planFor(d, []providers.Registration{r}, r.ID, r.ID)
				if pl.Keep == nil || pl.Keep.ID != r.ID || len(pl.Drift()) > 0 {
					t.Errorf("plan after update = keep %v, drift %v; want %s with no drift", pl.Keep, pl.Drift(), r.ID)
				}
			})

			run("twins are detected and only proven ones pruned", func(t *testing.T) {
				url := "https://hooks.example.com/b/twins"
				// Two of ours for one URL (disjoint events, which every provider accepts), and
				// one registration made by hand.
				first := p.made("first", 0, p.desired(url, p.events[0]))
				second := p.made("second", 1, p.desired(url, p.events[1]))
				byHand := p.byHand("by-hand", 2, url, p.events[2:3])
				pl := p.planFor(p.desired(url, p.events[0]), []providers.Registration{first, second, byHand}, first.ID, first.ID, second.ID)
				if pl.Keep == nil || pl.Keep.ID != first.ID {
					t.Fatalf("plan keeps %v; want the recorded %s", pl.Keep, first.ID)
				}
				pruned := map[string]bool{}
				for _, pa := range pl.Prunes() {
					pruned[pa.Registration.ID] = true
				}
				if !pruned[second.ID] {
					t.Errorf("the proven twin %s is not pruned (prune %v)", second.ID, pl.Prunes())
				}
				switch {
				case p.caps.Markers && !pruned[byHand.ID]:
					t.Errorf("an unmarked twin %s on a provider with markers is adoptable, so pruned as a twin; prune %v", byHand.ID, pl.Prunes())
				case !p.caps.Markers && pruned[byHand.ID]:
					t.Errorf("the hand-made hook %s cannot be proven ours and was pruned", byHand.ID)
				case !p.caps.Markers && !slices.ContainsFunc(pl.Unproven, func(r providers.Registration) bool { return r.ID == byHand.ID }):
					t.Errorf("the hand-made look-alike %s is not reported (unproven %v)", byHand.ID, pl.Unproven)
				}
			})

			run("ownership is proven, or adoption refused", func(t *testing.T) {
				url := "https://hooks.example.com/b/adopt"
				d := p.desired(url)
				byHand := p.byHand("by-hand", 0, url, d.Events)
				pl := p.planFor(d, []providers.Registration{byHand}, "")
				if pl.Keep == nil || pl.Keep.ID != byHand.ID || (pl.Decision == decide.Create) {
					t.Errorf("the only registration serving the spec, under Adopt: plan keeps %v (create %v); want %s adopted", pl.Keep, (pl.Decision == decide.Create), byHand.ID)
				} else if !pl.RecoversSecret() {
					t.Errorf("adopted %s without its secret, but the plan does not recover it", byHand.ID)
				}
				// A second look-alike: on a provider without markers adopting one would be a guess.
				other := p.byHand("other", 1, url, d.Events)
				observed := []providers.Registration{byHand, other}
				in := decide.PlanInput{Desired: d, Observed: observed, Caps: p.caps, Adoption: hookv1.AdoptionAdopt, Twins: hookv1.TwinsPrune}
				pl = decide.ComputePlan(in)
				if p.caps.Markers {
					// The kept one's secret is not held: where it cannot be recovered in place,
					// the round ends with a replacement, and the next round prunes what it
					// replaced.
					_, rounds := decide.PlanRounds(in)
					settled := rounds[len(rounds)-1]
					if settled.Keep == nil || len(settled.Prunes()) != len(observed)-1+replaced(settled) {
						t.Errorf("two unmarked registrations on a provider with markers: keep %v prune %v; want one kept, the others pruned", settled.Keep, settled.Prunes())
					}
				} else if pl.Conflict == "" || pl.Keep != nil || (pl.Decision == decide.Create) || len(pl.Prunes()) > 0 || !strings.Contains(pl.Conflict, other.ID) {
					t.Errorf("two unproven registrations: conflict %q keep %v create %v prune %v; want a conflict naming both, nothing done", pl.Conflict, pl.Keep, (pl.Decision == decide.Create), pl.Prunes())
				}
				pl = decide.ComputePlan(decide.PlanInput{Desired: d, Observed: observed, Caps: p.caps, Adoption: hookv1.AdoptionNever})
				if pl.Conflict == "" || (pl.Decision == decide.Create) || pl.Keep != nil {
					t.Errorf("under Never: conflict %q create %v keep %v; want a conflict and no create", pl.Conflict, (pl.Decision == decide.Create), pl.Keep)
				}
			})
		})
	}
}

// replaced counts the registrations a settled plan prunes because they were replaced.
func replaced(p decide.Plan) int {
	n := 0
	for _, s := range p.Prunes() {
		if s.Why == decide.PruneRotated {
			n++
		}
	}
	return n
}
