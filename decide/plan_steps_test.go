package decide_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
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
	ours := decidetest.Reg("we_1", 0)
	createFor := func(caps providers.Capabilities, recorded string) decide.Step {
		return decide.Step{Kind: decide.StepCreate, Desired: decidetest.Desired(decidetest.URL), Key: decide.CreateKey(decidetest.Me.UID, gen, recorded), Secret: decide.SecretSourceFor(caps)}
	}
	replaceOf := func(r providers.Registration, caps providers.Capabilities, fields ...string) decide.Step {
		return decide.Step{Kind: decide.StepReplace, Registration: r, Desired: decidetest.Desired(decidetest.URL), Key: decide.RotateKey(decidetest.Me.UID, gen, r.ID), Secret: decide.SecretSourceFor(caps), Drift: fields}
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
			caps:   decidetest.StripeCaps,
			want:   decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(decidetest.StripeCaps, "")}},
		},
		{
			reason: "client-chosen: create with a secret chosen and stored first; ping afterwards where the provider can",
			caps:   decidetest.MarkerlessCaps, canPing: true,
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{func() decide.Step { s := createFor(decidetest.MarkerlessCaps, ""); s.Ping = true; return s }()}},
		},
		{
			reason:   "unsigned deliveries: create with nothing to store, and no secret to make current later",
			caps:     unsignedCaps,
			observed: []providers.Registration{decidetest.Reg("we_9", 0, decidetest.WithURL(decidetest.OldURL))}, recorded: "we_9", held: nil,
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(unsignedCaps, "we_9"), decidetest.Stale(decidetest.Reg("we_9", 0, decidetest.WithURL(decidetest.OldURL)))}},
		},
		{
			reason:   "unsigned deliveries: a kept registration without a held secret needs none",
			caps:     unsignedCaps,
			observed: []providers.Registration{ours}, recorded: "we_1",
			want: decidetest.Keeps(ours),
		},

		// A lost secret, per secret mode.
		{
			reason:   "returned on create, replayable, our key and our marker: replay the original create with its own key and parameters",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"))}, recorded: "we_1",
			want: decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")),
				decide.Step{Kind: decide.StepReplay, Registration: decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")), Key: "hookwarden-create-" + decidetest.Me.UID + "-g1",
					Desired: providers.Desired{URL: decidetest.URL, Events: []string{"invoice.paid"}, Description: decidetest.Description, Owner: decidetest.Me}},
				decide.Step{Kind: decide.StepUpdate, Registration: decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")), Desired: decidetest.Desired(decidetest.URL), Drift: []string{"events"}},
				decidetest.MarkStep(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"))),
			),
		},
		{
			reason:   "the provider refused the replay in an earlier round: replace make-before-break with the rotation key",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{ours}, recorded: "we_1",
			rounds: decide.Rounds{ReplayRefused: map[string]bool{"we_1": true}},
			want:   decidetest.Keeps(ours, replaceOf(ours, decidetest.StripeCaps)),
		},
		{
			reason:   "returned on create, not replayable: replace, and nothing after it this round",
			caps:     unreplayableCaps,
			observed: []providers.Registration{ours, decidetest.Reg("we_2", 1)}, recorded: "we_1",
			want: decidetest.Keeps(ours, replaceOf(ours, unreplayableCaps)),
		},
		{
			reason:   "readable or fetched: read the secret back, then repair drift and make it current",
			caps:     fetchedCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDescription("edited"))}, recorded: "we_1",
			want: decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithDescription("edited")), decidetest.FetchStep(decidetest.Reg("we_1", 0, decidetest.WithDescription("edited"))),
				decidetest.UpdateStep(decidetest.Reg("we_1", 0, decidetest.WithDescription("edited")), "description"), decidetest.MarkStep(decidetest.Reg("we_1", 0, decidetest.WithDescription("edited")))),
		},
		{
			reason:   "client-chosen: set a new secret in place; that update carries the spec, so no second update, and it makes the secret current",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0, decidetest.WithDisabled)}, recorded: "1",
			want: decidetest.Keeps(decidetest.Hook("1", 0, decidetest.WithDisabled), decide.Step{Kind: decide.StepSetSecret, Registration: decidetest.Hook("1", 0, decidetest.WithDisabled), Desired: decidetest.Desired(decidetest.URL)}),
		},
		{
			reason:   "client-chosen on a provider with no update: the secret cannot be set in place, so replace",
			caps:     noUpdateCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0)}, recorded: "1",
			want: decidetest.Keeps(decidetest.Hook("1", 0), replaceOf(decidetest.Hook("1", 0), noUpdateCaps)),
		},

		// Drift the provider cannot change in place.
		{
			reason:   "events drifted where events cannot change in place: replace (make-before-break) instead of updating",
			caps:     recreateEventsCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"), decidetest.WithDescription("edited"))}, recorded: "we_1", held: []string{"we_1"},
			want: decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"), decidetest.WithDescription("edited")),
				replaceOf(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"), decidetest.WithDescription("edited")), recreateEventsCaps, "events")),
		},
		{
			reason:   "only fields that can change in place drifted: update, no replacement",
			caps:     recreateEventsCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDescription("edited"))}, recorded: "we_1", held: []string{"we_1"},
			want: decidetest.KeepsUpdating(decidetest.Reg("we_1", 0, decidetest.WithDescription("edited")), "description"),
		},
		{
			reason:   "no update at all and the URL spelled differently: replace",
			caps:     noUpdateCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0, decidetest.WithURL("https://HOOKS.example.com/hooks/shop/orders"))}, recorded: "1", held: []string{"1"},
			want: decidetest.Keeps(decidetest.Hook("1", 0, decidetest.WithURL("https://HOOKS.example.com/hooks/shop/orders")),
				replaceOf(decidetest.Hook("1", 0, decidetest.WithURL("https://HOOKS.example.com/hooks/shop/orders")), noUpdateCaps, "url")),
		},

		// The round after a replacement.
		{
			reason:   "after a replacement the new one is kept and made current; the replaced one is pruned as rotated, though recorded and matching",
			caps:     unreplayableCaps,
			observed: []providers.Registration{ours, decidetest.Reg("we_new", 5)}, recorded: "we_1", held: []string{"we_new"},
			rounds: decide.Rounds{Retired: map[string]bool{"we_1": true}},
			want:   decidetest.Keeps(decidetest.Reg("we_new", 5), decidetest.MarkStep(decidetest.Reg("we_new", 5)), decidetest.Retired(ours)),
		},
		{
			reason:   "a replaced registration is pruned even under policies.twins Keep: a rotation always finishes",
			caps:     recreateEventsCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")), decidetest.Reg("we_new", 5), decidetest.Reg("we_twin", 6)},
			recorded: "we_1", held: []string{"we_1", "we_new"}, twins: hookv1.TwinsKeep,
			rounds: decide.Rounds{Retired: map[string]bool{"we_1": true}},
			want: decide.Plan{Keep: decidetest.Kept(decidetest.Reg("we_new", 5)), KeptTwins: []providers.Registration{decidetest.Reg("we_twin", 6)},
				Steps: []decide.Step{decidetest.MarkStep(decidetest.Reg("we_new", 5)), decidetest.Retired(decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")))}},
		},
		{
			reason:   "the replay made a new registration (window passed): it is kept, updated to the spec, and the one it replaces goes",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithDescription("old")), decidetest.Reg("we_2", 5, decidetest.WithDescription("old"))},
			recorded: "we_1", held: []string{"we_2"},
			rounds: decide.Rounds{Retired: map[string]bool{"we_1": true}},
			want: decidetest.Keeps(decidetest.Reg("we_2", 5, decidetest.WithDescription("old")), decidetest.UpdateStep(decidetest.Reg("we_2", 5, decidetest.WithDescription("old")), "description"),
				decidetest.MarkStep(decidetest.Reg("we_2", 5, decidetest.WithDescription("old"))), decidetest.Retired(decidetest.Reg("we_1", 0, decidetest.WithDescription("old")))),
		},

		// A vanished registration's secret.
		{
			reason:   "the recorded registration vanished: forget its secret after the create, before pruning",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL))}, recorded: "we_1", held: []string{"we_1", "we_0"},
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(decidetest.StripeCaps, "we_1"), decidetest.ForgetStep("we_1"), decidetest.Stale(decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL)))}},
		},

		// Edited out of band at the provider, the spec unchanged.
		{
			reason:   "the recorded registration's URL and events were changed at the provider while status.url is the spec's: repair in place, keep its id",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.ElseURL), decidetest.WithEvents("charge.refunded"))},
			recorded: "we_1", recordedURL: decidetest.URL, held: []string{"we_1"},
			want: decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.ElseURL), decidetest.WithEvents("charge.refunded")),
				decidetest.UpdateStep(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.ElseURL), decidetest.WithEvents("charge.refunded")), "url", "events")),
		},
		{
			reason:   "the same on a provider without markers (GitLab, GitHub): repaired in place",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0, decidetest.WithURL(decidetest.ElseURL), decidetest.WithEvents("push"))},
			recorded: "1", recordedURL: decidetest.URL, held: []string{"1"},
			want: decidetest.KeepsUpdating(decidetest.Hook("1", 0, decidetest.WithURL(decidetest.ElseURL), decidetest.WithEvents("push")), "url", "events"),
		},
		{
			reason:   "moved out of band where the URL cannot change in place: replaced, make-before-break",
			caps:     noUpdateCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0, decidetest.WithURL(decidetest.ElseURL))},
			recorded: "1", recordedURL: decidetest.URL, held: []string{"1"},
			want: decidetest.Keeps(decidetest.Hook("1", 0, decidetest.WithURL(decidetest.ElseURL)), replaceOf(decidetest.Hook("1", 0, decidetest.WithURL(decidetest.ElseURL)), noUpdateCaps, "url")),
		},
		{
			reason:   "the spec's URL changed (status.url is the old one): make-before-break, create at the new URL and prune the old one",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL))},
			recorded: "we_1", recordedURL: decidetest.OldURL, held: []string{"we_1"},
			want: decide.Plan{Decision: decide.Create, Steps: []decide.Step{createFor(decidetest.StripeCaps, "we_1"), decidetest.Stale(decidetest.Reg("we_1", 0, decidetest.WithURL(decidetest.OldURL)))}},
		},
		{
			reason:   "an unrecorded registration of ours elsewhere is stale, not repaired: only the recorded one moved out of band",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0), decidetest.Reg("we_2", 1, decidetest.WithURL(decidetest.ElseURL))},
			recorded: "we_1", recordedURL: decidetest.URL, held: []string{"we_1"},
			want: decidetest.Keeps(ours, decidetest.Stale(decidetest.Reg("we_2", 1, decidetest.WithURL(decidetest.ElseURL)))),
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			in := decide.PlanInput{
				Caps: c.caps, CanPing: c.canPing, Desired: decidetest.Desired(decidetest.URL), Generation: gen, Observed: c.observed,
				RecordedID: c.recorded, RecordedURL: c.recordedURL, HeldSecrets: decidetest.HeldSet(c.held),
				CurrentID: decidetest.CurrentOf(c.current, c.recorded, c.held), PendingSecret: c.pending, ReceiverURL: decidetest.ReceiverURL,
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
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("9", 1, unfit)},
			recorded: "1", held: []string{"1"},
			want: decide.Plan{Keep: decidetest.Kept(decidetest.Hook("1", 0)), Unfit: []providers.Registration{decidetest.Hook("9", 1, unfit)}},
		},
		{
			reason:   "an unfit registration at the desired URL that is not provably ours is not adopted: create, report it",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("9", 1, unfit)},
			want:     decide.Plan{Decision: decide.Create, Steps: []decide.Step{decidetest.CreateStep()}, Unfit: []providers.Registration{decidetest.Hook("9", 1, unfit)}},
		},
		{
			reason:   "an unfit registration whose id could not be read is nobody's, even at this subscription's receiver URL",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("", 1, unfit, decidetest.WithURL(decidetest.ReceiverURL))},
			recorded: "1", held: []string{"1"},
			want: decide.Plan{Keep: decidetest.Kept(decidetest.Hook("1", 0)), Unfit: []providers.Registration{decidetest.Hook("", 1, unfit, decidetest.WithURL(decidetest.ReceiverURL))}},
		},
		{
			reason:   "our recorded registration no longer fits: stall, nothing created, nothing pruned",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0, unfit), decidetest.Hook("2", 1, decidetest.WithURL(decidetest.OldURL))},
			recorded: "1", held: []string{"1", "2"},
			want: decide.Plan{Decision: decide.Stall},
		},
		{
			reason:   "ours by its held secret (status wiped) and unfit: stall",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0, unfit)},
			held:     []string{"1"},
			want:     decide.Plan{Decision: decide.Stall},
		},
		{
			reason:   "ours by the marker that could still be read: stall",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0, unfit)},
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
			got := decide.ComputePlan(decide.PlanInput{Caps: c.caps, Desired: decidetest.Desired(decidetest.URL), Observed: c.observed, RecordedID: c.recorded,
				HeldSecrets: decidetest.HeldSet(c.held), CurrentID: decidetest.CurrentOf("", c.recorded, c.held), ReceiverURL: decidetest.ReceiverURL, Adoption: hookv1.AdoptionAdopt})
			if c.want.Decision == decide.Stall {
				if got.Stall == "" || len(got.Steps) > 0 {
					t.Errorf("decision %v, stall %q, steps %v; want a stall naming the problem and no step", got.Decision, got.Stall, got.Steps)
				}
				got.Stall = ""
			}
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty(), decidetest.StepDetail); diff != "" {
				t.Errorf("computePlan mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
		})
	}
}
