package controllers

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// The behaviour suite runs every provider through its stateful fake with one set of cases: what
// the reconciler relies on from any provider. Each case speaks only the provider contract
// (providers.Client) and the plan; what differs between providers is read from Capabilities,
// never from the provider's name. Harnesses: behaviour_<provider>_test.go.

// behaviourAccount is one fresh account (or target) on a provider's fake.
type behaviourAccount interface {
	// Client talks to the account through the provider's real client.
	Client() providers.Client
	// PageSize is the fake's page-size cap (lists of more registrations need several pages).
	PageSize() int
	// Seed registers a webhook out of band, as a user in the provider's dashboard would
	// (unmarked, with a secret this operator never saw), and returns its id.
	Seed(t *testing.T, url string, events []string) string
	// IDs are the ids the provider holds.
	IDs(t *testing.T) []string
	// RateLimitNext makes the next request fail with the provider's rate-limit answer;
	// retryAfter zero means the answer does not say how long to wait.
	RateLimitNext(t *testing.T, retryAfter time.Duration)
}

// behaviourProvider makes accounts on one provider's fake.
type behaviourProvider struct {
	name       string
	newAccount func(t *testing.T) behaviourAccount
	// events are valid event names for the provider (at least three).
	events []string
}

var (
	behaviourMu      sync.Mutex
	behaviourResults = map[string]map[string]string{} // case -> provider -> PASS/FAIL
)

func behaviourCase(t *testing.T, p behaviourProvider, name string, fn func(t *testing.T, a behaviourAccount)) {
	t.Run(name, func(t *testing.T) {
		// Deferred, so a case that stops with t.Fatal is recorded too.
		defer func() {
			result := "PASS"
			if t.Failed() {
				result = "FAIL"
			}
			behaviourMu.Lock()
			if behaviourResults[name] == nil {
				behaviourResults[name] = map[string]string{}
			}
			behaviourResults[name][p.name] = result
			behaviourMu.Unlock()
		}()
		fn(t, p.newAccount(t))
	})
}

// behaviourOwner is the subscription every case is written for.
var behaviourOwner = providers.Owner{Cluster: "behaviour", Namespace: "shop", Name: "orders", UID: "uid-behaviour"}

func behaviourDesired(p behaviourProvider, url string, events ...string) providers.Desired {
	if len(events) == 0 {
		events = p.events[:2]
	}
	return providers.Desired{URL: url, Events: events, Description: "orders pipeline", Owner: behaviourOwner, Secret: "behaviour-secret-0123456789abcdef"}
}

