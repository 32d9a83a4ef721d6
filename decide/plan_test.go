package decide_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// planCase is one row of TestPlanComputePlan and TestPlanWithoutMarkers (runPlanCases).
type planCase struct {
	reason   string
	url      string // desired canonical URL; decidetest.URL when empty
	observed []providers.Registration
	recorded string
	held     []string
	// current is the id the signing Secret names current; empty: the recorded one when held.
	current string
	// pending: the signing Secret holds a pending secret (PlanInput.PendingSecret).
	pending  bool
	adoption hookv1.AdoptionPolicy
	twins    hookv1.TwinsPolicy
	// edited: the spec changed since the last reconcile (PlanInput.SpecEdited).
	edited bool
	want   decide.Plan
	// conflictMentions must all appear in plan.Conflict (which must then be non-empty);
	// Conflict itself is left out of the diff because it is prose.
	conflictMentions []string
}

// runPlanCases computes the plan of each case on base (the provider's Caps, a ReceiverURL) with
// the case's input and compares it with want; opts are added to the comparison.
func runPlanCases(t *testing.T, base decide.PlanInput, cases []planCase, opts ...cmp.Option) {
	t.Helper()
	sharedKeys := &decide.URLKeys{}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			url := c.url
			if url == "" {
				url = decidetest.URL
			}
			in := base
			in.Desired = decidetest.Desired(url)
			in.Observed = c.observed
			in.RecordedID = c.recorded
			in.HeldSecrets = decidetest.HeldSet(c.held)
			in.CurrentID = decidetest.CurrentOf(c.current, c.recorded, c.held)
			in.PendingSecret = c.pending
			in.Adoption = c.adoption
			in.Twins = c.twins
			in.SpecEdited = c.edited
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
			all := append([]cmp.Option{cmpopts.EquateEmpty(), decidetest.StepDetail}, opts...)
			if diff := cmp.Diff(c.want, got, all...); diff != "" {
				t.Errorf("computePlan mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
		})
	}
}

