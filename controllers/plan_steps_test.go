package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// Capabilities of the provider shapes the cases below are written for.
var (
	// A provider that returns the secret on create only and cannot replay a create (PagerDuty).
	unreplayableCaps = providers.Capabilities{Markers: true, Secret: providers.SecretReturnedOnCreate, Fields: providers.FieldDescription | providers.FieldMarker}
	// A provider that reveals the secret again (Zendesk, Svix: fetched; Resend: readable).
	fetchedCaps = providers.Capabilities{Markers: true, Secret: providers.SecretFetched, Fields: providers.FieldDescription | providers.FieldMarker}
	// A provider with no update at all and a client-chosen secret (Calendly with a signing key).
	noUpdateCaps = providers.Capabilities{Secret: providers.SecretClientChosen,
		Recreate: providers.FieldURL | providers.FieldEvents | providers.FieldDescription | providers.FieldDisabled}
	// A provider that cannot change a registration's events in place.
	recreateEventsCaps = providers.Capabilities{Markers: true, Secret: providers.SecretReturnedOnCreate, ReplayableCreate: true,
		Fields: providers.FieldDescription | providers.FieldMarker, Recreate: providers.FieldEvents}
	// Deliveries are not signed.
	unsignedCaps = providers.Capabilities{Markers: true, Secret: providers.SecretNone, Fields: providers.FieldDescription | providers.FieldMarker}
)