func runBehaviourSuite(t *testing.T, p behaviourProvider) {
	ctx := context.Background()
	planFor := func(a behaviourAccount, d providers.Desired, recorded string, held ...string) decide.Plan {
		t.Helper()
		observed, err := a.Client().List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		h := map[string]bool{}
		for _, id := range held {
			h[id] = true
		}
		return decide.ComputePlan(decide.PlanInput{Desired: d, Observed: observed, Caps: a.Client().Capabilities(), RecordedID: recorded, HeldSecrets: h,
			Adoption: hookv1.AdoptionAdopt, Twins: hookv1.TwinsPrune})
	}

	behaviourCase(t, p, "create, then observe finds it with no drift", func(t *testing.T, a behaviourAccount) {
		d := behaviourDesired(p, "https://hooks.example.com/b/create")
		r, err := a.Client().Create(ctx, d, "behaviour-create-1")
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if a.Client().Capabilities().Secret == providers.SecretReturnedOnCreate && r.Secret == "" {
			t.Errorf("Create returned no secret, although the provider returns it on create")
		}
		pl := planFor(a, d, r.ID, r.ID)
		if pl.Keep == nil || pl.Keep.ID != r.ID || len(pl.Drift()) > 0 || (pl.Decision == decide.Create) {
			t.Errorf("plan after create = keep %v, drift %v, create %v; want keep %s, no drift", pl.Keep, pl.Drift(), (pl.Decision == decide.Create), r.ID)
		}
	})

	behaviourCase(t, p, "registrations past the first page are found", func(t *testing.T, a behaviourAccount) {
		n := 2*a.PageSize() + 1
		var want []string
		for i := range n {
			want = append(want, a.Seed(t, fmt.Sprintf("https://hooks.example.com/b/page/%02d", i), p.events[:1]))
		}
		got, err := a.Client().List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		sort.Strings(ids)
		sort.Strings(want)
		if !slices.Equal(ids, want) {
			t.Errorf("List over %d pages found %d of %d registrations", (n+a.PageSize()-1)/a.PageSize(), len(ids), n)
		}
	})

	behaviourCase(t, p, "update converges in place with the same id", func(t *testing.T, a behaviourAccount) {
		d := behaviourDesired(p, "https://hooks.example.com/b/update")
		r, err := a.Client().Create(ctx, d, "behaviour-update-1")
		if err != nil {
			t.Fatal(err)
		}
		d.Events = p.events[1:3]
		d.Disabled = true
		u, err := a.Client().Update(ctx, r.ID, d)
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		if u.ID != r.ID {
			t.Errorf("Update returned id %s; want %s", u.ID, r.ID)
		}
		pl := planFor(a, d, r.ID, r.ID)
		if pl.Keep == nil || pl.Keep.ID != r.ID || len(pl.Drift()) > 0 {
			t.Errorf("plan after update = keep %v, drift %v; want %s with no drift", pl.Keep, pl.Drift(), r.ID)
		}
		if ids := a.IDs(t); len(ids) != 1 {
			t.Errorf("provider holds %v; want only %s", ids, r.ID)
		}
	})

	behaviourCase(t, p, "delete of a missing registration is nil", func(t *testing.T, a behaviourAccount) {
		r, err := a.Client().Create(ctx, behaviourDesired(p, "https://hooks.example.com/b/delete"), "behaviour-delete-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Client().Delete(ctx, r.ID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if err := a.Client().Delete(ctx, r.ID); err != nil {
			t.Errorf("second Delete = %v; want nil (already gone)", err)
		}
		if ids := a.IDs(t); len(ids) != 0 {
			t.Errorf("provider still holds %v", ids)
		}
	})

	behaviourCase(t, p, "rate limits classify, with and without a stated wait", func(t *testing.T, a behaviourAccount) {
		a.RateLimitNext(t, 3*time.Second)
		_, err := a.Client().List(ctx)
		if providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) < 2*time.Second {
			t.Errorf("List under a rate limit with a wait = %v; want RateLimited with RetryAfter about 3s", err)
		}
		a.RateLimitNext(t, 0)
		_, err = a.Client().List(ctx)
		if providers.KindOf(err) != providers.RateLimited {
			t.Errorf("List under a rate limit without a wait = %v; want RateLimited", err)
		}
		if _, err := a.Client().List(ctx); err != nil {
			t.Errorf("List once the limit passed = %v", err)
		}
	})

	behaviourCase(t, p, "twins are detected and only proven ones pruned", func(t *testing.T, a behaviourAccount) {
		url := "https://hooks.example.com/b/twins"
		// Two of ours for one URL (disjoint events, which every provider accepts), and one
		// registration made by hand.
		first, err := a.Client().Create(ctx, behaviourDesired(p, url, p.events[0]), "behaviour-twin-1")
		if err != nil {
			t.Fatal(err)
		}
		second, err := a.Client().Create(ctx, behaviourDesired(p, url, p.events[1]), "behaviour-twin-2")
		if err != nil {
			t.Fatal(err)
		}
		byHand := a.Seed(t, url, p.events[2:3])
		pl := planFor(a, behaviourDesired(p, url, p.events[0]), first.ID, first.ID, second.ID)
		if pl.Keep == nil || pl.Keep.ID != first.ID {
			t.Fatalf("plan keeps %v; want the recorded %s", pl.Keep, first.ID)
		}
		pruned := map[string]bool{}
		for _, pa := range pl.Prunes() {
			pruned[pa.Registration.ID] = true
		}
		if !pruned[second.ID] {
			t.Errorf("the proven twin %s is not pruned (prune %v)", second.ID, pl.Prunes())
		}
		caps := a.Client().Capabilities()
		switch {
		case caps.Markers && !pruned[byHand]:
			t.Errorf("an unmarked twin %s on a provider with markers is adoptable, so pruned as a twin; prune %v", byHand, pl.Prunes())
		case !caps.Markers && pruned[byHand]:
			t.Errorf("the hand-made hook %s cannot be proven ours and was pruned", byHand)
		case !caps.Markers && !slices.ContainsFunc(pl.Unproven, func(r providers.Registration) bool { return r.ID == byHand }):
			t.Errorf("the hand-made look-alike %s is not reported (unproven %v)", byHand, pl.Unproven)
		}
	})

	behaviourCase(t, p, "ownership is proven, or adoption refused", func(t *testing.T, a behaviourAccount) {
		url := "https://hooks.example.com/b/adopt"
		d := behaviourDesired(p, url)
		byHand := a.Seed(t, url, d.Events)
		pl := planFor(a, d, "")
		if pl.Keep == nil || pl.Keep.ID != byHand || (pl.Decision == decide.Create) {
			t.Errorf("the only registration serving the spec, under Adopt: plan keeps %v (create %v); want %s adopted", pl.Keep, (pl.Decision == decide.Create), byHand)
		} else if !pl.RecoversSecret() {
			t.Errorf("adopted %s without its secret, but the plan does not recover it", byHand)
		}
		// A second look-alike: on a provider without markers adopting one would be a guess.
		other := a.Seed(t, url, d.Events)
		observed, err := a.Client().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		caps := a.Client().Capabilities()
		in := decide.PlanInput{Desired: d, Observed: observed, Caps: caps, Adoption: hookv1.AdoptionAdopt, Twins: hookv1.TwinsPrune}
		pl = decide.ComputePlan(in)
		if caps.Markers {
			// The kept one's secret is not held: where it cannot be recovered in place, the
			// round ends with a replacement, and the next round prunes what it replaced.
			settled := settle(t, a, in)
			if settled.Keep == nil || len(settled.Prunes()) != len(observed)-1+replaced(settled) {
				t.Errorf("two unmarked registrations on a provider with markers: keep %v prune %v; want one kept, the others pruned", settled.Keep, settled.Prunes())
			}
		} else if pl.Conflict == "" || pl.Keep != nil || (pl.Decision == decide.Create) || len(pl.Prunes()) > 0 || !strings.Contains(pl.Conflict, other) {
			t.Errorf("two unproven registrations: conflict %q keep %v create %v prune %v; want a conflict naming both, nothing done", pl.Conflict, pl.Keep, (pl.Decision == decide.Create), pl.Prunes())
		}
		pl = decide.ComputePlan(decide.PlanInput{Desired: d, Observed: observed, Caps: caps, Adoption: hookv1.AdoptionNever})
		if pl.Conflict == "" || (pl.Decision == decide.Create) || pl.Keep != nil {
			t.Errorf("under Never: conflict %q create %v keep %v; want a conflict and no create", pl.Conflict, (pl.Decision == decide.Create), pl.Keep)
		}
	})
}

