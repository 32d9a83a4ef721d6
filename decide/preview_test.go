package decide_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// TestPreviewRounds: the preview shows every round a reconcile makes, not only the first: a
// replacement ends its round, and the next round keeps the replacement, makes its secret current
// and prunes the registration replaced, as the manager does.
func TestPreviewRounds(t *testing.T) {
	noKey := func(r *providers.Registration) { r.CreateKey = "" }
	lost := decidetest.Reg("we_1", 0, noKey)
	type round struct {
		Decision string
		Actions  []string
		IDs      []string
	}
	cases := []struct {
		name string
		in   decide.PlanInput
		want []round
	}{
		{
			"secret lost, no replay: replace, then keep the new one, make it current, prune the old",
			decide.PlanInput{Desired: decidetest.Desired(decidetest.URL), Generation: 1, Caps: decidetest.StripeCaps, Observed: []providers.Registration{lost}, RecordedID: "we_1"},
			[]round{
				{"keep", []string{"replace"}, []string{"we_1"}},
				{"keep", []string{"mark-current", "prune"}, []string{decide.NewRegistrationID, "we_1"}},
			},
		},
		{
			"requested rotation by a new registration: rotated once, not again in the next round",
			decide.PlanInput{Desired: decidetest.Desired(decidetest.URL), Generation: 1, Caps: decidetest.StripeCaps, Observed: []providers.Registration{decidetest.Reg("we_1", 0)},
				RecordedID: "we_1", HeldSecrets: decidetest.HeldSet([]string{"we_1"}), CurrentID: "we_1", RotateRequested: true},
			[]round{
				{"keep", []string{"replace"}, []string{"we_1"}},
				{"keep", []string{"mark-current", "prune"}, []string{decide.NewRegistrationID, "we_1"}},
			},
		},
		{
			"nothing ends the round: one round",
			decide.PlanInput{Desired: decidetest.Desired(decidetest.URL), Generation: 1, Caps: decidetest.StripeCaps, Observed: []providers.Registration{decidetest.Reg("we_1", 0)},
				RecordedID: "we_1", HeldSecrets: decidetest.HeldSet([]string{"we_1"}), CurrentID: "we_1"},
			[]round{{"keep", nil, nil}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := decide.PreviewRounds(c.in)
			rounds := []decide.PreviewRound{{Decision: p.Decision, Steps: p.Steps}}
			rounds = append(rounds, p.Later...)
			var got []round
			for _, r := range rounds {
				g := round{Decision: r.Decision}
				for _, s := range r.Steps {
					g.Actions, g.IDs = append(g.Actions, s.Action), append(g.IDs, s.Registration)
				}
				got = append(got, g)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("rounds (-want +got):\n%s", diff)
			}
		})
	}
}