// TestPlanSteps: every decision the executor used to take itself (how a lost secret comes back,
// replace or update, what a replacement leaves for the next round, repairing an out-of-band
// edit) is a row here, with the whole step, keys and parameters included.
func TestPlanSteps(t *testing.T) {
	const gen = 3
	ours := reg("we_1", 0)
	createFor := func(caps providers.Capabilities, recorded string) decide.Step {
		return decide.Step{Kind: decide.StepCreate, Desired: planDesired(planURL), Key: decide.CreateKey(planMe.UID, gen, recorded), Secret: decide.SecretSourceFor(caps)}
	}
	replaceOf := func(r providers.Registration, caps providers.Capabilities, fields ...string) decide.Step {
		return decide.Step{Kind: decide.StepReplace, Registration: r, Desired: planDesired(planURL), Key: decide.RotateKey(planMe.UID, gen, r.ID), Secret: decide.SecretSourceFor(caps), Drift: fields}
	}
	cases := []struct {
		reason      string
		caps        providers.Capabilities
		canPing     bool
		observed    []providers.Registration
		recorded    string
		recordedURL string
		held        []string
		current     string
		pending     bool
		twins       hookv1.TwinsPolicy
		rounds      decide.Rounds
		want        decide.Plan
	}{
		// How a new registration's secret is obtained, and the ping after it.
		{
			reason: "returned on create: create with the generation's key, and store what the create returns",
			caps:   stripeCaps,
			want:   decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(stripeCaps, "")}},
		},
		{
			reason: "client-chosen: create with a secret chosen and stored first; ping afterwards where the provider can",
			caps:   markerlessCaps, canPing: true,
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{func() decide.Step { s := createFor(markerlessCaps, ""); s.Ping = true; return s }()}},
		},
		{
			reason:   "unsigned deliveries: create with nothing to store, and no secret to make current later",
			caps:     unsignedCaps,
			observed: []providers.Registration{reg("we_9", 0, withURL(planOldURL))}, recorded: "we_9", held: nil,
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(unsignedCaps, "we_9"), staleAt(reg("we_9", 0, withURL(planOldURL)))}},
		},
		{
			reason:   "unsigned deliveries: a kept registration without a held secret needs none",
			caps:     unsignedCaps,
			observed: []providers.Registration{ours}, recorded: "we_1",
			want: keeps(ours),
		},

		// A lost secret, per secret mode.
		{
			reason:   "returned on create, replayable, our key and our marker: replay the original create with its own key and parameters",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0, withEvents("invoice.paid"))}, recorded: "we_1",
			want: keeps(reg("we_1", 0, withEvents("invoice.paid")),
				decide.Step{Kind: decide.StepReplay, Registration: reg("we_1", 0, withEvents("invoice.paid")), Key: "hookwarden-create-" + planMe.UID + "-g1",
					Desired: providers.Desired{URL: planURL, Events: []string{"invoice.paid"}, Description: planDesc, Owner: planMe}},
				decide.Step{Kind: decide.StepUpdate, Registration: reg("we_1", 0, withEvents("invoice.paid")), Desired: planDesired(planURL), Drift: []string{"events"}},
				markStep(reg("we_1", 0, withEvents("invoice.paid"))),
			),
		},
		{
			reason:   "the provider refused the replay in an earlier round: replace make-before-break with the rotation key",
			caps:     stripeCaps,
			observed: []providers.Registration{ours}, recorded: "we_1",
			rounds: decide.Rounds{ReplayRefused: map[string]bool{"we_1": true}},
			want:   keeps(ours, replaceOf(ours, stripeCaps)),
		},
		{
			reason:   "returned on create, not replayable: replace, and nothing after it this round",
			caps:     unreplayableCaps,
			observed: []providers.Registration{ours, reg("we_2", 1)}, recorded: "we_1",
			want: keeps(ours, replaceOf(ours, unreplayableCaps)),
		},
		{
			reason:   "readable or fetched: read the secret back, then repair drift and make it current",
			caps:     fetchedCaps,
			observed: []providers.Registration{reg("we_1", 0, withDescription("edited"))}, recorded: "we_1",
			want: keeps(reg("we_1", 0, withDescription("edited")), fetchStep(reg("we_1", 0, withDescription("edited"))),
				updateStep(reg("we_1", 0, withDescription("edited")), "description"), markStep(reg("we_1", 0, withDescription("edited")))),
		},
		{
			reason:   "client-chosen: set a new secret in place; that update carries the spec, so no second update, and it makes the secret current",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("1", 0, withDisabled)}, recorded: "1",
			want: keeps(hook("1", 0, withDisabled), decide.Step{Kind: decide.StepSetSecret, Registration: hook("1", 0, withDisabled), Desired: planDesired(planURL)}),
		},
		{
			reason:   "client-chosen on a provider with no update: the secret cannot be set in place, so replace",
			caps:     noUpdateCaps,
			observed: []providers.Registration{hook("1", 0)}, recorded: "1",
			want: keeps(hook("1", 0), replaceOf(hook("1", 0), noUpdateCaps)),
		},

		// Drift the provider cannot change in place.
		{
			reason:   "events drifted where events cannot change in place: replace (make-before-break) instead of updating",
			caps:     recreateEventsCaps,
			observed: []providers.Registration{reg("we_1", 0, withEvents("invoice.paid"), withDescription("edited"))}, recorded: "we_1", held: []string{"we_1"},
			want: keeps(reg("we_1", 0, withEvents("invoice.paid"), withDescription("edited")),
				replaceOf(reg("we_1", 0, withEvents("invoice.paid"), withDescription("edited")), recreateEventsCaps, "events")),
		},
		{
			reason:   "only fields that can change in place drifted: update, no replacement",
			caps:     recreateEventsCaps,
			observed: []providers.Registration{reg("we_1", 0, withDescription("edited"))}, recorded: "we_1", held: []string{"we_1"},
			want: keeps(reg("we_1", 0, withDescription("edited")), updateStep(reg("we_1", 0, withDescription("edited")), "description")),
		},
		{
			reason:   "no update at all and the URL spelled differently: replace",
			caps:     noUpdateCaps,
			observed: []providers.Registration{hook("1", 0, withURL("https://HOOKS.example.com/hooks/shop/orders"))}, recorded: "1", held: []string{"1"},
			want: keeps(hook("1", 0, withURL("https://HOOKS.example.com/hooks/shop/orders")),
				replaceOf(hook("1", 0, withURL("https://HOOKS.example.com/hooks/shop/orders")), noUpdateCaps, "url")),
		},

		// The round after a replacement.
		{
			reason:   "after a replacement the new one is kept and made current; the replaced one is pruned as rotated, though recorded and matching",
			caps:     unreplayableCaps,
			observed: []providers.Registration{ours, reg("we_new", 5)}, recorded: "we_1", held: []string{"we_new"},
			rounds: decide.Rounds{Retired: map[string]bool{"we_1": true}},
			want:   keeps(reg("we_new", 5), markStep(reg("we_new", 5)), retiredAt(ours)),
		},
		{
			reason:   "a replaced registration is pruned even under policies.twins Keep: a rotation always finishes",
			caps:     recreateEventsCaps,
			observed: []providers.Registration{reg("we_1", 0, withEvents("invoice.paid")), reg("we_new", 5), reg("we_twin", 6)},
			recorded: "we_1", held: []string{"we_1", "we_new"}, twins: hookv1.TwinsKeep,
			rounds: decide.Rounds{Retired: map[string]bool{"we_1": true}},
			want: decide.Plan{Keep: keep(reg("we_new", 5)), KeptTwins: []providers.Registration{reg("we_twin", 6)},
				Steps: []decide.Step{markStep(reg("we_new", 5)), retiredAt(reg("we_1", 0, withEvents("invoice.paid")))}},
		},
		{
			reason:   "the replay made a new registration (window passed): it is kept, updated to the spec, and the one it replaces goes",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0, withDescription("old")), reg("we_2", 5, withDescription("old"))},
			recorded: "we_1", held: []string{"we_2"},
			rounds: decide.Rounds{Retired: map[string]bool{"we_1": true}},
			want: keeps(reg("we_2", 5, withDescription("old")), updateStep(reg("we_2", 5, withDescription("old")), "description"),
				markStep(reg("we_2", 5, withDescription("old"))), retiredAt(reg("we_1", 0, withDescription("old")))),
		},

		// A vanished registration's secret.
		{
			reason:   "the recorded registration vanished: forget its secret after the create, before pruning",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_0", 0, withURL(planOldURL))}, recorded: "we_1", held: []string{"we_1", "we_0"},
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(stripeCaps, "we_1"), forgetStep("we_1"), staleAt(reg("we_0", 0, withURL(planOldURL)))}},
		},

		// Edited out of band at the provider, the spec unchanged.
		{
			reason:   "the recorded registration's URL and events were changed at the provider while status.url is the spec's: repair in place, keep its id",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0, withURL(planElse), withEvents("charge.refunded"))},
			recorded: "we_1", recordedURL: planURL, held: []string{"we_1"},
			want: keeps(reg("we_1", 0, withURL(planElse), withEvents("charge.refunded")),
				updateStep(reg("we_1", 0, withURL(planElse), withEvents("charge.refunded")), "url", "events")),
		},
		{
			reason:   "the same on a provider without markers (GitLab, GitHub): repaired in place",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("1", 0, withURL(planElse), withEvents("push"))},
			recorded: "1", recordedURL: planURL, held: []string{"1"},
			want: keeps(hook("1", 0, withURL(planElse), withEvents("push")), updateStep(hook("1", 0, withURL(planElse), withEvents("push")), "url", "events")),
		},
		{
			reason:   "moved out of band where the URL cannot change in place: replaced, make-before-break",
			caps:     noUpdateCaps,
			observed: []providers.Registration{hook("1", 0, withURL(planElse))},
			recorded: "1", recordedURL: planURL, held: []string{"1"},
			want: keeps(hook("1", 0, withURL(planElse)), replaceOf(hook("1", 0, withURL(planElse)), noUpdateCaps, "url")),
		},
		{
			reason:   "the spec's URL changed (status.url is the old one): make-before-break, create at the new URL and prune the old one",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0, withURL(planOldURL))},
			recorded: "we_1", recordedURL: planOldURL, held: []string{"we_1"},
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(stripeCaps, "we_1"), staleAt(reg("we_1", 0, withURL(planOldURL)))}},
		},
		{
			reason:   "an unrecorded registration of ours elsewhere is stale, not repaired: only the recorded one moved out of band",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0), reg("we_2", 1, withURL(planElse))},
			recorded: "we_1", recordedURL: planURL, held: []string{"we_1"},
			want: keeps(ours, staleAt(reg("we_2", 1, withURL(planElse)))),
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			in := decide.PlanInput{
				Caps: c.caps, CanPing: c.canPing, Desired: planDesired(planURL), Generation: gen, Observed: c.observed,
				RecordedID: c.recorded, RecordedURL: c.recordedURL, HeldSecrets: heldSet(c.held),
				CurrentID: currentOf(c.current, c.recorded, c.held), PendingSecret: c.pending, ReceiverURL: planReceiverURL,
				Adoption: hookv1.AdoptionAdopt, Twins: c.twins, Rounds: c.rounds,
			}
			got := decide.ComputePlan(in)
			checkStepOrder(t, c.reason, got.Steps)
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("computePlan mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
		})
	}
}

