package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// markerlessCaps are those of a provider like GitHub: no marker, a secret the client chooses and
// resends on every update, and no description.
var markerlessCaps = providers.Capabilities{
	Secret:            providers.SecretClientChosen,
	UpdateNeedsSecret: true,
	Fields:            providers.FieldDisabled,
}

const planReceiverURL = "https://hooks.example.com/base/hooks/shop/orders"

// hook is a registration as a provider without markers reports it: matching the desired one
// (URL, events), with no owner, no create key and no description.
func hook(id string, minutesAfterT0 int, opts ...func(*providers.Registration)) providers.Registration {
	r := reg(id, minutesAfterT0, unmarked, withDescription(""))
	for _, o := range opts {
		o(&r)
	}
	return r
}

func misconfigured(fields ...string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Misconfigured = fields }
}

// TestPlanWithoutMarkers: where the provider cannot store a marker, a registration is ours only
// when proven (recorded id, held secret, the bundled receiver's URL); an unproven one is adopted
// only under Adopt when it is the only one serving the spec, and is never pruned; fields the
// provider does not have never drift.
func TestPlanWithoutMarkers(t *testing.T) {
	cases := []struct {
		reason           string
		url              string
		observed         []providers.Registration
		recorded         string
		held             []string
		current          string
		pending          bool
		adoption         hookv1.AdoptionPolicy
		twins            hookv1.TwinsPolicy
		want             decide.Plan
		conflictMentions []string
	}{
		{
			reason: "empty target: create",
			want:   creates(),
		},
		{
			reason:   "recorded and held: keep, nothing to do; no description or marker drift",
			observed: []providers.Registration{hook("1", 0)},
			recorded: "1",
			held:     []string{"1"},
			want:     keeps(hook("1", 0)),
		},
		{
			reason:   "held but not recorded (status wiped): still ours by its secret",
			observed: []providers.Registration{hook("1", 0)},
			held:     []string{"1"},
			current:  "1",
			adoption: hookv1.AdoptionNever,
			want:     keeps(hook("1", 0)),
		},
		{
			reason:   "recorded, secret not held (Secret deleted): keep it and set a new secret on it",
			observed: []providers.Registration{hook("1", 0)},
			recorded: "1",
			want:     keeps(hook("1", 0), setSecretStep(hook("1", 0))),
		},
		{
			reason:   "held, with a pending secret: finish setting the pending one first",
			observed: []providers.Registration{hook("1", 0)},
			recorded: "1",
			held:     []string{"1"},
			pending:  true,
			want:     keeps(hook("1", 0), setSecretStep(hook("1", 0))),
		},
		{
			reason:   "the only unproven hook serving the spec, Adopt: adopted, and its secret is set",
			observed: []providers.Registration{hook("9", 0)},
			pending:  true,
			want:     keeps(hook("9", 0), setSecretStep(hook("9", 0))),
		},
		{
			reason:           "the only unproven hook serving the spec, Never: conflict, no create",
			observed:         []providers.Registration{hook("9", 0)},
			adoption:         hookv1.AdoptionNever,
			want:             decide.Plan{Unproven: []providers.Registration{hook("9", 0)}},
			conflictMentions: []string{"9", "cannot be proven ours", "adoption is Never"},
		},
		{
			reason:           "two unproven hooks serving the spec: adopting one would be a guess; neither created nor pruned",
			observed:         []providers.Registration{hook("8", 0), hook("9", 1)},
			want:             decide.Plan{Unproven: []providers.Registration{hook("8", 0), hook("9", 1)}},
			conflictMentions: []string{"8", "9", "none can be proven ours"},
		},
		{
			reason:   "a proven hook beside unproven look-alikes: keep ours, report the others, prune none",
			observed: []providers.Registration{hook("1", 0), hook("8", 1), hook("9", 2, withEvents("push"))},
			recorded: "1",
			held:     []string{"1"},
			want:     decide.Plan{Keep: keep(hook("1", 0)), Unproven: []providers.Registration{hook("9", 2, withEvents("push")), hook("8", 1)}},
		},
		{
			reason:   "an unproven hook for the URL with other events is not ours to change: create, report it",
			observed: []providers.Registration{hook("9", 0, withEvents("push"))},
			want:     decide.Plan{Decision: decide.Create, Steps: []decide.Step{createStep()}, Unproven: []providers.Registration{hook("9", 0, withEvents("push"))}},
		},
		{
			reason:   "two proven hooks (both secrets held): keep the recorded one, prune the twin",
			observed: []providers.Registration{hook("1", 0), hook("2", 1)},
			recorded: "2",
			held:     []string{"1", "2"},
			want:     keeps(hook("2", 1), twin(hook("1", 0))),
		},
		{
			reason:   "proven twins under Keep: reported, not pruned",
			observed: []providers.Registration{hook("1", 0), hook("2", 1)},
			recorded: "2",
			held:     []string{"1", "2"},
			twins:    hookv1.TwinsKeep,
			want:     decide.Plan{Keep: keep(hook("2", 1)), KeptTwins: []providers.Registration{hook("1", 0)}},
		},
		{
			reason:   "ours by its held secret, for a URL the spec no longer names: stale, pruned",
			observed: []providers.Registration{hook("1", 0), hook("2", 1, withURL(planOldURL))},
			recorded: "1",
			held:     []string{"1", "2"},
			want:     keeps(hook("1", 0), staleAt(hook("2", 1, withURL(planOldURL)))),
		},
		{
			reason:   "unproven hooks elsewhere are foreign, whatever their events",
			observed: []providers.Registration{hook("7", 0, withURL(planElse)), hook("8", 0, withURL(planOldURL))},
			want:     creates(),
		},
		{
			reason:   "the bundled receiver's URL for this subscription proves ownership, even unrecorded and under Never",
			url:      planReceiverURL,
			observed: []providers.Registration{hook("5", 0, withURL(planReceiverURL)), hook("6", 1, withURL(planReceiverURL))},
			adoption: hookv1.AdoptionNever,
			want:     keeps(hook("5", 0, withURL(planReceiverURL)), setSecretStep(hook("5", 0, withURL(planReceiverURL))), twin(hook("6", 1, withURL(planReceiverURL)))),
		},
		{
			reason:   "a receiver-URL hook left from when the spec named the receiver is stale",
			observed: []providers.Registration{hook("1", 0), hook("5", 0, withURL(planReceiverURL))},
			recorded: "1",
			held:     []string{"1"},
			want:     keeps(hook("1", 0), staleAt(hook("5", 0, withURL(planReceiverURL)))),
		},
		{
			reason:   "disabled differs and the provider reports settings off: drift, but never description or marker",
			observed: []providers.Registration{hook("1", 0, withDisabled, misconfigured("content_type"))},
			recorded: "1",
			held:     []string{"1"},
			want:     keeps(hook("1", 0, withDisabled, misconfigured("content_type")), updateStep(hook("1", 0, withDisabled, misconfigured("content_type")), "disabled", "content_type")),
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
				Caps: markerlessCaps, Desired: planDesired(url), Observed: c.observed, RecordedID: c.recorded,
				HeldSecrets: heldSet(c.held), CurrentID: currentOf(c.current, c.recorded, c.held), PendingSecret: c.pending,
				ReceiverURL: planReceiverURL, Adoption: c.adoption, Twins: c.twins,
			}
			got := decide.ComputePlan(in)
			in.Keys = sharedKeys
			if d := cmp.Diff(got, decide.ComputePlan(in), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("computePlan with the account's URL table differs (-without +with) (%s):\n%s", c.reason, d)
			}
			for _, m := range c.conflictMentions {
				if !strings.Contains(got.Conflict, m) {
					t.Errorf("Conflict %q does not mention %q (%s)", got.Conflict, m, c.reason)
				}
			}
			if len(c.conflictMentions) == 0 && got.Conflict != "" {
				t.Errorf("unexpected Conflict %q (%s)", got.Conflict, c.reason)
			}
			got.Conflict = ""
			if len(c.conflictMentions) > 0 {
				c.want.Decision = decide.Conflict
			}
			byID := cmpopts.SortSlices(func(a, b providers.Registration) bool { return a.ID < b.ID })
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty(), byID, planStepDetail); diff != "" {
				t.Errorf("computePlan mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
		})
	}
}

