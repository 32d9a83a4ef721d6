package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// TestPlanClaimedByAnother: a registration another subscription of this cluster owns is never
// kept, adopted, changed, pruned or duplicated by this one, whatever else would prove it ours
// (a recorded id, a held secret): the plan stalls naming the owner, or keeps its own
// registration and leaves the other's alone.
func TestPlanClaimedByAnother(t *testing.T) {
	const owner = "shop/repo"
	cases := []struct {
		reason   string
		caps     providers.Capabilities
		observed []providers.Registration
		recorded string
		held     []string
		claimed  map[string]string
		want     decide.Plan
		stall    bool
	}{
		{
			reason:   "the only unproven hook serving the spec is another's: stall, no adoption, no new secret, no create",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("9", 0)},
			claimed:  map[string]string{"9": owner},
			stall:    true,
		},
		{
			reason:   "recorded here too, but the other claimed it first: stall, and nothing is pruned",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("9", 0), decidetest.Hook("4", 1, decidetest.WithURL(decidetest.OldURL))},
			recorded: "9",
			held:     []string{"9", "4"},
			claimed:  map[string]string{"9": owner},
			stall:    true,
		},
		{
			reason:   "another's hook beside an unproven look-alike: the look-alike is not adopted either",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("9", 0), decidetest.Hook("8", 1)},
			claimed:  map[string]string{"9": owner},
			stall:    true,
		},
		{
			reason:   "our own hook beside another's for the same URL: keep ours; the other's is neither pruned nor reported as a twin",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("9", 1)},
			recorded: "1",
			held:     []string{"1"},
			claimed:  map[string]string{"9": owner},
			want:     decidetest.Keeps(decidetest.Hook("1", 0)),
		},
		{
			reason:   "a secret held for another's hook at an old URL: foreign, not pruned as stale",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("9", 1, decidetest.WithURL(decidetest.OldURL))},
			recorded: "1",
			held:     []string{"1", "9"},
			claimed:  map[string]string{"9": owner},
			want:     decidetest.Keeps(decidetest.Hook("1", 0)),
		},
		{
			reason:   "Stripe: an unmarked endpoint another subscription records (adopted before its marker was written): stall, no adoption",
			caps:     decidetest.StripeCaps,
			observed: []providers.Registration{decidetest.Reg("we_9", 0, decidetest.Unmarked)},
			claimed:  map[string]string{"we_9": owner},
			stall:    true,
		},
		{
			reason:   "claims on registrations the plan does not touch change nothing",
			caps:     decidetest.MarkerlessCaps,
			observed: []providers.Registration{decidetest.Hook("1", 0), decidetest.Hook("7", 1, decidetest.WithURL(decidetest.ElseURL))},
			recorded: "1",
			held:     []string{"1"},
			claimed:  map[string]string{"7": owner},
			want:     decidetest.Keeps(decidetest.Hook("1", 0)),
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			in := decide.PlanInput{
				Caps: c.caps, Desired: decidetest.Desired(decidetest.URL), Observed: c.observed, RecordedID: c.recorded,
				HeldSecrets: decidetest.HeldSet(c.held), CurrentID: decidetest.CurrentOf("", c.recorded, c.held), ClaimedBy: c.claimed,
			}
			got := decide.ComputePlan(in)
			if c.stall {
				if got.Decision != decide.Stall || got.StallReason != hookv1.ReasonOwnedByAnother || !strings.Contains(got.Stall, owner) || len(got.Steps) > 0 || got.Keep != nil {
					t.Fatalf("want a stall naming %s with no steps, got %+v", owner, got)
				}
				return
			}
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty(), decidetest.StepDetail); diff != "" {
				t.Errorf("computePlan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFirstClaimant: of two subscriptions claiming one registration, the one that claimed it
// first keeps it: one that records it wins over one that does not; of two that record it, the
// older subscription.
func TestFirstClaimant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	me := decide.Claimant{Key: "imp/github-1", Created: t0.Add(time.Hour)}
	older := decide.Claimant{Key: "shop/repo", Created: t0}
	younger := decide.Claimant{Key: "shop/late", Created: t0.Add(2 * time.Hour)}
	cases := []struct {
		reason    string
		mine      bool
		claimants []decide.Claimant
		want      string
	}{
		{"nobody else claims it", false, nil, ""},
		{"only my own claim (this manager kept it for me)", false, []decide.Claimant{me}, ""},
		{"another records it, I do not: it is theirs, however old I am", false, []decide.Claimant{younger}, younger.Key},
		{"both record it, the other is older: theirs", true, []decide.Claimant{older}, older.Key},
		{"both record it, I am older: mine", true, []decide.Claimant{younger}, ""},
		{"kept for me by this manager and recorded by an older one: theirs", false, []decide.Claimant{me, older}, older.Key},
		{"several others: the oldest is named", false, []decide.Claimant{younger, older}, older.Key},
	}
	for _, c := range cases {
		if got := decide.FirstClaimant(me, c.mine, c.claimants); got != c.want {
			t.Errorf("%s: got %q, want %q", c.reason, got, c.want)
		}
	}
}
