package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// stripeCaps are the capabilities of the provider most cases are written for.
var stripeCaps = new(stripe.Client).Capabilities()

// The subscription every plan case is written from: shop/orders in cluster prod.
var (
	planMe          = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "uid-orders-2"}
	planEarlierMe   = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "uid-orders-1"}
	planOtherSub    = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "refunds", UID: "uid-refunds"}
	planOtherClustr = providers.Owner{Cluster: "staging", Namespace: "shop", Name: "orders", UID: "uid-staging-orders"}
	planT0          = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

const (
	planURL    = "https://hooks.example.com/hooks/shop/orders"
	planOldURL = "https://hooks.example.com/hooks/shop/orders-v1"
	planElse   = "https://other.example.com/hooks/billing"
	planDesc   = "orders pipeline"
)

var planEvents = []string{"checkout.session.completed", "invoice.paid"}

func planDesired(url string) providers.Desired {
	return providers.Desired{URL: url, Events: planEvents, Description: planDesc, Owner: planMe}
}

// reg is a registration that matches the desired one exactly (ours, canonical URL, same fields),
// created minutesAfterT0 after planT0. Cases derive every other category from it with options.
func reg(id string, minutesAfterT0 int, opts ...func(*providers.Registration)) providers.Registration {
	r := providers.Registration{
		ID:          id,
		URL:         planURL,
		Events:      append([]string(nil), planEvents...),
		Description: planDesc,
		Owner:       planMe,
		CreateKey:   "hookwarden-create-" + planMe.UID + "-g1",
		Created:     planT0.Add(time.Duration(minutesAfterT0) * time.Minute),
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func withURL(u string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.URL = u }
}

func withOwner(o providers.Owner) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Owner = o }
}

func withEvents(e ...string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Events = e }
}

func withDescription(d string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Description = d }
}

func withDisabled(r *providers.Registration) { r.Disabled = true }
func withHealthDisabled(r *providers.Registration) {
	r.Health = &providers.DeliveryHealth{State: providers.HealthDisabled, Message: "disabled by the provider"}
}

// unmarked is a registration with no ownership marker (made by hand, or by another tool).
func unmarked(r *providers.Registration) { r.Owner = providers.Owner{}; r.CreateKey = "" }

func keep(r providers.Registration) *providers.Registration { return &r }

// Steps as plans list them. Their Desired and Key are compared only where a case says so
// (planStepDetail); everywhere else the kind and the registration acted on tell the decision.
func twin(r providers.Registration) decide.Step    { return decide.PruneStep(r, decide.PruneTwin) }
func staleAt(r providers.Registration) decide.Step { return decide.PruneStep(r, decide.PruneStale) }
func retiredAt(r providers.Registration) decide.Step {
	return decide.PruneStep(r, decide.PruneRotated)
}
func createStep() decide.Step { return decide.Step{Kind: decide.StepCreate} }
func updateStep(r providers.Registration, fields ...string) decide.Step {
	return decide.Step{Kind: decide.StepUpdate, Registration: r, Desired: planDesired(planURL), Drift: fields}
}
func replayStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepReplay, Registration: r}
}
func fetchStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepFetchSecret, Registration: r}
}
func setSecretStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepSetSecret, Registration: r, Desired: planDesired(planURL)}
}
func replaceStep(r providers.Registration, fields ...string) decide.Step {
	return decide.Step{Kind: decide.StepReplace, Registration: r, Drift: fields}
}
func markStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepMarkCurrent, Registration: r}
}
func forgetStep(id string) decide.Step { return decide.Step{Kind: decide.StepForget, ID: id} }

func keeps(r providers.Registration, steps ...decide.Step) decide.Plan {
	return decide.Plan{Decision: decide.Keep, Keep: keep(r), Steps: steps}
}

func creates(steps ...decide.Step) decide.Plan {
	return decide.Plan{Decision: decide.Create, Steps: append([]decide.Step{createStep()}, steps...)}
}

// planStepDetail leaves out of a comparison what most cases do not state: the parameters and
// keys of provider calls, and how a new secret is obtained.
var planStepDetail = cmpopts.IgnoreFields(decide.Step{}, "Desired", "Key", "Secret")

// heldSet turns a case's held ids into the plan's set (nil stays nil).
func heldSet(ids []string) map[string]bool {
	if ids == nil {
		return nil
	}
	held := map[string]bool{}
	for _, id := range ids {
		held[id] = true
	}
	return held
}

// currentOf is the id a consistent signing Secret names current: the recorded registration's,
// when its secret is held; a case's explicit current wins.
func currentOf(explicit, recorded string, held []string) string {
	if explicit != "" {
		return explicit
	}
	for _, id := range held {
		if id == recorded {
			return recorded
		}
	}
	return ""
}