func TestPlanComputePlan(t *testing.T) {
	cases := []planCase{
		// Nothing there.
		{
			reason: "empty account: nothing serves the spec, so create",
			want:   decidetest.Creates(),
		},
		{
			reason:   "only foreign registrations elsewhere: create, and leave them alone",
			observed: []providers.Registration{decidetest.Reg("we_a", 0, decidetest.WithURL(decidetest.ElseURL), decidetest.Unmarked), decidetest.Reg("we_b", 1, decidetest.WithURL(decidetest.ElseURL), decidetest.WithOwner(decidetest.OtherSub))},
			want:     decidetest.Creates(),
		},

		// Ours and matching.
		{
			reason:   "ours and matching, recorded, secret held: keep it, nothing to do",
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},
		{
			reason:   "ours by marker after status was lost: keep it rather than create a second one",
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			held:     []string{"we_1"},
			current:  "we_1",
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},
		{
			reason:   "the recorded registration was deleted at the provider: create a new one, and forget the vanished one's secret so it is no longer accepted",
			observed: []providers.Registration{decidetest.Reg("we_b", 1, decidetest.WithURL(decidetest.ElseURL), decidetest.Unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Creates(decidetest.ForgetStep("we_1")),
		},
		{
			reason:   "the recorded registration vanished, another of ours serves the spec: keep it, forget the vanished one's secret",
			observed: []providers.Registration{decidetest.Reg("we_2", 1)},
			recorded: "we_1",
			held:     []string{"we_1", "we_2"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1), decidetest.MarkStep(decidetest.Reg("we_2", 1)), decidetest.ForgetStep("we_1")),
		},
		{
			reason:   "the recorded registration vanished and its secret is not held: nothing to forget",
			recorded: "we_1",
			held:     []string{"we_0"},
			want:     decidetest.Creates(),
		},
		{
			reason:   "ours by marker, secret not held (crash before the Secret write): keep it and recover the secret",
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0), decidetest.ReplayStep(decidetest.Reg("we_1", 0)), decidetest.MarkStep(decidetest.Reg("we_1", 0))),
		},
		{
			reason:   "events in another order and with duplicates are the same set: no drift",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid", "checkout.session.completed", "invoice.paid"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid", "checkout.session.completed", "invoice.paid"))),
		},

		// Ours but drifted: update in place, never recreate.
		{
			reason:   "an event removed at the provider: update events",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")), "events"),
		},
		{
			reason:   "an extra event added at the provider: update events",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("checkout.session.completed", "invoice.paid", "charge.refunded"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithEvents("checkout.session.completed", "invoice.paid", "charge.refunded")), "events"),
		},
		{
			reason:   "'*' at the provider is not expanded to the listed events: update events",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("*"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithEvents("*")), "events"),
		},
		{
			reason:   "description edited in the dashboard: update description",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDescription("edited by hand"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithDescription("edited by hand")), "description"),
		},
		{
			reason:   "disabled by the provider after failing deliveries (Stripe: status disabled, Health disabled) while the spec says enabled: no drift; recovery enables it once the endpoint answers (issue 27)",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDisabled, decidetest.WithHealthDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithDisabled, decidetest.WithHealthDisabled)),
		},
		{
			reason:   "disabled (status disabled, Health disabled) and the spec just edited to enabled (spec.disabled true, then false): the user's doing, update disabled at once",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDisabled, decidetest.WithHealthDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			edited:   true,
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithDisabled, decidetest.WithHealthDisabled), "disabled"),
		},
		{
			reason:   "disabled in the dashboard while the spec says enabled: update disabled",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithDisabled), "disabled"),
		},
		{
			reason:   "URL spelled non-canonically (host case, :443): same target, rewritten in place, not a twin and not a create",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL("HTTPS://Hooks.Example.COM:443/hooks/shop/orders"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithURL("HTTPS://Hooks.Example.COM:443/hooks/shop/orders")), "url"),
		},
		{
			reason:   "unmarked registration adopted (policy Adopt): kept, marker written, secret recovered",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.Unmarked)},
			adoption: hookv1.AdoptionAdopt,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.Unmarked), decidetest.ReplaceStep(decidetest.Reg("we_1", 0, decidetest.Unmarked))),
		},
		{
			reason:   "marker still missing after adoption (recorded and held): the marker is drift until written",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.Unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.Unmarked), "ownership marker"),
		},
		{
			reason: "every field drifted at once: all listed, in a stable order",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.Unmarked, decidetest.WithURL("https://hooks.example.com:443/hooks/shop/orders"),
				decidetest.WithEvents("invoice.paid"), decidetest.WithDescription(""), decidetest.WithDisabled)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want: func() decide.Plan {
				r := decidetest.Reg("we_1", 0, decidetest.Unmarked, decidetest.WithURL("https://hooks.example.com:443/hooks/shop/orders"),
					decidetest.WithEvents("invoice.paid"), decidetest.WithDescription(""), decidetest.WithDisabled)
				return decidetest.KeepsUpdating(r, "url", "events", "description", "disabled", "ownership marker")
			}(),
		},

		// Recorded id as proof of ownership.
		{
			reason:   "recorded id on an unmarked registration counts as ours even with adoption Never",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.Unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			adoption: hookv1.AdoptionNever,
			want:     decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.Unmarked), "ownership marker"),
		},
		{
			reason:   "recorded id on an unmarked registration for an old URL: ours, so stale and pruned",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.Unmarked, decidetest.WithURL(decidetest.OldURL)), decidetest.Reg("we_2", 1)},
			recorded: "we_1",
			held:     []string{"we_2"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1), decidetest.MarkStep(decidetest.Reg("we_2", 1)), decidetest.Stale(decidetest.Reg("we_1", 0, decidetest.Unmarked, decidetest.WithURL(decidetest.OldURL)))),
		},

		// Twins: the same canonical URL twice or more.
		{
			reason: "twins spelled differently (host case, :443, unmarked) are pruned; the held and recorded one stays",
			observed: []providers.Registration{
				decidetest.Reg("we_3", 2, decidetest.WithURL("https://hooks.example.com:443/hooks/shop/orders")),
				decidetest.Reg("we_1", 0),
				decidetest.Reg("we_2", 1, decidetest.WithURL("https://HOOKS.example.com/hooks/shop/orders"), decidetest.Unmarked),
			},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want: decidetest.Keeps(decidetest.Reg("we_1", 0),
				decidetest.Twin(decidetest.Reg("we_2", 1, decidetest.WithURL("https://HOOKS.example.com/hooks/shop/orders"), decidetest.Unmarked)),
				decidetest.Twin(decidetest.Reg("we_3", 2, decidetest.WithURL("https://hooks.example.com:443/hooks/shop/orders"))),
			),
		},
		{
			reason:   "%2f and %2F are the same escape: a twin, pruned",
			url:      "https://hooks.example.com/hooks/shop%2Forders",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL("https://hooks.example.com/hooks/shop%2Forders")), decidetest.Reg("we_2", 1, decidetest.WithURL("https://hooks.example.com/hooks/shop%2forders"))},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want: decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithURL("https://hooks.example.com/hooks/shop%2Forders")),
				decidetest.Twin(decidetest.Reg("we_2", 1, decidetest.WithURL("https://hooks.example.com/hooks/shop%2forders")))),
		},
		{
			reason:   "an empty twins policy (CRD default not applied) prunes, like Prune",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_2", 1)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0), decidetest.Twin(decidetest.Reg("we_2", 1))),
		},
		{
			reason: "policies.twins Keep: twins are reported, never deleted",
			observed: []providers.Registration{
				decidetest.Reg("we_1", 0),
				decidetest.Reg("we_2", 1, decidetest.WithURL("https://Hooks.Example.com/hooks/shop/orders"), decidetest.Unmarked),
				decidetest.Reg("we_3", 2, decidetest.WithURL("https://hooks.example.com:443/hooks/shop/orders")),
			},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsKeep,
			want: decide.Plan{Keep: decidetest.Kept(decidetest.Reg("we_1", 0)), KeptTwins: []providers.Registration{
				decidetest.Reg("we_2", 1, decidetest.WithURL("https://Hooks.Example.com/hooks/shop/orders"), decidetest.Unmarked),
				decidetest.Reg("we_3", 2, decidetest.WithURL("https://hooks.example.com:443/hooks/shop/orders")),
			}},
		},
		{
			reason:   "policies.twins Keep still prunes stale registrations: they are not twins",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_2", 1), decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL))},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsKeep,
			want: decide.Plan{
				Keep:      decidetest.Kept(decidetest.Reg("we_1", 0)),
				KeptTwins: []providers.Registration{decidetest.Reg("we_2", 1)},
				Steps:     []decide.Step{decidetest.Stale(decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL)))},
			},
		},

		// Stale: ours, for a URL the spec no longer names.
		{
			reason:   "spec URL changed: create at the new URL, then prune ours at the old one",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Creates(decidetest.Stale(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)))),
		},
		{
			reason:   "ours at an old URL next to ours at the current one: keep current, prune old",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)), decidetest.Reg("we_2", 1)},
			recorded: "we_2",
			held:     []string{"we_2"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1), decidetest.Stale(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)))),
		},
		{
			reason:   "ours at a near-twin URL (trailing slash: an older spec) is stale and pruned, not reported",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.URL+"/")), decidetest.Reg("we_2", 1)},
			recorded: "we_2",
			held:     []string{"we_2"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1), decidetest.Stale(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.URL+"/")))),
		},
		{
			reason:   "the only held secret belongs to a stale registration: keep the one at the spec URL, recover its secret, prune the stale one",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)), decidetest.Reg("we_2", 1)},
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1), decidetest.ReplayStep(decidetest.Reg("we_2", 1)), decidetest.MarkStep(decidetest.Reg("we_2", 1)), decidetest.Stale(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)))),
		},

		// Foreign: never changed or deleted.
		{
			reason: "foreign registrations elsewhere (unmarked, other subscription, other cluster) are never pruned, even under Prune",
			observed: []providers.Registration{
				decidetest.Reg("we_1", 0),
				decidetest.Reg("we_f1", 1, decidetest.WithURL(decidetest.ElseURL), decidetest.Unmarked),
				decidetest.Reg("we_f2", 2, decidetest.WithURL(decidetest.ElseURL), decidetest.WithOwner(decidetest.OtherSub)),
				decidetest.Reg("we_f3", 3, decidetest.WithURL(decidetest.OldURL), decidetest.WithOwner(decidetest.OtherCluster)),
				decidetest.Reg("we_f4", 4, decidetest.WithURL(decidetest.OldURL), decidetest.WithOwner(decidetest.EarlierMe)),
			},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},
		{
			reason:   "foreign near-twin with a trailing slash: reported only, and still a create for the exact URL",
			observed: []providers.Registration{decidetest.Reg("we_f", 0, decidetest.WithURL(decidetest.URL+"/"), decidetest.Unmarked)},
			want:     decide.Plan{Decision: decide.Create, Steps: []decide.Step{decidetest.CreateStep()}, NearTwins: []providers.Registration{decidetest.Reg("we_f", 0, decidetest.WithURL(decidetest.URL+"/"), decidetest.Unmarked)}},
		},
		{
			reason:   "foreign near-twin over http instead of https: reported only",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_f", 1, decidetest.WithURL("http://hooks.example.com/hooks/shop/orders"), decidetest.Unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want: decide.Plan{
				Keep:      decidetest.Kept(decidetest.Reg("we_1", 0)),
				NearTwins: []providers.Registration{decidetest.Reg("we_f", 1, decidetest.WithURL("http://hooks.example.com/hooks/shop/orders"), decidetest.Unmarked)},
			},
		},
		{
			reason:   "near-twin carrying another subscription's marker: reported only, never pruned",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_f", 1, decidetest.WithURL("http://hooks.example.com/hooks/shop/orders/"), decidetest.WithOwner(decidetest.OtherSub))},
			recorded: "we_1",
			held:     []string{"we_1"},
			want: decide.Plan{
				Keep:      decidetest.Kept(decidetest.Reg("we_1", 0)),
				NearTwins: []providers.Registration{decidetest.Reg("we_f", 1, decidetest.WithURL("http://hooks.example.com/hooks/shop/orders/"), decidetest.WithOwner(decidetest.OtherSub))},
			},
		},

		// Conflict: the exact target is provably someone else's.
		{
			reason:           "same canonical URL carries another cluster's marker: conflict, no create, nothing touched",
			observed:         []providers.Registration{decidetest.Reg("we_x", 0, decidetest.WithOwner(decidetest.OtherCluster))},
			conflictMentions: []string{"we_x", "staging"},
		},
		{
			reason:           "same canonical URL (spelled differently) carries another subscription's marker: conflict, no create",
			observed:         []providers.Registration{decidetest.Reg("we_x", 0, decidetest.WithURL("https://Hooks.Example.com:443/hooks/shop/orders"), decidetest.WithOwner(decidetest.OtherSub))},
			conflictMentions: []string{"we_x", "shop/refunds"},
		},
		{
			reason:           "conflict while ours sits at an old URL: wait for a human, do not prune the only working hook",
			observed:         []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)), decidetest.Reg("we_x", 1, decidetest.WithOwner(decidetest.OtherSub))},
			recorded:         "we_1",
			held:             []string{"we_1"},
			conflictMentions: []string{"we_x"},
		},
		{
			reason:           "unmarked registration at the same URL with adoption Never: conflict, no second registration",
			observed:         []providers.Registration{decidetest.Reg("we_u", 0, decidetest.Unmarked)},
			adoption:         hookv1.AdoptionNever,
			conflictMentions: []string{"we_u", "policies.adoption"},
		},
		{
			reason:   "conflict is moot when ours also serves the URL: keep ours, leave the other owner's untouched",
			observed: []providers.Registration{decidetest.Reg("we_x", 0, decidetest.WithOwner(decidetest.OtherCluster)), decidetest.Reg("we_1", 1)},
			recorded: "we_1",
			held:     []string{"we_1"},
			twins:    hookv1.TwinsPrune,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 1)),
		},
		{
			reason:   "adoption Never does not stop us keeping our own marked registration",
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			held:     []string{"we_1"},
			current:  "we_1",
			adoption: hookv1.AdoptionNever,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},

		// Earlier incarnation: same cluster, namespace and name; the UID changed (deleted with
		// policies.deletion Orphan and re-applied).
		{
			reason:   "earlier incarnation of this subscription is adoptable: kept, marker rewritten to the new UID, secret recovered",
			observed: []providers.Registration{decidetest.Reg("we_old", 0, decidetest.WithOwner(decidetest.EarlierMe))},
			adoption: hookv1.AdoptionAdopt,
			want:     decidetest.Keeps(decidetest.Reg("we_old", 0, decidetest.WithOwner(decidetest.EarlierMe)), decidetest.ReplaceStep(decidetest.Reg("we_old", 0, decidetest.WithOwner(decidetest.EarlierMe)))),
		},

		// Keeper choice among several candidates.
		{
			reason:   "held secret beats recorded id and marker: keep the one whose secret we hold, no rotation",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_2", 1, decidetest.Unmarked)},
			recorded: "we_1",
			held:     []string{"we_2"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1, decidetest.Unmarked), decidetest.UpdateStep(decidetest.Reg("we_2", 1, decidetest.Unmarked), "ownership marker"), decidetest.MarkStep(decidetest.Reg("we_2", 1, decidetest.Unmarked)), decidetest.Twin(decidetest.Reg("we_1", 0))),
		},
		{
			reason:   "recorded id beats marker when no secret is held",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_2", 1, decidetest.Unmarked)},
			recorded: "we_2",
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1, decidetest.Unmarked), decidetest.ReplaceStep(decidetest.Reg("we_2", 1, decidetest.Unmarked))),
		},
		{
			reason:   "marker beats age: the newer marked one is kept over an older unmarked one",
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.Unmarked), decidetest.Reg("we_2", 5)},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 5), decidetest.ReplayStep(decidetest.Reg("we_2", 5)), decidetest.MarkStep(decidetest.Reg("we_2", 5)), decidetest.Twin(decidetest.Reg("we_1", 0, decidetest.Unmarked))),
		},
		{
			reason:   "otherwise the oldest is kept, whatever the list order",
			observed: []providers.Registration{decidetest.Reg("we_c", 2), decidetest.Reg("we_a", 0), decidetest.Reg("we_b", 1)},
			held:     []string{"we_x"},
			want:     decidetest.Keeps(decidetest.Reg("we_a", 0), decidetest.ReplayStep(decidetest.Reg("we_a", 0)), decidetest.MarkStep(decidetest.Reg("we_a", 0)), decidetest.Twin(decidetest.Reg("we_b", 1)), decidetest.Twin(decidetest.Reg("we_c", 2))),
		},
		{
			reason:   "created at the same second: the lowest id is kept, so two reconciles agree",
			observed: []providers.Registration{decidetest.Reg("we_b", 0), decidetest.Reg("we_a", 0)},
			want:     decidetest.Keeps(decidetest.Reg("we_a", 0), decidetest.ReplayStep(decidetest.Reg("we_a", 0)), decidetest.MarkStep(decidetest.Reg("we_a", 0)), decidetest.Twin(decidetest.Reg("we_b", 0))),
		},
		{
			reason:   "held and recorded beats held alone",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_2", 1)},
			recorded: "we_2",
			held:     []string{"we_1", "we_2"},
			want:     decidetest.Keeps(decidetest.Reg("we_2", 1), decidetest.Twin(decidetest.Reg("we_1", 0))),
		},

		// Another kind of registration on the same account (Stripe: a v2 event destination
		// beside v1 endpoints): never a match, never a twin, never pruned.
		{
			reason:   "a v2 destination of this subscription's on the same URL: a v1 plan creates its endpoint and leaves the destination alone",
			observed: []providers.Registration{decidetest.Reg("ed_1", 0, decidetest.WithVariant("v2/thin"))},
			held:     []string{"ed_1"},
			want:     decidetest.Creates(),
		},
		{
			reason:   "an unmarked v2 destination and a recorded v1 endpoint on one URL: keep the endpoint, no twin pruned",
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("ed_1", 1, decidetest.WithVariant("v2/snapshot"), decidetest.Unmarked)},
			recorded: "we_1",
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},
	}

	runPlanCases(t, decide.PlanInput{Caps: decidetest.StripeCaps}, cases)
}