// settle plans as the reconciler's rounds do: while a round ends with a replacement, it makes
// the replacement at the provider (as the executor would), counts its secret held, and plans
// the next round. It returns the plan of the last round.
func settle(t *testing.T, a behaviourAccount, in decide.PlanInput) decide.Plan {
	t.Helper()
	for range decide.MaxRounds {
		p := decide.ComputePlan(in)
		if len(p.Steps) == 0 || !p.Steps[len(p.Steps)-1].EndsRound() {
			return p
		}
		last := p.Steps[len(p.Steps)-1]
		d := last.Desired
		d.Secret = "behaviour-secret-0123456789abcdef"
		r, err := a.Client().Create(context.Background(), d, last.Key)
		if err != nil {
			t.Fatalf("Create (replacement of %s): %v", last.Registration.ID, err)
		}
		in.Rounds.Retire(last.Registration.ID)
		in.HeldSecrets = map[string]bool{r.ID: true}
		if in.Observed, err = a.Client().List(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the plan did not settle in %d rounds", decide.MaxRounds)
	return decide.Plan{}
}

// replaced counts the registrations a settled plan prunes because they were replaced.
func replaced(p decide.Plan) int {
	n := 0
	for _, s := range p.Prunes() {
		if s.Why == decide.PruneRotated {
			n++
		}
	}
	return n
}

// TestMain prints the behaviour suite's matrix (case × provider) after the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if len(behaviourResults) > 0 {
		var cases []string
		provs := map[string]bool{}
		for c, byProv := range behaviourResults {
			cases = append(cases, c)
			for p := range byProv {
				provs[p] = true
			}
		}
		sort.Strings(cases)
		var names []string
		for p := range provs {
			names = append(names, p)
		}
		sort.Strings(names)
		fmt.Printf("REPORT behaviour suite (case × provider): %s\n", strings.Join(names, " | "))
		for _, c := range cases {
			var row []string
			for _, p := range names {
				r := behaviourResults[c][p]
				if r == "" {
					r = "-"
				}
				row = append(row, r)
			}
			fmt.Printf("REPORT behaviour   %-55s %s\n", c, strings.Join(row, " | "))
		}
	}
	os.Exit(code)
}