func TestPlanComputePlan(t *testing.T) {
	type tc struct {
		reason   string
		url      string // desired canonical URL; planURL when empty
		observed []providers.Registration
		recorded string
		held     []string
		// current is the id the signing Secret names current; empty: the recorded one when held.
		current  string
		adoption hookv1.AdoptionPolicy
		twins    hookv1.TwinsPolicy
		// edited: the spec changed since the last reconcile (planInput.SpecEdited).
		edited bool
		want   decide.Plan
		// conflictMentions must all appear in plan.Conflict (which must then be non-empty);
		// Conflict itself is left out of the diff because it is prose.
		conflictMentions []string
	}
	cases := []tc{
		// Nothing there.
		{
			reason: "empty account: nothing serves the spec, so create",
			want:   creates(),
		},
		{
			reason:   "only foreign registrations elsewhere: create, and leave them alone",
			observed: []providers.Registration{reg("we_a", 0, withURL(planElse), unmarked), reg("we_b", 1, withURL(planElse), withOwner(planOtherSub))},
			want:     creates(),
		},

		// Ours and matching.
		{
			reason:   "ours and matching, recorded, secret held: keep it, nothing to do",
			observed: []providers.Registration{reg("we_1", 0)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0)),
		},
		{
			reason:   "ours by marker after status was lost: keep it rather than create a second one",
			observed: []providers.Registration{reg("we_1", 0)},
			held:     []string{"we_1"},
			current:  "we_1",
			want:     keeps(reg("we_1", 0)),
		},
		{
			reason:   "the recorded registration was deleted at the provider: create a new one, and forget the vanished one's secret so it is no longer accepted",
			observed: []providers.Registration{reg("we_b", 1, withURL(planElse), unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     creates(forgetStep("we_1")),
		},
		{
			reason:   "the recorded registration vanished, another of ours serves the spec: keep it, forget the vanished one's secret",
			observed: []providers.Registration{reg("we_2", 1)},
			recorded: "we_1",
			held:     []string{"we_1", "we_2"},
			want:     keeps(reg("we_2", 1), markStep(reg("we_2", 1)), forgetStep("we_1")),
		},
		{
			reason:   "the recorded registration vanished and its secret is not held: nothing to forget",
			recorded: "we_1",
			held:     []string{"we_0"},
			want:     creates(),
		},
		{
			reason:   "ours by marker, secret not held (crash before the Secret write): keep it and recover the secret",
			observed: []providers.Registration{reg("we_1", 0)},
			want:     keeps(reg("we_1", 0), replayStep(reg("we_1", 0)), markStep(reg("we_1", 0))),
		},
		{
			reason:   "events in another order and with duplicates are the same set: no drift",
			observed: []providers.Registration{reg("we_1", 0, withEvents("invoice.paid", "checkout.session.completed", "invoice.paid"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withEvents("invoice.paid", "checkout.session.completed", "invoice.paid"))),
		},

		// Ours but drifted: update in place, never recreate.
		{
			reason:   "an event removed at the provider: update events",
			observed: []providers.Registration{reg("we_1", 0, withEvents("invoice.paid"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withEvents("invoice.paid")), updateStep(reg("we_1", 0, withEvents("invoice.paid")), "events")),
		},
		{
			reason:   "an extra event added at the provider: update events",
			observed: []providers.Registration{reg("we_1", 0, withEvents("checkout.session.completed", "invoice.paid", "charge.refunded"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withEvents("checkout.session.completed", "invoice.paid", "charge.refunded")), updateStep(reg("we_1", 0, withEvents("checkout.session.completed", "invoice.paid", "charge.refunded")), "events")),
		},
		{
			reason:   "'*' at the provider is not expanded to the listed events: update events",
			observed: []providers.Registration{reg("we_1", 0, withEvents("*"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withEvents("*")), updateStep(reg("we_1", 0, withEvents("*")), "events")),
		},
		{
			reason:   "description edited in the dashboard: update description",
			observed: []providers.Registration{reg("we_1", 0, withDescription("edited by hand"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withDescription("edited by hand")), updateStep(reg("we_1", 0, withDescription("edited by hand")), "description")),
		},
		{
			reason:   "disabled by the provider after failing deliveries (Stripe: status disabled, Health disabled) while the spec says enabled: no drift; recovery enables it once the endpoint answers (issue 27)",
			observed: []providers.Registration{reg("we_1", 0, withDisabled, withHealthDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withDisabled, withHealthDisabled)),
		},
		{
			reason:   "disabled (status disabled, Health disabled) and the spec just edited to enabled (spec.disabled true, then false): the user's doing, update disabled at once",
			observed: []providers.Registration{reg("we_1", 0, withDisabled, withHealthDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			edited:   true,
			want:     keeps(reg("we_1", 0, withDisabled, withHealthDisabled), updateStep(reg("we_1", 0, withDisabled, withHealthDisabled), "disabled")),
		},
		{
			reason:   "disabled in the dashboard while the spec says enabled: update disabled",
			observed: []providers.Registration{reg("we_1", 0, withDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withDisabled), updateStep(reg("we_1", 0, withDisabled), "disabled")),
		},
		{
			reason:   "URL spelled non-canonically (host case, :443): same target, rewritten in place, not a twin and not a create",
			observed: []providers.Registration{reg("we_1", 0, withURL("HTTPS://Hooks.Example.COM:443/hooks/shop/orders"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, withURL("HTTPS://Hooks.Example.COM:443/hooks/shop/orders")), updateStep(reg("we_1", 0, withURL("HTTPS://Hooks.Example.COM:443/hooks/shop/orders")), "url")),
		},
		{
			reason:   "unmarked registration adopted (policy Adopt): kept, marker written, secret recovered",
			observed: []providers.Registration{reg("we_1", 0, unmarked)},
			adoption: hookv1.AdoptionAdopt,
			want:     keeps(reg("we_1", 0, unmarked), replaceStep(reg("we_1", 0, unmarked))),
		},
		{
			reason:   "marker still missing after adoption (recorded and held): the marker is drift until written",
			observed: []providers.Registration{reg("we_1", 0, unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0, unmarked), updateStep(reg("we_1", 0, unmarked), "ownership marker")),
		},
		{
			reason: "every field drifted at once: all listed, in a stable order",
			observed: []providers.Registration{reg("we_1", 0, unmarked, withURL("https://hooks.example.com:443/hooks/shop/orders"),
				withEvents("invoice.paid"), withDescription(""), withDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want: func() decide.Plan {
				r := reg("we_1", 0, unmarked, withURL("https://hooks.example.com:443/hooks/shop/orders"),
					withEvents("invoice.paid"), withDescription(""), withDisabled)
				return keeps(r, updateStep(r, "url", "events", "description", "disabled", "ownership marker"))
			}(),
		},

		// Recorded id as proof of ownership.
		{
			reason:   "recorded id on an unmarked registration counts as ours even with adoption Never",
			observed: []providers.Registration{reg("we_1", 0, unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			adoption: hookv1.AdoptionNever,
			want:     keeps(reg("we_1", 0, unmarked), updateStep(reg("we_1", 0, unmarked), "ownership marker")),
		},
		{
			reason:   "recorded id on an unmarked registration for an old URL: ours, so stale and pruned",
			observed: []providers.Registration{reg("we_1", 0, unmarked, withURL(planOldURL)), reg("we_2", 1)},
			recorded: "we_1",
			held:     []string{"we_2"},
			want:     keeps(reg("we_2", 1), markStep(reg("we_2", 1)), staleAt(reg("we_1", 0, unmarked, withURL(planOldURL)))),
		},

		// Twins: the same canonical URL twice or more.
		{
			reason: "twins spelled differently (host case, :443, unmarked) are pruned; the held and recorded one stays",
			observed: []providers.Registration{
				reg("we_3", 2, withURL("https://hooks.example.com:443/hooks/shop/orders")),
				reg("we_1", 0),
				reg("we_2", 1, withURL("https://HOOKS.example.com/hooks/shop/orders"), unmarked),
			},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want: keeps(reg("we_1", 0),
				twin(reg("we_2", 1, withURL("https://HOOKS.example.com/hooks/shop/orders"), unmarked)),
				twin(reg("we_3", 2, withURL("https://hooks.example.com:443/hooks/shop/orders"))),
			),
		},
		{
			reason:   "%2f and %2F are the same escape: a twin, pruned",
			url:      "https://hooks.example.com/hooks/shop%2Forders",
			observed: []providers.Registration{reg("we_1", 0, withURL("https://hooks.example.com/hooks/shop%2Forders")), reg("we_2", 1, withURL("https://hooks.example.com/hooks/shop%2forders"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want: keeps(reg("we_1", 0, withURL("https://hooks.example.com/hooks/shop%2Forders")),
				twin(reg("we_2", 1, withURL("https://hooks.example.com/hooks/shop%2forders")))),
		},
		{
			reason:   "an empty twins policy (CRD default not applied) prunes, like Prune",
			observed: []providers.Registration{reg("we_1", 0), reg("we_2", 1)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0), twin(reg("we_2", 1))),
		},
		{
			reason: "policies.twins Keep: twins are reported, never deleted",
			observed: []providers.Registration{
				reg("we_1", 0),
				reg("we_2", 1, withURL("https://Hooks.Example.com/hooks/shop/orders"), unmarked),
				reg("we_3", 2, withURL("https://hooks.example.com:443/hooks/shop/orders")),
			},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsKeep,
			want: decide.Plan{Keep: keep(reg("we_1", 0)), KeptTwins: []providers.Registration{
				reg("we_2", 1, withURL("https://Hooks.Example.com/hooks/shop/orders"), unmarked),
				reg("we_3", 2, withURL("https://hooks.example.com:443/hooks/shop/orders")),
			}},
		},
		{
			reason:   "policies.twins Keep still prunes stale registrations: they are not twins",
			observed: []providers.Registration{reg("we_1", 0), reg("we_2", 1), reg("we_0", 0, withURL(planOldURL))},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsKeep,
			want: decide.Plan{
				Keep:      keep(reg("we_1", 0)),
				KeptTwins: []providers.Registration{reg("we_2", 1)},
				Steps:     []decide.Step{staleAt(reg("we_0", 0, withURL(planOldURL)))},
			},
		},

		// Stale: ours, for a URL the spec no longer names.
		{
			reason:   "spec URL changed: create at the new URL, then prune ours at the old one",
			observed: []providers.Registration{reg("we_1", 0, withURL(planOldURL))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     creates(staleAt(reg("we_1", 0, withURL(planOldURL)))),
		},
		{
			reason:   "ours at an old URL next to ours at the current one: keep current, prune old",
			observed: []providers.Registration{reg("we_1", 0, withURL(planOldURL)), reg("we_2", 1)},
			recorded: "we_2",
			held:     []string{"we_2"},
			want:     keeps(reg("we_2", 1), staleAt(reg("we_1", 0, withURL(planOldURL)))),
		},
		{
			reason:   "ours at a near-twin URL (trailing slash: an older spec) is stale and pruned, not reported",
			observed: []providers.Registration{reg("we_1", 0, withURL(planURL+"/")), reg("we_2", 1)},
			recorded: "we_2",
			held:     []string{"we_2"},
			want:     keeps(reg("we_2", 1), staleAt(reg("we_1", 0, withURL(planURL+"/")))),
		},
		{
			reason:   "the only held secret belongs to a stale registration: keep the one at the spec URL, recover its secret, prune the stale one",
			observed: []providers.Registration{reg("we_1", 0, withURL(planOldURL)), reg("we_2", 1)},
			held:     []string{"we_1"},
			want:     keeps(reg("we_2", 1), replayStep(reg("we_2", 1)), markStep(reg("we_2", 1)), staleAt(reg("we_1", 0, withURL(planOldURL)))),
		},

		// Foreign: never changed or deleted.
		{
			reason: "foreign registrations elsewhere (unmarked, other subscription, other cluster) are never pruned, even under Prune",
			observed: []providers.Registration{
				reg("we_1", 0),
				reg("we_f1", 1, withURL(planElse), unmarked),
				reg("we_f2", 2, withURL(planElse), withOwner(planOtherSub)),
				reg("we_f3", 3, withURL(planOldURL), withOwner(planOtherClustr)),
				reg("we_f4", 4, withURL(planOldURL), withOwner(planEarlierMe)),
			},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want:     keeps(reg("we_1", 0)),
		},
		{
			reason:   "foreign near-twin with a trailing slash: reported only, and still a create for the exact URL",
			observed: []providers.Registration{reg("we_f", 0, withURL(planURL+"/"), unmarked)},
			want:     decide.Plan{Decision: decide.Create, Steps: []decide.Step{createStep()}, NearTwins: []providers.Registration{reg("we_f", 0, withURL(planURL+"/"), unmarked)}},
		},
		{
			reason:   "foreign near-twin over http instead of https: reported only",
			observed: []providers.Registration{reg("we_1", 0), reg("we_f", 1, withURL("http://hooks.example.com/hooks/shop/orders"), unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want: decide.Plan{
				Keep:      keep(reg("we_1", 0)),
				NearTwins: []providers.Registration{reg("we_f", 1, withURL("http://hooks.example.com/hooks/shop/orders"), unmarked)},
			},
		},
		{
			reason:   "near-twin carrying another subscription's marker: reported only, never pruned",
			observed: []providers.Registration{reg("we_1", 0), reg("we_f", 1, withURL("http://hooks.example.com/hooks/shop/orders/"), withOwner(planOtherSub))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want: decide.Plan{
				Keep:      keep(reg("we_1", 0)),
				NearTwins: []providers.Registration{reg("we_f", 1, withURL("http://hooks.example.com/hooks/shop/orders/"), withOwner(planOtherSub))},
			},
		},

		// Conflict: the exact target is provably someone else's.
		{
			reason:           "same canonical URL carries another cluster's marker: conflict, no create, nothing touched",
			observed:         []providers.Registration{reg("we_x", 0, withOwner(planOtherClustr))},
			conflictMentions: []string{"we_x", "staging"},
		},
		{
			reason:           "same canonical URL (spelled differently) carries another subscription's marker: conflict, no create",
			observed:         []providers.Registration{reg("we_x", 0, withURL("https://Hooks.Example.com:443/hooks/shop/orders"), withOwner(planOtherSub))},
			conflictMentions: []string{"we_x", "shop/refunds"},
		},
		{
			reason:           "conflict while ours sits at an old URL: wait for a human, do not prune the only working hook",
			observed:         []providers.Registration{reg("we_1", 0, withURL(planOldURL)), reg("we_x", 1, withOwner(planOtherSub))},
			recorded:         "we_1",
			held:             []string{"we_1"},
			conflictMentions: []string{"we_x"},
		},
		{
			reason:           "unmarked registration at the same URL with adoption Never: conflict, no second registration",
			observed:         []providers.Registration{reg("we_u", 0, unmarked)},
			adoption:         hookv1.AdoptionNever,
			conflictMentions: []string{"we_u", "policies.adoption"},
		},
		{
			reason:   "conflict is moot when ours also serves the URL: keep ours, leave the other owner's untouched",
			observed: []providers.Registration{reg("we_x", 0, withOwner(planOtherClustr)), reg("we_1", 1)},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want:     keeps(reg("we_1", 1)),
		},
		{
			reason:   "adoption Never does not stop us keeping our own marked registration",
			observed: []providers.Registration{reg("we_1", 0)},
			held:     []string{"we_1"},
			current:  "we_1",
			adoption: hookv1.AdoptionNever,
			want:     keeps(reg("we_1", 0)),
		},

		// Earlier incarnation: same cluster, namespace and name; the UID changed (deleted with
		// policies.deletion Orphan and re-applied).
		{
			reason:   "earlier incarnation of this subscription is adoptable: kept, marker rewritten to the new UID, secret recovered",
			observed: []providers.Registration{reg("we_old", 0, withOwner(planEarlierMe))},
			adoption: hookv1.AdoptionAdopt,
			want:     keeps(reg("we_old", 0, withOwner(planEarlierMe)), replaceStep(reg("we_old", 0, withOwner(planEarlierMe)))),
		},

		// Keeper choice among several candidates.
		{
			reason:   "held secret beats recorded id and marker: keep the one whose secret we hold, no rotation",
			observed: []providers.Registration{reg("we_1", 0), reg("we_2", 1, unmarked)},
			recorded: "we_1",
			held:     []string{"we_2"},
			want:     keeps(reg("we_2", 1, unmarked), updateStep(reg("we_2", 1, unmarked), "ownership marker"), markStep(reg("we_2", 1, unmarked)), twin(reg("we_1", 0))),
		},
		{
			reason:   "recorded id beats marker when no secret is held",
			observed: []providers.Registration{reg("we_1", 0), reg("we_2", 1, unmarked)},
			recorded: "we_2",
			want:     keeps(reg("we_2", 1, unmarked), replaceStep(reg("we_2", 1, unmarked))),
		},
		{
			reason:   "marker beats age: the newer marked one is kept over an older unmarked one",
			observed: []providers.Registration{reg("we_1", 0, unmarked), reg("we_2", 5)},
			want:     keeps(reg("we_2", 5), replayStep(reg("we_2", 5)), markStep(reg("we_2", 5)), twin(reg("we_1", 0, unmarked))),
		},
		{
			reason:   "otherwise the oldest is kept, whatever the list order",
			observed: []providers.Registration{reg("we_c", 2), reg("we_a", 0), reg("we_b", 1)},
			held:     []string{"we_x"},
			want:     keeps(reg("we_a", 0), replayStep(reg("we_a", 0)), markStep(reg("we_a", 0)), twin(reg("we_b", 1)), twin(reg("we_c", 2))),
		},
		{
			reason:   "created at the same second: the lowest id is kept, so two reconciles agree",
			observed: []providers.Registration{reg("we_b", 0), reg("we_a", 0)},
			want:     keeps(reg("we_a", 0), replayStep(reg("we_a", 0)), markStep(reg("we_a", 0)), twin(reg("we_b", 0))),
		},
		{
			reason:   "held and recorded beats held alone",
			observed: []providers.Registration{reg("we_1", 0), reg("we_2", 1)},
			recorded: "we_2",
			held:     []string{"we_1", "we_2"},
			want:     keeps(reg("we_2", 1), twin(reg("we_1", 0))),
		},
	}

	sharedKeys := &decide.URLKeys{}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			url := c.url
			if url == "" {
				url = planURL
			}
			in := decide.PlanInput{
				Caps:        stripeCaps,
				Desired:     planDesired(url),
				Observed:    c.observed,
				RecordedID:  c.recorded,
				HeldSecrets: heldSet(c.held),
				CurrentID:   currentOf(c.current, c.recorded, c.held),
				Adoption:    c.adoption,
				Twins:       c.twins,
				SpecEdited:  c.edited,
			}
			got := decide.ComputePlan(in)
			// The account's table of parsed URLs, shared by every case as by every subscription
			// of an account, changes no decision.
			in.Keys = sharedKeys
			if d := cmp.Diff(got, decide.ComputePlan(in), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("computePlan with the account's URL table differs (-without +with) (%s):\n%s", c.reason, d)
			}

			if len(c.conflictMentions) > 0 {
				if got.Conflict == "" {
					t.Errorf("computePlan: Conflict is empty; want a conflict (%s)", c.reason)
				}
				for _, m := range c.conflictMentions {
					if !strings.Contains(got.Conflict, m) {
						t.Errorf("computePlan: Conflict %q does not mention %q (%s)", got.Conflict, m, c.reason)
					}
				}
			} else if got.Conflict != "" {
				t.Errorf("computePlan: unexpected Conflict %q (%s)", got.Conflict, c.reason)
			}
			got.Conflict = ""
			if len(c.conflictMentions) > 0 {
				c.want.Decision = decide.Conflict
			}
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty(), planStepDetail); diff != "" {
				t.Errorf("computePlan mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
		})
	}
}

// TestPlanInvariants checks, over every combination of a few registrations, what must hold
// whatever the mix: a registration that is not provably ours is never pruned, Create and Keep
// exclude each other, and nothing is created while a conflict stands.
func TestPlanInvariants(t *testing.T) {
	pool := []providers.Registration{
		reg("we_ours", 0),
		reg("we_ours_stale", 1, withURL(planOldURL)),
		reg("we_unmarked", 2, unmarked),
		reg("we_earlier", 3, withOwner(planEarlierMe)),
		reg("we_other_sub", 4, withOwner(planOtherSub)),
		reg("we_other_cluster", 5, withOwner(planOtherClustr)),
		reg("we_near", 6, withURL(planURL+"/"), unmarked),
		reg("we_else", 7, withURL(planElse), unmarked),
		reg("we_other_stale", 8, withURL(planOldURL), withOwner(planOtherSub)),
	}
	// Registrations that may be pruned: ours by marker, and adoptable ones only when adoption is allowed.
	mayPrune := map[hookv1.AdoptionPolicy]map[string]bool{
		hookv1.AdoptionAdopt: {"we_ours": true, "we_ours_stale": true, "we_unmarked": true, "we_earlier": true},
		hookv1.AdoptionNever: {"we_ours": true, "we_ours_stale": true},
	}
	for mask := 0; mask < 1<<len(pool); mask++ {
		var observed []providers.Registration
		for i, r := range pool {
			if mask&(1<<i) != 0 {
				observed = append(observed, r)
			}
		}
		for _, adoption := range []hookv1.AdoptionPolicy{hookv1.AdoptionAdopt, hookv1.AdoptionNever} {
			for _, twins := range []hookv1.TwinsPolicy{hookv1.TwinsPrune, hookv1.TwinsKeep} {
				name := fmt.Sprintf("mask=%b adoption=%s twins=%s", mask, adoption, twins)
				p := decide.ComputePlan(decide.PlanInput{Caps: stripeCaps, Desired: planDesired(planURL), Observed: observed, Adoption: adoption, Twins: twins})
				for _, a := range p.Prunes() {
					if !mayPrune[adoption][a.Registration.ID] {
						t.Errorf("%s: prunes %s, which is not provably ours", name, a.Registration.ID)
					}
				}
				switch p.Decision {
				case decide.Keep:
					if p.Keep == nil {
						t.Errorf("%s: decides keep without a registration", name)
					}
				case decide.Create:
					if p.Keep != nil || len(p.Steps) == 0 || p.Steps[0].Kind != decide.StepCreate {
						t.Errorf("%s: decides create but keeps %v, steps %v", name, p.Keep, p.Steps)
					}
				case decide.Conflict:
					if p.Conflict == "" || p.Keep != nil || len(p.Steps) > 0 {
						t.Errorf("%s: conflict %q but keeps %v, steps %v", name, p.Conflict, p.Keep, p.Steps)
					}
				}
				checkStepOrder(t, name, p.Steps)
				if twins == hookv1.TwinsKeep {
					for _, a := range p.Prunes() {
						if a.Why == decide.PruneTwin {
							t.Errorf("%s: prunes twin %s under policies.twins Keep", name, a.Registration.ID)
						}
					}
				}
			}
		}
	}
}

// checkStepOrder fails t unless steps come in the order the executor relies on: kinds never go
// backwards, and nothing follows a step that ends the round.
func checkStepOrder(t *testing.T, name string, steps []decide.Step) {
	t.Helper()
	for i := 1; i < len(steps); i++ {
		if steps[i].Kind < steps[i-1].Kind {
			t.Errorf("%s: step %d (%v) comes after %v", name, i, steps[i].Kind, steps[i-1].Kind)
		}
		if steps[i-1].EndsRound() {
			t.Errorf("%s: step %v follows %v, which ends the round", name, steps[i].Kind, steps[i-1].Kind)
		}
	}
}

// TestPlanOwns: the proof of ownership that both reconcile (classify) and deletion
// (deleteRegistrations) act on.
func TestPlanOwns(t *testing.T) {
	cases := []struct {
		reason   string
		r        providers.Registration
		recorded string
		want     bool
	}{
		{"our marker", reg("we_1", 0), "", true},
		{"our marker, another id recorded", reg("we_1", 0), "we_2", true},
		{"our UID in another cluster's marker is not ours", reg("we_1", 0, withOwner(providers.Owner{Cluster: "staging", Namespace: "shop", Name: "orders", UID: planMe.UID})), "", false},
		{"unmarked and not recorded", reg("we_1", 0, unmarked), "", false},
		{"unmarked but recorded", reg("we_1", 0, unmarked), "we_1", true},
		{"an earlier incarnation's marker, recorded", reg("we_1", 0, withOwner(planEarlierMe)), "we_1", true},
		{"an earlier incarnation's marker, not recorded", reg("we_1", 0, withOwner(planEarlierMe)), "", false},
		{"recorded, but another subscription's marker: the marker wins", reg("we_1", 0, withOwner(planOtherSub)), "we_1", false},
		{"recorded, but another cluster's marker: the marker wins", reg("we_1", 0, withOwner(planOtherClustr)), "we_1", false},
	}
	for _, c := range cases {
		if got := (decide.Ownership{Me: planMe, Markers: true, RecordedID: c.recorded}).Owns(c.r); got != c.want {
			t.Errorf("owns(%s, owner %+v, recorded %q) = %v; want %v (%s)", c.r.ID, c.r.Owner, c.recorded, got, c.want, c.reason)
		}
	}
}

// keyCase is what createKey depends on.
type keyCase struct {
	uid        string
	generation int64
	recorded   string
}

func (k keyCase) create() string { return decide.CreateKey(k.uid, k.generation, k.recorded) }

func TestKeyCreate(t *testing.T) {
	const uid = "6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b"
	base := keyCase{uid, 3, ""}.create()
	cases := []struct {
		reason string
		k      keyCase
		same   bool // same key as base
	}{
		{"same UID and generation: a crash replay sends the same key", keyCase{uid, 3, ""}, true},
		{"a new generation is a different request: new key", keyCase{uid, 4, ""}, false},
		{"another subscription: new key", keyCase{"0a1b2c3d-0000-4000-8000-000000000000", 3, ""}, false},
		{"a recorded registration vanished at the provider: new key, so the create is not a replay of the vanished one", keyCase{uid, 3, "we_1"}, false},
	}
	for _, c := range cases {
		got := c.k.create()
		if (got == base) != c.same {
			t.Errorf("createKey = %q, base %q; same = %v, want %v (%s)", got, base, got == base, c.same, c.reason)
		}
		if again := c.k.create(); again != got {
			t.Errorf("createKey not deterministic: %q then %q (%s)", got, again, c.reason)
		}
	}
	if a, b := (keyCase{uid, 3, "we_1"}).create(), (keyCase{uid, 3, "we_2"}).create(); a == b {
		t.Errorf("createKey after we_1 and after we_2 are both %q; want different keys", a)
	}
}

func TestKeyRotate(t *testing.T) {
	const uid = "6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b"
	base := decide.RotateKey(uid, 3, "we_1")
	cases := []struct {
		reason     string
		uid        string
		generation int64
		old        string
		same       bool
	}{
		{"same subscription and replaced registration: a crash mid-rotation replays", uid, 3, "we_1", true},
		{"a new generation rotates with a new key: a replay with edited parameters would be refused", uid, 4, "we_1", false},
		{"another replaced registration: new key", uid, 3, "we_2", false},
		{"another subscription: new key", "0a1b2c3d-0000-4000-8000-000000000000", 3, "we_1", false},
	}
	for _, c := range cases {
		got := decide.RotateKey(c.uid, c.generation, c.old)
		if (got == base) != c.same {
			t.Errorf("rotateKey = %q, base %q; same = %v, want %v (%s)", got, base, got == base, c.same, c.reason)
		}
	}
	if decide.CreateKey(uid, 3, "we_1") == base {
		t.Errorf("rotateKey and createKey collide: %q", base)
	}
}

// TestKeyLength: Stripe refuses idempotency keys over 255 characters. The longest inputs seen in
// practice: a 36-character UID, any generation, endpoint ids well beyond Stripe's current 27.
func TestKeyLength(t *testing.T) {
	const uid = "6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b"
	longID := "we_" + strings.Repeat("x", 61) // 64 characters, more than twice today's we_ ids
	for _, k := range []keyCase{{uid, 1, ""}, {uid, 1<<63 - 1, ""}, {uid, 1<<63 - 1, longID}} {
		if key := k.create(); len(key) > 255 {
			t.Errorf("createKey(generation %d, recorded %q) has %d characters; Stripe accepts at most 255", k.generation, k.recorded, len(key))
		}
		if key := decide.RotateKey(k.uid, k.generation, longID); len(key) > 255 {
			t.Errorf("rotateKey(%q) has %d characters; Stripe accepts at most 255", longID, len(key))
		}
	}
}

func resyncSub(interval time.Duration) *hookv1.WebhookSubscription {
	sub := &hookv1.WebhookSubscription{}
	if interval != 0 {
		sub.Spec.ResyncInterval = &metav1.Duration{Duration: interval}
	}
	return sub
}

func TestResyncMaxListAge(t *testing.T) {
	cases := []struct {
		reason   string
		ttl      time.Duration
		interval time.Duration // 0: unset
		want     time.Duration
	}{
		{"ListTTL is the cap with a long interval", 30 * time.Second, 10 * time.Minute, 30 * time.Second},
		{"half the interval when that is shorter than ListTTL", 30 * time.Second, 40 * time.Second, 20 * time.Second},
		{"unset interval means the 10m default", 30 * time.Second, 0, 30 * time.Second},
		{"unset interval with a long TTL: half the default", time.Hour, 0, 5 * time.Minute},
	}
	for _, c := range cases {
		r := &Reconciler{ListTTL: c.ttl}
		if got := r.maxListAge(resyncSub(c.interval)); got != c.want {
			t.Errorf("maxListAge(ttl %s, interval %s) = %s; want %s (%s)", c.ttl, c.interval, got, c.want, c.reason)
		}
	}
}

func TestResyncNext(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		reason    string
		ttl       time.Duration
		interval  time.Duration
		fetchedAt time.Time     // the account's epoch: its first list
		base      time.Duration // result is in [base, base+spread)
		spread    time.Duration
	}{
		{"account's grid started 3m ago: come back at the next grid point, with the account's other subscriptions",
			30 * time.Second, 10 * time.Minute, now.Add(-3 * time.Minute), 7 * time.Minute, 15 * time.Second},
		{"grid starts now: a full interval",
			30 * time.Second, 10 * time.Minute, now, 10 * time.Minute, 15 * time.Second},
		{"grid started 11m ago: the next grid point is 9m ahead, whichever list this subscription saw",
			30 * time.Second, 10 * time.Minute, now.Add(-11 * time.Minute), 9 * time.Minute, 15 * time.Second},
		{"grid started many waves ago: still on the grid",
			30 * time.Second, 10 * time.Minute, now.Add(-(5*time.Hour + 4*time.Minute)), 6 * time.Minute, 15 * time.Second},
		{"no list yet (zero epoch): the interval",
			30 * time.Second, 10 * time.Minute, time.Time{}, 10 * time.Minute, 15 * time.Second},
		{"epoch in the future (clock skew): never more than the interval",
			30 * time.Second, 10 * time.Minute, now.Add(time.Minute), 10 * time.Minute, 15 * time.Second},
		{"short interval: jitter bounded by interval/20",
			30 * time.Second, time.Minute, now.Add(-20 * time.Second), 40 * time.Second, 3 * time.Second},
		{"short ListTTL: jitter bounded by maxListAge/2, so the late ones still reuse the list",
			4 * time.Second, 10 * time.Minute, now.Add(-time.Minute), 9 * time.Minute, 2 * time.Second},
		{"unset interval: the 10m default",
			30 * time.Second, 0, now.Add(-time.Minute), 9 * time.Minute, 15 * time.Second},
	}
	for _, c := range cases {
		r := &Reconciler{ListTTL: c.ttl, Now: func() time.Time { return now }}
		sub := resyncSub(c.interval)
		if maxAge := r.maxListAge(sub); c.spread > maxAge/2 {
			t.Fatalf("case %q: spread %s must stay below maxListAge/2 = %s", c.reason, c.spread, maxAge/2)
		}
		jittered := false
		for range 500 {
			got := r.nextResync(sub, c.fetchedAt)
			if got < c.base || got >= c.base+c.spread {
				t.Errorf("nextResync = %s; want in [%s, %s) (%s)", got, c.base, c.base+c.spread, c.reason)
				break
			}
			jittered = jittered || got != c.base
		}
		if !jittered {
			t.Errorf("nextResync returned exactly %s 500 times: no jitter (%s)", c.base, c.reason)
		}
	}
}

func TestResyncSinceWaveStart(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		reason   string
		interval time.Duration
		epoch    time.Time
		want     time.Duration
	}{
		{"3m into the first period: a list of the last 3m is this wave's", 10 * time.Minute, now.Add(-3 * time.Minute), 3 * time.Minute},
		{"many periods on: counted from the latest grid point", 10 * time.Minute, now.Add(-(5*time.Hour + 4*time.Minute)), 4 * time.Minute},
		{"on a grid point: nothing is this wave's yet", 10 * time.Minute, now.Add(-20 * time.Minute), 0},
		{"no list yet (zero epoch)", 10 * time.Minute, time.Time{}, 0},
		{"epoch in the future (clock skew)", 10 * time.Minute, now.Add(time.Minute), 0},
	}
	for _, c := range cases {
		r := &Reconciler{Now: func() time.Time { return now }}
		if got := r.sinceWaveStart(resyncSub(c.interval), c.epoch); got != c.want {
			t.Errorf("sinceWaveStart = %s; want %s (%s)", got, c.want, c.reason)
		}
	}
}

// TestResyncSinceDue: a steady subscription accepts any list read since its resync came due on
// its account's grid, however late its turn in the wave: a wave that outlasts the interval
// lists the account once, not once more for every subscription served after the next grid
// point. lastSyncTime is in whole seconds.
func TestResyncSinceDue(t *testing.T) {
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC) // grid points at :00.3, :20.3, :40.3
	const interval = 20 * time.Second
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	synced := func(t time.Time) *metav1.Time { v := metav1.NewTime(t.Truncate(time.Second)); return &v }
	cases := []struct {
		reason   string
		lastSync *metav1.Time
		now      time.Time
		want     time.Duration
	}{
		{"synced in wave 1 (list at :20.5, stored as :20), on time for wave 2: due at :40.3",
			synced(at(20*time.Second + 200*time.Millisecond)), at(40*time.Second + 800*time.Millisecond), 800 * time.Millisecond},
		{"the same subscription served late, 25 s past the grid point of wave 2: still wave 2's list",
			synced(at(20*time.Second + 200*time.Millisecond)), at(65 * time.Second), 25 * time.Second},
		{"before its due point (a Secret woke it): nothing is this wave's",
			synced(at(20*time.Second + 200*time.Millisecond)), at(30 * time.Second), 0},
		{"the truncated second falls before its own wave's grid point: the due point is still the next one",
			synced(at(20*time.Second + 100*time.Millisecond)), at(22 * time.Second), 0},
		{"synced before this manager's first list (a restart): any list since the epoch",
			synced(at(-5 * time.Minute)), at(3 * time.Second), 3 * time.Second},
		{"never synced: from the latest grid point", nil, at(45 * time.Second), 5 * time.Second},
	}
	for _, c := range cases {
		r := &Reconciler{Now: func() time.Time { return c.now }}
		sub := resyncSub(interval)
		sub.Status.LastSyncTime = c.lastSync
		if got := r.sinceDue(sub, epoch); got != c.want {
			t.Errorf("sinceDue = %s; want %s (%s)", got, c.want, c.reason)
		}
	}
}

func TestSteadyOnlyAfterSuccessOnTheCurrentSpec(t *testing.T) {
	ready := func(gen, observed, condGen int64, status metav1.ConditionStatus, reason string) *hookv1.WebhookSubscription {
		sub := &hookv1.WebhookSubscription{}
		sub.Generation = gen
		sub.Status.ObservedGeneration = observed
		sub.Status.Conditions = []metav1.Condition{{Type: hookv1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: condGen}}
		return sub
	}
	cases := []struct {
		reason string
		sub    *hookv1.WebhookSubscription
		want   bool
	}{
		{"Ready on the current generation: a resync", ready(2, 2, 2, metav1.ConditionTrue, hookv1.ReasonSucceeded), true},
		{"spec changed since (generation ahead): a change to carry out", ready(3, 2, 2, metav1.ConditionTrue, hookv1.ReasonSucceeded), false},
		{"last reconcile failed", ready(2, 2, 2, metav1.ConditionFalse, hookv1.ReasonSucceeded), false},
		{"suspended is not in step with the provider", ready(2, 2, 2, metav1.ConditionTrue, hookv1.ReasonSuspended), false},
		{"new subscription, no status", &hookv1.WebhookSubscription{}, false},
	}
	for _, c := range cases {
		if got := steady(c.sub); got != c.want {
			t.Errorf("steady = %v; want %v (%s)", got, c.want, c.reason)
		}
	}
}