// TestPlanUnfit: a registration whose object does not fit the provider's shape is foreign
// (reported, never touched) unless what could be read proves it ours; then the subscription
// stalls and nothing is done, since nothing can be compared with the spec.
func TestPlanUnfit(t *testing.T) {
	unfit := func(r *providers.Registration) { r.Unfit = "config.url is missing" }
	cases := []struct {
		reason   string
		caps     providers.Capabilities
		observed []providers.Registration
		recorded string
		held     []string
		want     decide.Plan
	}{
		{
			reason:   "a foreign unfit registration beside ours: reported, ours kept as if it were not there",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("1", 0), hook("9", 1, unfit)},
			recorded: "1", held: []string{"1"},
			want: decide.Plan{Keep: keep(hook("1", 0)), Unfit: []providers.Registration{hook("9", 1, unfit)}},
		},
		{
			reason:   "an unfit registration at the desired URL that is not provably ours is not adopted: create, report it",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("9", 1, unfit)},
			want:     decide.Plan{Decision: decide.Create, Steps: []decide.Step{createStep()}, Unfit: []providers.Registration{hook("9", 1, unfit)}},
		},
		{
			reason:   "an unfit registration whose id could not be read is nobody's, even at this subscription's receiver URL",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("1", 0), hook("", 1, unfit, withURL(planReceiverURL))},
			recorded: "1", held: []string{"1"},
			want: decide.Plan{Keep: keep(hook("1", 0)), Unfit: []providers.Registration{hook("", 1, unfit, withURL(planReceiverURL))}},
		},
		{
			reason:   "our recorded registration no longer fits: stall, nothing created, nothing pruned",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("1", 0, unfit), hook("2", 1, withURL(planOldURL))},
			recorded: "1", held: []string{"1", "2"},
			want: decide.Plan{Decision: decide.Stall},
		},
		{
			reason:   "ours by its held secret (status wiped) and unfit: stall",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("1", 0, unfit)},
			held:     []string{"1"},
			want:     decide.Plan{Decision: decide.Stall},
		},
		{
			reason:   "ours by the marker that could still be read: stall",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0, unfit)},
			want:     decide.Plan{Decision: decide.Stall},
		},
	}
	for i := range cases {
		if cases[i].want.Decision == decide.Stall {
			cases[i].want.StallReason = hookv1.ReasonUnfitRegistration
		}
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			got := decide.ComputePlan(decide.PlanInput{Caps: c.caps, Desired: planDesired(planURL), Observed: c.observed, RecordedID: c.recorded,
				HeldSecrets: heldSet(c.held), CurrentID: currentOf("", c.recorded, c.held), ReceiverURL: planReceiverURL, Adoption: hookv1.AdoptionAdopt})
			if c.want.Decision == decide.Stall {
				if got.Stall == "" || len(got.Steps) > 0 {
					t.Errorf("decision %v, stall %q, steps %v; want a stall naming the problem and no step", got.Decision, got.Stall, got.Steps)
				}
				got.Stall = ""
			}
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty(), planStepDetail); diff != "" {
				t.Errorf("computePlan mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
		})
	}
}
