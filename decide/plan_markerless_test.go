package decide_test

import (
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// TestPlanWithoutMarkers: where the provider cannot store a marker, a registration is ours only
// when proven (recorded id, held secret, the bundled receiver's URL); an unproven one is adopted
// only under Adopt when it is the only one serving the spec, and is never pruned; fields the
// provider does not have never drift.
func TestPlanWithoutMarkers(t *testing.T) {
	cases := []planCase{
		{
			reason: "empty target: create",
			want:   decidetest.Creates(),
		},
		{
			reason:   "recorded and held: keep, nothing to do; no description or marker drift",
			observed: []providers.Registration{decidetest.Hook("1", 0)},
			recorded: "1",
			held:     []string{"1"},
			want:     decidetest.Keeps(decidetest.Hook("1", 0)),
		},
		{
			reason:   "held but not recorded (status wiped): still ours by its secret",
			observed: []providers.Registration{decidetest.Hook("1", 0)},
			held:     []string{"1"},
			current:  "1",
			adoption: hookv1.AdoptionNever,
			want:     decidetest.Keeps(decidetest.Hook("1", 0)),
		},
		{
			reason:   "recorded, secret not held (Secret deleted): keep it and set a new secret on it",
			observed: []providers.Registration{decidetest.Hook("1", 0)},
			recorded: "1",
			want:     decidetest.Keeps(decidetest.Hook("1", 0), decidetest.SetSecretStep(decidetest.Hook("1", 0))),
		},
		{
			reason:   "held, with a pending secret: finish setting the pending one first",
			observed: []providers.Registration{decidetest.Hook("1", 0)},
			recorded: "1",
			held:     []string{"1"},
			pending:  true,
			want:     decidetest.Keeps(decidetest.Hook("1", 0), decidetest.SetSecretStep(decidetest.Hook("1", 0))),
		},
		{
			reason:   "the only unproven hook serving the spec, Adopt: adopted, and its secret is set",
			observed: []providers.Registration{decidetest.Hook("9", 0)},
			pending:  true,
			want:     decidetest.Keeps(decidetest.Hook("9", 0), decidetest.SetSecretStep(decidetest.Hook("9", 0))),
		},
		{
			reason:           "the only unproven hook serving the spec, Never: conflict, no create",
			observed:         []providers.Registration{decidetest.Hook("9", 0)},
			adoption:         hookv1.AdoptionNever,
			want:             decide.Plan{Unproven: []providers.Registration{decidetest.Hook("9", 0)}},
			conflictMentions: []string{"9", "cannot be proven ours", "adoption is Never"},
		},
		{
			reason:           "two unproven hooks serving the spec: adopting one would be a guess; neither created nor pruned",
			observed:         []providers.Registration{decidetest.Hook("8", 0), decidetest.Hook("9", 1)},
			want:             decide.Plan{Unproven: []providers.Registration{decidetest.Hook("8", 0), decidetest.Hook("9", 1)}},
			conflictMentions: []string{"8", "9", "none can be proven ours"},
		},
		{
			reason:   "a proven hook beside unproven look-alikes: keep ours, report the others, prune none",
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("8", 1), decidetest.Hook("9", 2, decidetest.WithEvents("push"))},
			recorded: "1",
			held:     []string{"1"},
			want:     decide.Plan{Keep: decidetest.Kept(decidetest.Hook("1", 0)), Unproven: []providers.Registration{decidetest.Hook("9", 2, decidetest.WithEvents("push")), decidetest.Hook("8", 1)}},
		},
		{
			reason:   "an unproven hook for the URL with other events is not ours to change: create, report it",
			observed: []providers.Registration{decidetest.Hook("9", 0, decidetest.WithEvents("push"))},
			want:     decide.Plan{Decision: decide.Create, Steps: []decide.Step{decidetest.CreateStep()}, Unproven: []providers.Registration{decidetest.Hook("9", 0, decidetest.WithEvents("push"))}},
		},
		{
			reason:   "two proven hooks (both secrets held): keep the recorded one, prune the twin",
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("2", 1)},
			recorded: "2",
			held:     []string{"1", "2"},
			want:     decidetest.Keeps(decidetest.Hook("2", 1), decidetest.Twin(decidetest.Hook("1", 0))),
		},
		{
			reason:   "proven twins under Keep: reported, not pruned",
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("2", 1)},
			recorded: "2",
			held:     []string{"1", "2"},
			twins:    hookv1.TwinsKeep,
			want:     decide.Plan{Keep: decidetest.Kept(decidetest.Hook("2", 1)), KeptTwins: []providers.Registration{decidetest.Hook("1", 0)}},
		},
		{
			reason:   "ours by its held secret, for a URL the spec no longer names: stale, pruned",
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("2", 1, decidetest.WithURL(decidetest.OldURL))},
			recorded: "1",
			held:     []string{"1", "2"},
			want:     decidetest.Keeps(decidetest.Hook("1", 0), decidetest.Stale(decidetest.Hook("2", 1, decidetest.WithURL(decidetest.OldURL)))),
		},
		{
			reason:   "unproven hooks elsewhere are foreign, whatever their events",
			observed: []providers.Registration{decidetest.Hook("7", 0, decidetest.WithURL(decidetest.ElseURL)), decidetest.Hook("8", 0, decidetest.WithURL(decidetest.OldURL))},
			want:     decidetest.Creates(),
		},
		{
			reason:   "the bundled receiver's URL for this subscription proves ownership, even unrecorded and under Never",
			url:      decidetest.ReceiverURL,
			observed: []providers.Registration{decidetest.Hook("5", 0, decidetest.WithURL(decidetest.ReceiverURL)), decidetest.Hook("6", 1, decidetest.WithURL(decidetest.ReceiverURL))},
			adoption: hookv1.AdoptionNever,
			want:     decidetest.Keeps(decidetest.Hook("5", 0, decidetest.WithURL(decidetest.ReceiverURL)), decidetest.SetSecretStep(decidetest.Hook("5", 0, decidetest.WithURL(decidetest.ReceiverURL))), decidetest.Twin(decidetest.Hook("6", 1, decidetest.WithURL(decidetest.ReceiverURL)))),
		},
		{
			reason:   "a receiver-URL hook left from when the spec named the receiver is stale",
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("5", 0, decidetest.WithURL(decidetest.ReceiverURL))},
			recorded: "1",
			held:     []string{"1"},
			want:     decidetest.Keeps(decidetest.Hook("1", 0), decidetest.Stale(decidetest.Hook("5", 0, decidetest.WithURL(decidetest.ReceiverURL)))),
		},
		{
			reason:   "disabled differs and the provider reports settings off: drift, but never description or marker",
			observed: []providers.Registration{decidetest.Hook("1", 0, decidetest.WithDisabled, decidetest.Misconfigured("content_type"))},
			recorded: "1",
			held:     []string{"1"},
			want:     decidetest.KeepsUpdating(decidetest.Hook("1", 0, decidetest.WithDisabled, decidetest.Misconfigured("content_type")), "disabled", "content_type"),
		},
	}
	byID := cmpopts.SortSlices(func(a, b providers.Registration) bool { return a.ID < b.ID })
	runPlanCases(t, decide.PlanInput{Caps: decidetest.MarkerlessCaps, ReceiverURL: decidetest.ReceiverURL}, cases, byID)
}

// TestPlanWithoutMarkersNeverPrunesUnproven: over every mix of a few hooks, nothing that is not
// proven ours is pruned or planned for an update.
func TestPlanWithoutMarkersNeverPrunesUnproven(t *testing.T) {
	pool := []providers.Registration{
		decidetest.Hook("1", 0), decidetest.Hook("2", 1), decidetest.Hook("3", 2, decidetest.WithEvents("push")),
		decidetest.Hook("4", 3, decidetest.WithURL(decidetest.OldURL)), decidetest.Hook("5", 4, decidetest.WithURL(decidetest.ElseURL)), decidetest.Hook("6", 5, decidetest.WithURL(decidetest.ReceiverURL)),
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
				in := decide.PlanInput{Caps: decidetest.MarkerlessCaps, Desired: decidetest.Desired(decidetest.URL), Observed: observed, RecordedID: pr.recorded, HeldSecrets: held, ReceiverURL: decidetest.ReceiverURL, Adoption: adoption}
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
						if r.URL == decidetest.URL && len(r.Events) == len(decidetest.Events) {
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
