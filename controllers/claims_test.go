package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
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
	me := claimant{key: "imp/github-1", created: t0.Add(time.Hour)}
	older := claimant{key: "shop/repo", created: t0}
	younger := claimant{key: "shop/late", created: t0.Add(2 * time.Hour)}
	cases := []struct {
		reason    string
		mine      bool
		claimants []claimant
		want      string
	}{
		{"nobody else claims it", false, nil, ""},
		{"only my own claim (this manager kept it for me)", false, []claimant{me}, ""},
		{"another records it, I do not: it is theirs, however old I am", false, []claimant{younger}, younger.key},
		{"both record it, the other is older: theirs", true, []claimant{older}, older.key},
		{"both record it, I am older: mine", true, []claimant{younger}, ""},
		{"kept for me by this manager and recorded by an older one: theirs", false, []claimant{me, older}, older.key},
		{"several others: the oldest is named", false, []claimant{younger, older}, older.key},
	}
	for _, c := range cases {
		if got := firstClaimant(me, c.mine, c.claimants); got != c.want {
			t.Errorf("%s: got %q, want %q", c.reason, got, c.want)
		}
	}
}

// TestClaimBook: a subscription claims one registration at a time, and releasing it frees it.
func TestClaimBook(t *testing.T) {
	var b claimBook
	a, c := claimant{key: "ns/a"}, claimant{key: "ns/c"}
	b.claim("k1", a)
	b.claim("k1", c)
	b.claim("k2", a) // a moved on to k2
	keys := func(cs []claimant) []string {
		var out []string
		for _, x := range cs {
			out = append(out, x.key)
		}
		return out
	}
	if got := keys(b.claimants("k1")); !cmp.Equal(got, []string{"ns/c"}) {
		t.Errorf("k1: %v", got)
	}
	b.release("ns/a")
	if got := b.claimants("k2"); len(got) != 0 {
		t.Errorf("k2 after release: %v", got)
	}
}

// TestOwners: what `hookwarden import` skips. Every proof the manager uses counts, on any
// provider (a marker of this cluster, a recorded id, a held secret, the bundled receiver's URL),
// and a registration serving the URL of a subscription on the account is its twin; nothing on
// another account (another repository) counts.
func TestOwners(t *testing.T) {
	r := &Reconciler{Accounts: account.NewAccounts(builtin.Registry(), account.AccountOptions{}), ClusterName: "prod"}
	gh := func(ns, name, repo, url string) hookv1.WebhookSubscription {
		s := hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, GitHub: &hookv1.GitHubTarget{Owner: "acme", Repository: repo}},
			Endpoint: hookv1.EndpointSpec{URL: url}, Events: []string{"push"}, SigningSecret: hookv1.SigningSecretSpec{Name: name + "-signing"}}}
		return s
	}
	recorded := gh("shop", "repo", "shop", "https://hooks.example.com/repo")
	recorded.Status.EndpointID, recorded.Status.URL = "1", "https://hooks.example.com/repo"
	holder := gh("shop", "holder", "shop", "https://hooks.example.com/holder")
	recv := gh("shop", "recv", "shop", "")
	recv.Spec.Endpoint = hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}}
	recv.Status.URL = "https://in.example.com/hooks/shop/recv"
	elsewhere := gh("shop", "other-repo", "other", "https://hooks.example.com/else")
	elsewhere.Status.EndpointID = "6"
	hooks := []providers.Registration{
		{ID: "1", URL: "https://hooks.example.com/repo"},
		{ID: "2", URL: "https://hooks.example.com/repo"}, // a twin of shop/repo's
		{ID: "3", URL: "https://hooks.example.com/held-elsewhere"},
		{ID: "4", URL: "https://in.example.com/hooks/shop/recv"},
		{ID: "5", URL: "https://hooks.example.com/marked", Owner: providers.Owner{Cluster: "prod", Namespace: "shop", Name: "gone", UID: "u"}},
		{ID: "6", URL: "https://hooks.example.com/else"},    // shop/other-repo's id, but on another repository
		{ID: "7", URL: "https://hooks.example.com/foreign"}, // nobody's
	}
	tmpl := gh("imp", "", "shop", "")
	asked := map[string]bool{}
	got, err := r.Owners(&tmpl, hooks, []hookv1.WebhookSubscription{recorded, holder, recv, elsewhere}, func(s *hookv1.WebhookSubscription) (map[string]bool, error) {
		asked[s.Name] = true
		if s.Name == "holder" {
			return map[string]bool{"3": true}, nil
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Owned{
		"1": {Subscription: "shop/repo", Proof: decide.ProofRecorded},
		"2": {Subscription: "shop/repo", Proof: "it serves this URL", Twin: true},
		"3": {Subscription: "shop/holder", Proof: decide.ProofHeld},
		"4": {Subscription: "shop/recv", Proof: decide.ProofReceiver},
		"5": {Subscription: "shop/gone", Proof: decide.ProofMarker},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Owners (-want +got):\n%s", diff)
	}
	if asked["other-repo"] {
		t.Errorf("the signing Secret of a subscription on another account was read")
	}
}
