package providerstest

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

	"github.com/hookwarden/hookwarden/providers"
)

// The behaviour suite runs a provider's real client against its stateful fake with the cases
// every provider must pass at the contract (providers.Client), whatever the reconciler plans
// from them: what differs between providers is read from Capabilities, never from a name. Each
// provider runs it from its own package's tests (RunBehaviour), so adding a provider touches no
// controller file. The plan-level cases (adopt, twins, conflicts) live with the plan
// (decide/plan_behaviour_test.go). BehaviourMain prints the results as a matrix.

// Account is one fresh account (or target) on a provider's fake.
type Account interface {
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

// FuncAccount is an Account made of a client and functions over the fake, which is all most
// harnesses need.
type FuncAccount struct {
	C             providers.Client
	Page          int
	SeedFunc      func(url string, events []string) string
	IDsFunc       func() []string
	RateLimitFunc func(retryAfter time.Duration)
}

func (a *FuncAccount) Client() providers.Client { return a.C }
func (a *FuncAccount) PageSize() int            { return a.Page }
func (a *FuncAccount) Seed(t *testing.T, url string, events []string) string {
	return a.SeedFunc(url, events)
}
func (a *FuncAccount) IDs(t *testing.T) []string { return a.IDsFunc() }
func (a *FuncAccount) RateLimitNext(t *testing.T, retryAfter time.Duration) {
	a.RateLimitFunc(retryAfter)
}

// Provider makes accounts on one provider's fake.
type Provider struct {
	Name       string
	NewAccount func(t *testing.T) Account
	// Events are valid event names for the provider (at least three).
	Events []string
}

// Owner is the subscription every case is written for.
var Owner = providers.Owner{Cluster: "behaviour", Namespace: "shop", Name: "orders", UID: "uid-behaviour"}

// Desired is what the cases ask for at url (the first two events unless events are given).
func Desired(p Provider, url string, events ...string) providers.Desired {
	if len(events) == 0 {
		events = p.Events[:2]
	}
	return providers.Desired{URL: url, Events: events, Description: "orders pipeline", Owner: Owner, Secret: "behaviour-secret-0123456789abcdef"}
}

// find returns the listed registration id, failing t when it is not listed.
func find(t *testing.T, a Account, id string) providers.Registration {
	t.Helper()
	regs, err := a.Client().List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(regs, func(r providers.Registration) bool { return r.ID == id })
	if i < 0 {
		t.Fatalf("List does not show %s (listed %d)", id, len(regs))
	}
	return regs[i]
}

// sameSet reports whether a and b hold the same strings, order and repeats aside.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b))))
}

// checkReads fails t unless r reads back as d asks, in every field the provider has.
func checkReads(t *testing.T, caps providers.Capabilities, r providers.Registration, d providers.Desired) {
	t.Helper()
	switch {
	case r.Unfit != "":
		t.Errorf("%s reads as unfit: %s", r.ID, r.Unfit)
	case r.Variant != caps.Variant:
		t.Errorf("%s reads as variant %q; the client manages %q", r.ID, r.Variant, caps.Variant)
	case len(r.Misconfigured) > 0:
		t.Errorf("%s reads with provider-specific settings off: %v", r.ID, r.Misconfigured)
	case r.URL != d.URL || !sameSet(r.Events, d.Events):
		t.Errorf("%s reads as %s %v; want %s %v", r.ID, r.URL, r.Events, d.URL, d.Events)
	case caps.Has(providers.FieldDescription) && r.Description != d.Description:
		t.Errorf("%s reads with description %q; want %q", r.ID, r.Description, d.Description)
	case caps.Has(providers.FieldDisabled) && r.Disabled != d.Disabled:
		t.Errorf("%s reads disabled %v; want %v", r.ID, r.Disabled, d.Disabled)
	case caps.Markers && r.Owner != d.Owner:
		t.Errorf("%s reads with owner %+v; want %+v", r.ID, r.Owner, d.Owner)
	}
}