// TestPlanWithoutMarkersNeverPrunesUnproven: over every mix of a few hooks, nothing that is not
// proven ours is pruned or planned for an update.
func TestPlanWithoutMarkersNeverPrunesUnproven(t *testing.T) {
	pool := []providers.Registration{
		hook("1", 0), hook("2", 1), hook("3", 2, withEvents("push")),
		hook("4", 3, withURL(planOldURL)), hook("5", 4, withURL(planElse)), hook("6", 5, withURL(planReceiverURL)),
	}
	proofs := []struct {
		recorded string
		held     []string
	}{{"", nil}, {"1", nil}, {"", []string{"2", "4"}}, {"4", []string{"1"}}}
	for mask := 0; mask < 1<<len(pool); mask++ {
		var observed []providers.Registration
		for i, r := range pool {
			if mask&(1<<i) != 0 {
				observed = append(observed, r)
			}
		}
		for _, pr := range proofs {
			held := map[string]bool{}
			for _, id := range pr.held {
				held[id] = true
			}
			for _, adoption := range []hookv1.AdoptionPolicy{hookv1.AdoptionAdopt, hookv1.AdoptionNever} {
				in := decide.PlanInput{Caps: markerlessCaps, Desired: planDesired(planURL), Observed: observed, RecordedID: pr.recorded, HeldSecrets: held, ReceiverURL: planReceiverURL, Adoption: adoption}
				p := decide.ComputePlan(in)
				own := in.Ownership()
				for _, a := range p.Prunes() {
					if !own.Owns(a.Registration) {
						t.Errorf("mask %b %+v %s: prunes %s, which is not proven ours", mask, pr, adoption, a.Registration.ID)
					}
				}
				if p.Keep != nil && !own.Owns(*p.Keep) {
					// Adoption: only under Adopt, only the sole hook serving the spec.
					n := 0
					for _, r := range observed {
						if r.URL == planURL && len(r.Events) == len(planEvents) {
							n++
						}
					}
					if adoption == hookv1.AdoptionNever || n != 1 {
						t.Errorf("mask %b %+v %s: keeps unproven %s with %d candidates", mask, pr, adoption, p.Keep.ID, n)
					}
				}
				if p.Conflict != "" && (p.Decision != decide.Conflict || p.Keep != nil || len(p.Steps) > 0) {
					t.Errorf("mask %b: conflict but acts", mask)
				}
				for _, st := range p.Steps {
					if st.Kind != decide.StepCreate && st.Kind != decide.StepForget && !own.Owns(st.Registration) && (p.Keep == nil || st.Registration.ID != p.Keep.ID) {
						t.Errorf("mask %b %+v %s: step %v acts on %s, which is neither proven ours nor adopted", mask, pr, adoption, st.Kind, st.Registration.ID)
					}
				}
			}
		}
	}
}