// TestPlanInvariants checks, over every combination of a few registrations, what must hold
// whatever the mix: a registration that is not provably ours is never pruned, Create and Keep
// exclude each other, and nothing is created while a conflict stands.
func TestPlanInvariants(t *testing.T) {
	pool := []providers.Registration{
		decidetest.Reg("we_ours", 0),
		decidetest.Reg("we_ours_stale", 1, decidetest.WithURL(decidetest.OldURL)),
		decidetest.Reg("we_unmarked", 2, decidetest.Unmarked),
		decidetest.Reg("we_earlier", 3, decidetest.WithOwner(decidetest.EarlierMe)),
		decidetest.Reg("we_other_sub", 4, decidetest.WithOwner(decidetest.OtherSub)),
		decidetest.Reg("we_other_cluster", 5, decidetest.WithOwner(decidetest.OtherCluster)),
		decidetest.Reg("we_near", 6, decidetest.WithURL(decidetest.URL+"/"), decidetest.Unmarked),
		decidetest.Reg("we_else", 7, decidetest.WithURL(decidetest.ElseURL), decidetest.Unmarked),
		decidetest.Reg("we_other_stale", 8, decidetest.WithURL(decidetest.OldURL), decidetest.WithOwner(decidetest.OtherSub)),
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
				p := decide.ComputePlan(decide.PlanInput{Caps: decidetest.StripeCaps, Desired: decidetest.Desired(decidetest.URL), Observed: observed, Adoption: adoption, Twins: twins})
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
		{"our marker", decidetest.Reg("we_1", 0), "", true},
		{"our marker, another id recorded", decidetest.Reg("we_1", 0), "we_2", true},
		{"our UID in another cluster's marker is not ours", decidetest.Reg("we_1", 0, decidetest.WithOwner(providers.Owner{Cluster: "staging", Namespace: "shop", Name: "orders", UID: decidetest.Me.UID})), "", false},
		{"unmarked and not recorded", decidetest.Reg("we_1", 0, decidetest.Unmarked), "", false},
		{"unmarked but recorded", decidetest.Reg("we_1", 0, decidetest.Unmarked), "we_1", true},
		{"an earlier incarnation's marker, recorded", decidetest.Reg("we_1", 0, decidetest.WithOwner(decidetest.EarlierMe)), "we_1", true},
		{"an earlier incarnation's marker, not recorded", decidetest.Reg("we_1", 0, decidetest.WithOwner(decidetest.EarlierMe)), "", false},
		{"recorded, but another subscription's marker: the marker wins", decidetest.Reg("we_1", 0, decidetest.WithOwner(decidetest.OtherSub)), "we_1", false},
		{"recorded, but another cluster's marker: the marker wins", decidetest.Reg("we_1", 0, decidetest.WithOwner(decidetest.OtherCluster)), "we_1", false},
	}
	for _, c := range cases {
		if got := (decide.Ownership{Me: decidetest.Me, Markers: true, RecordedID: c.recorded}).Owns(c.r); got != c.want {
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
