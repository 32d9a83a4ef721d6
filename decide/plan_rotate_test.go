package decide_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// TestPlanRotation: a requested rotation (hookwarden.io/rotate-requested-at) of a secret that is
// held becomes one step, make-before-break: set in place where the client chooses the secret
// and the provider can update, a new registration otherwise; nothing where deliveries are
// unsigned; never twice in one reconcile.
func TestPlanRotation(t *testing.T) {
	rotated := func(s decide.Step) decide.Step { s.Rotation = true; return s }
	cases := []struct {
		reason   string
		caps     providers.Capabilities
		observed []providers.Registration
		held     []string
		pending  bool
		request  bool
		rounds   decide.Rounds
		want     decide.Plan
	}{
		{
			reason:   "no request: nothing to do",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			held:     []string{"we_1"},
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},
		{
			reason:   "Stripe shows a secret only at create: a new registration replaces keep (pruned in the next round)",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			held:     []string{"we_1"},
			request:  true,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0), rotated(decidetest.ReplaceStep(decidetest.Reg("we_1", 0)))),
		},
		{
			reason:   "GitHub-like (client-chosen, updatable): a new secret set on the same hook",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("h1", 0)},
			held:     []string{"h1"},
			request:  true,
			want:     decidetest.Keeps(decidetest.Hook("h1", 0), rotated(decidetest.SetSecretStep(decidetest.Hook("h1", 0)))),
		},
		{
			reason:   "a set-secret already pending (a crash mid-rotation) is finished first, and is the rotation",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("h1", 0)},
			held:     []string{"h1"},
			pending:  true,
			request:  true,
			want:     decidetest.Keeps(decidetest.Hook("h1", 0), decidetest.SetSecretStep(decidetest.Hook("h1", 0))),
		},
		{
			reason:   "client-chosen without an update (Calendly-like): a new registration",
			caps:     noUpdateCaps,
			observed: []providers.Registration{decidetest.Hook("h1", 0)},
			held:     []string{"h1"},
			request:  true,
			want:     decidetest.Keeps(decidetest.Hook("h1", 0), rotated(decidetest.ReplaceStep(decidetest.Hook("h1", 0)))),
		},
		{
			reason:   "readable or fetched secrets: a new registration (reading back gives the same secret)",
			caps:     fetchedCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			held:     []string{"we_1"},
			request:  true,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0), rotated(decidetest.ReplaceStep(decidetest.Reg("we_1", 0)))),
		},
		{
			reason:   "unsigned deliveries: nothing to rotate",
			caps:     unsignedCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			request:  true,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0)),
		},
		{
			reason:   "a lost secret is recovered as usual, which already gives a new one: no second rotation",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_1", 0)},
			request:  true,
			want:     decidetest.Keeps(decidetest.Reg("we_1", 0), decidetest.ReplayStep(decidetest.Reg("we_1", 0)), decidetest.MarkStep(decidetest.Reg("we_1", 0))),
		},
		{
			reason:  "nothing registered: the create makes a new secret",
			caps:    decidetest.StripeCaps,
			request: true,
			want:    decidetest.Creates(),
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			in := decide.PlanInput{
				Desired: decidetest.Desired(decidetest.URL), Generation: 1, Observed: c.observed, Caps: c.caps,
				RecordedID: "", HeldSecrets: decidetest.HeldSet(c.held), CurrentID: decidetest.CurrentOf("", firstOf(c.held), c.held),
				PendingSecret: c.pending, RotateRequested: c.request, Rounds: c.rounds,
			}
			if len(c.observed) > 0 {
				in.RecordedID = c.observed[0].ID
				in.CurrentID = decidetest.CurrentOf("", in.RecordedID, c.held)
			}
			got := decide.ComputePlan(in)
			if diff := cmp.Diff(c.want, got, decidetest.StepDetail); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if got.Rotates() != (c.request && hasRotation(c.want)) {
				t.Errorf("rotates() = %v", got.Rotates())
			}
		})
	}
}

func firstOf(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func hasRotation(p decide.Plan) bool {
	for _, s := range p.Steps {
		if s.Rotation {
			return true
		}
	}
	return false
}