// RunBehaviour runs every case against p.
//
//nolint:funlen // the suite's table of cases
func RunBehaviour(t *testing.T, p Provider) {
	ctx := context.Background()
	run := func(name string, fn func(t *testing.T, a Account)) {
		RunCase(t, p.Name, name, func(t *testing.T) { fn(t, p.NewAccount(t)) })
	}

	run("create, then list reads it as created", func(t *testing.T, a Account) {
		d := Desired(p, "https://hooks.example.com/b/create")
		caps := a.Client().Capabilities()
		r, err := a.Client().Create(ctx, d, "behaviour-create-1")
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		// The provider's own secret comes back from Create (returned, read or fetched); one the
		// client chose, or none, does not.
		returned := caps.Secret != providers.SecretClientChosen && caps.Secret != providers.SecretNone
		if returned != (r.Secret != "") {
			t.Errorf("Create returned secret %v; the provider's secret mode is %s", r.Secret != "", caps.Secret)
		}
		listed := find(t, a, r.ID)
		checkReads(t, caps, listed, d)
		if listed.Secret != "" && caps.Secret != providers.SecretReadable {
			t.Errorf("List shows a secret, although the provider's secret mode is %s", caps.Secret)
		}
	})

	run("registrations past the first page are found", func(t *testing.T, a Account) {
		n := 2*a.PageSize() + 1
		var want []string
		for i := range n {
			want = append(want, a.Seed(t, fmt.Sprintf("https://hooks.example.com/b/page/%02d", i), p.Events[:1]))
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

	run("registrations made by hand are listed unmarked and fit", func(t *testing.T, a Account) {
		id := a.Seed(t, "https://hooks.example.com/b/by-hand", p.Events[1:3])
		r := find(t, a, id)
		if !r.Owner.IsZero() || r.CreateKey != "" || r.Unfit != "" || r.URL != "https://hooks.example.com/b/by-hand" || !sameSet(r.Events, p.Events[1:3]) {
			t.Errorf("a hand-made registration reads as %+v; want its URL and events, no owner, fit", r)
		}
	})

	run("update converges in place with the same id", func(t *testing.T, a Account) {
		d := Desired(p, "https://hooks.example.com/b/update")
		r, err := a.Client().Create(ctx, d, "behaviour-update-1")
		if err != nil {
			t.Fatal(err)
		}
		d.Events = p.Events[1:3]
		d.Disabled = a.Client().Capabilities().Has(providers.FieldDisabled)
		d.Description = "orders pipeline, v2"
		u, err := a.Client().Update(ctx, r.ID, d)
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		if u.ID != r.ID {
			t.Errorf("Update returned id %s; want %s", u.ID, r.ID)
		}
		checkReads(t, a.Client().Capabilities(), find(t, a, r.ID), d)
		if ids := a.IDs(t); len(ids) != 1 {
			t.Errorf("provider holds %v; want only %s", ids, r.ID)
		}
	})

	run("delete of a missing registration is nil", func(t *testing.T, a Account) {
		r, err := a.Client().Create(ctx, Desired(p, "https://hooks.example.com/b/delete"), "behaviour-delete-1")
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

	run("rate limits classify, with and without a stated wait", func(t *testing.T, a Account) {
		a.RateLimitNext(t, 3*time.Second)
		_, err := a.Client().List(ctx)
		if providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) < 2*time.Second {
			t.Errorf("List under a rate limit with a wait = %v; want RateLimited with RetryAfter about 3s", err)
		}
		a.RateLimitNext(t, 0)
		_, err = a.Client().List(ctx)
		if providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) != 0 {
			t.Errorf("List under a rate limit without a wait = %v; want RateLimited stating none", err)
		}
		if _, err := a.Client().List(ctx); err != nil {
			t.Errorf("List once the limit passed = %v", err)
		}
	})
}

var (
	resultsMu sync.Mutex
	results   = map[string]map[string]string{} // case -> provider -> PASS/FAIL
)

// RunCase runs fn as the subtest name of t and records its result for provider in the matrix
// BehaviourMain prints.
func RunCase(t *testing.T, provider, name string, fn func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		// Deferred, so a case that stops with t.Fatal is recorded too.
		defer func() {
			result := "PASS"
			if t.Failed() {
				result = "FAIL"
			}
			resultsMu.Lock()
			defer resultsMu.Unlock()
			if results[name] == nil {
				results[name] = map[string]string{}
			}
			results[name][provider] = result
		}()
		fn(t)
	})
}

// BehaviourMain is the TestMain of a package that runs behaviour cases: it runs the package's
// tests, then prints the matrix of the cases run (case × provider) as REPORT lines.
func BehaviourMain(m *testing.M) {
	code := m.Run()
	printMatrix()
	os.Exit(code)
}

// printMatrix prints the recorded results, one REPORT line per case.
func printMatrix() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) > 0 {
		var cases []string
		provs := map[string]bool{}
		for c, byProv := range results {
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
				r := results[c][p]
				if r == "" {
					r = "-"
				}
				row = append(row, r)
			}
			fmt.Printf("REPORT behaviour   %-55s %s\n", c, strings.Join(row, " | "))
		}
	}
}
