package account

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookwarden/hookwarden/account/accounttest"
	"github.com/hookwarden/hookwarden/providers"
)

var accountsSeed = []providers.Registration{
	{ID: "we_1", URL: "https://hooks.example.com/a", Events: []string{"invoice.paid"}},
	{ID: "we_2", URL: "https://hooks.example.com/b", Events: []string{"invoice.paid"}},
}

func TestAccountsListCache(t *testing.T) {
	const maxAge = 30 * time.Second
	cases := []struct {
		reason    string
		wait      time.Duration // between the first and the second List
		maxAge    time.Duration
		wantCalls int // provider List calls after both
	}{
		{"second List right away: served from the cache", 0, maxAge, 1},
		{"second List just under maxAge: served from the cache", maxAge - time.Millisecond, maxAge, 1},
		{"second List exactly at maxAge: re-listed", maxAge, maxAge, 2},
		{"second List past maxAge: re-listed", maxAge + time.Second, maxAge, 2},
		{"maxAge 0: every List goes to the provider", 0, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			client := accounttest.NewFakeClient(accountsSeed...)
			o, clock := newTestAccount(t, client)
			if _, err := o.List(context.Background(), c.maxAge); err != nil {
				t.Fatalf("first List: %v", err)
			}
			first := clock.Now()
			clock.Advance(c.wait)
			got, err := o.List(context.Background(), c.maxAge)
			if err != nil {
				t.Fatalf("second List: %v", err)
			}
			if client.Calls["List"] != c.wantCalls {
				t.Errorf("provider List calls = %d; want %d (%s)", client.Calls["List"], c.wantCalls, c.reason)
			}
			if diff := cmp.Diff(accountsSeed, got); diff != "" {
				t.Errorf("List mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
			wantFetched := first
			if c.wantCalls == 2 {
				wantFetched = clock.Now()
			}
			if !o.FetchedAt().Equal(wantFetched) {
				t.Errorf("FetchedAt = %s; want %s, when the provider was last read (%s)", o.FetchedAt(), wantFetched, c.reason)
			}
			if !o.Epoch().Equal(first) {
				t.Errorf("Epoch = %s; want %s, the first list, whatever came after (%s)", o.Epoch(), first, c.reason)
			}
		})
	}
}

func TestAccountsListReturnsACopy(t *testing.T) {
	client := accounttest.NewFakeClient(accountsSeed...)
	o, _ := newTestAccount(t, client)
	got, err := o.List(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got[0].ID = "scribbled"
	again, err := o.List(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(accountsSeed, again); diff != "" {
		t.Errorf("a caller's edit of a listed slice leaked into the cache (-want +got):\n%s", diff)
	}
}

func TestAccountsListErrorIsNotCached(t *testing.T) {
	client := accounttest.NewFakeClient(accountsSeed...)
	o, _ := newTestAccount(t, client)
	if _, err := o.List(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	client.FailOn["List"] = errors.New("connection reset")
	// Force a re-list that fails; the stale list must not be served afterwards either.
	if _, err := o.List(context.Background(), 0); err == nil {
		t.Fatal("List with a failing provider returned no error")
	}
	if _, err := o.List(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if client.Calls["List"] != 3 {
		t.Errorf("provider List calls = %d; want 3: a failed List invalidates the cache", client.Calls["List"])
	}
}

// TestAccountsWritesUpdateCache: after each successful write, a List within maxAge is served
// from the cache (no provider call) and equals what the provider now holds, minus secrets.
func TestAccountsWritesUpdateCache(t *testing.T) {
	desired := providers.Desired{
		URL: "https://hooks.example.com/c", Events: []string{"charge.refunded"}, Description: "c",
		Owner: providers.Owner{Cluster: "prod", Namespace: "shop", Name: "c", UID: "uid-c"},
	}
	cases := []struct {
		reason string
		write  func(o Ops) error
		want   []providers.Registration // cached list after the write, sorted by ID
	}{
		{
			reason: "Create adds the new registration, without its secret",
			write: func(o Ops) error {
				r, err := o.Create(context.Background(), desired, "key-c")
				if err == nil && r.Secret == "" {
					return errors.New("Create must still return the secret to its caller")
				}
				return err
			},
			want: append(append([]providers.Registration(nil), accountsSeed...), providers.Registration{
				ID: "we_new1", URL: desired.URL, Events: desired.Events, Description: "c", Owner: desired.Owner, CreateKey: "key-c",
			}),
		},
		{
			reason: "Update replaces the registration in place",
			write: func(o Ops) error {
				_, err := o.Update(context.Background(), "we_2", desired)
				return err
			},
			want: []providers.Registration{
				accountsSeed[0],
				{ID: "we_2", URL: desired.URL, Events: desired.Events, Description: "c", Owner: desired.Owner},
			},
		},
		{
			reason: "Delete drops the registration",
			write:  func(o Ops) error { return o.Delete(context.Background(), "we_1") },
			want:   []providers.Registration{accountsSeed[1]},
		},
		{
			reason: "Remember stores the given view but never its secret",
			write: func(o Ops) error {
				r := accountsSeed[0]
				r.Description, r.Secret = "remembered", "whsec_must_not_be_cached"
				o.Remember(r)
				return nil
			},
			want: []providers.Registration{
				{ID: "we_1", URL: "https://hooks.example.com/a", Events: []string{"invoice.paid"}, Description: "remembered"},
				accountsSeed[1],
			},
		},
	}
	byID := cmpopts.SortSlices(func(a, b providers.Registration) bool { return a.ID < b.ID })
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			client := accounttest.NewFakeClient(accountsSeed...)
			o, clock := newTestAccount(t, client)
			if _, err := o.List(context.Background(), time.Minute); err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Second)
			if err := c.write(o); err != nil {
				t.Fatalf("write: %v", err)
			}
			got, err := o.List(context.Background(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if client.Calls["List"] != 1 {
				t.Errorf("provider List calls = %d; want 1: our own write must not cost a re-list (%s)", client.Calls["List"], c.reason)
			}
			if diff := cmp.Diff(c.want, got, byID); diff != "" {
				t.Errorf("cached list mismatch (-want +got) (%s):\n%s", c.reason, diff)
			}
			for _, r := range o.a.regs {
				if r.Secret != "" {
					t.Errorf("the cache holds the secret of %s (%s)", r.ID, c.reason)
				}
			}
		})
	}
}

func TestAccountsWriteErrorInvalidatesCache(t *testing.T) {
	desired := providers.Desired{URL: "https://hooks.example.com/c", Events: []string{"charge.refunded"}}
	cases := []struct {
		reason string
		op     string
		write  func(o Ops) error
	}{
		{"a failed Create may still have created (timeout): re-list", "Create", func(o Ops) error {
			_, err := o.Create(context.Background(), desired, "key-c")
			return err
		}},
		{"a failed Update leaves the registration unknown: re-list", "Update", func(o Ops) error {
			_, err := o.Update(context.Background(), "we_1", desired)
			return err
		}},
		{"a failed Delete leaves the registration unknown: re-list", "Delete", func(o Ops) error {
			return o.Delete(context.Background(), "we_1")
		}},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			client := accounttest.NewFakeClient(accountsSeed...)
			o, _ := newTestAccount(t, client)
			if _, err := o.List(context.Background(), time.Minute); err != nil {
				t.Fatal(err)
			}
			client.FailOn[c.op] = &providers.Error{Kind: providers.Transient, Message: "timeout"}
			if err := c.write(o); err == nil {
				t.Fatalf("%s with a failing provider returned no error", c.op)
			}
			if _, err := o.List(context.Background(), time.Minute); err != nil {
				t.Fatal(err)
			}
			if client.Calls["List"] != 2 {
				t.Errorf("provider List calls = %d; want 2: the List after a failed %s must call the provider (%s)", client.Calls["List"], c.op, c.reason)
			}
		})
	}
}

func TestAccountsGet(t *testing.T) {
	type key = AccountKey
	base := key{Provider: "stripe", Credential: "sk_test_alpha_0123456789"}
	cases := []struct {
		reason string
		other  key
		same   bool
	}{
		{"same type, API URL and credential: one shared account", base, true},
		{"another credential is another account", key{Provider: "stripe", Credential: "sk_test_bravo_9876543210"}, false},
		{"another API URL (stripe-mock) is another account", key{Provider: "stripe", APIURL: "http://127.0.0.1:12111", Credential: base.Credential}, false},
		{"another target (a second repository on one token) is another account", key{Provider: "stripe", Target: "repos/acme/other", Credential: base.Credential}, false},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			var configs []providers.Config
			registry := providers.Registry{"stripe": {Factory: providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
				configs = append(configs, cfg)
				return accounttest.NewFakeClient(), nil
			})}}
			accts := NewAccounts(registry, AccountOptions{RequestTimeout: 7 * time.Second})
			a, err := accts.Get(base)
			if err != nil {
				t.Fatal(err)
			}
			b, err := accts.Get(c.other)
			if err != nil {
				t.Fatal(err)
			}
			if (a == b) != c.same {
				t.Errorf("same account = %v; want %v (%s)", a == b, c.same, c.reason)
			}
			if (a.id == b.id) != c.same {
				t.Errorf("account ids %q and %q: equal = %v; want %v (%s)", a.id, b.id, a.id == b.id, c.same, c.reason)
			}
			wantClients := 2
			if c.same {
				wantClients = 1
			}
			if len(configs) != wantClients {
				t.Errorf("factory called %d times; want %d (%s)", len(configs), wantClients, c.reason)
			}
			if diff := cmp.Diff(providers.Config{APIURL: base.APIURL, Credential: base.Credential, Timeout: 7 * time.Second}, configs[0], cmpopts.IgnoreFields(providers.Config{}, "Pace", "Now")); diff != "" {
				t.Errorf("factory config mismatch (-want +got):\n%s", diff)
			}
			if configs[0].Now == nil {
				t.Errorf("the client got no clock: the waits it reads (Retry-After dates, epoch resets) would not follow the manager's")
			}
			for _, id := range []string{a.id, b.id} {
				for _, cred := range []string{base.Credential, c.other.Credential} {
					if strings.Contains(id, cred) || strings.Contains(id, cred[len("sk_test_"):]) {
						t.Errorf("account id %q contains the credential (%s)", id, c.reason)
					}
				}
			}
		})
	}
}

func TestAccountsGetErrors(t *testing.T) {
	calls := 0
	registry := providers.Registry{"stripe": {Factory: providers.FactoryFunc(func(providers.Config) (providers.Client, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("bad API URL")
		}
		return accounttest.NewFakeClient(), nil
	})}}
	accts := NewAccounts(registry, AccountOptions{})

	if _, err := accts.Get(AccountKey{Provider: "github", Credential: "ghp_x"}); err == nil || !strings.Contains(err.Error(), "github") {
		t.Errorf("Get(unregistered type) error = %v; want one naming the type", err)
	}
	if _, err := accts.Get(AccountKey{Provider: "stripe", Credential: "sk_test_x"}); err == nil {
		t.Errorf("Get with a failing factory returned no error")
	}
	if _, err := accts.Get(AccountKey{Provider: "stripe", Credential: "sk_test_x"}); err != nil {
		t.Errorf("Get after a failed factory call = %v; want a fresh attempt, not a cached failure", err)
	}
	if calls != 2 {
		t.Errorf("factory calls = %d; want 2", calls)
	}
}

// TestAccountsRateLimitBackoff: a rate limit without Retry-After is waited out with the
// provider's backoff, which grows per rate limit in a row, with jitter, up to the provider's cap,
// and restarts after a success; one that says how long is waited exactly. While the wait lasts
// no request reaches the provider, and the wait holds for every account reached with the same
// credential (the provider limits the credential).
func TestAccountsRateLimitBackoff(t *testing.T) {
	clock := &accounttest.Clock{T: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	clients := map[string]*accounttest.FakeClient{}
	policy := providers.Backoff{First: time.Second, Factor: 2, Max: 10 * time.Second}
	registry := providers.Registry{"github": {Factory: providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
		c := accounttest.NewFakeClient()
		c.Caps.RateLimitBackoff = policy
		clients[cfg.Target+"|"+cfg.Credential] = c
		return c, nil
	})}}
	// Half the most jitter: each computed wait is an eighth longer than the policy's step.
	accts := NewAccounts(registry, AccountOptions{QPS: 1e6, Burst: 1000, Now: clock.Now, Jitter: func() float64 { return 0.5 }})
	get := func(target, cred string) (Ops, *accounttest.FakeClient) {
		a, err := accts.Get(AccountKey{Provider: "github", Target: target, Credential: cred})
		if err != nil {
			t.Fatal(err)
		}
		o, unlock := a.Lock()
		t.Cleanup(unlock)
		return o, clients[target+"|"+cred]
	}
	repoA, clientA := get("repos/acme/a", "tok-1")
	repoB, clientB := get("repos/acme/b", "tok-1")
	other, clientOther := get("repos/acme/a", "tok-2")
	limited := func(after time.Duration) error {
		return &providers.Error{Kind: providers.RateLimited, StatusCode: 429, RetryAfter: after}
	}
	ctx := context.Background()

	var waits []time.Duration
	for i := 0; i < 6; i++ {
		clientA.FailOn["List"] = limited(0)
		_, err := repoA.List(ctx, 0)
		if providers.KindOf(err) != providers.RateLimited {
			t.Fatalf("List %d: error %v; want RateLimited", i, err)
		}
		w := providers.RetryAfter(err)
		waits = append(waits, w)
		// Meanwhile nothing reaches the provider with this token, on any of its repositories.
		callsA, callsB := clientA.Calls["List"], clientB.Calls["List"]
		if _, err := repoB.List(ctx, 0); providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) > w {
			t.Errorf("List on another repository of the same token during the wait: %v; want RateLimited within %s", err, w)
		}
		if clientA.Calls["List"] != callsA || clientB.Calls["List"] != callsB {
			t.Errorf("a request reached the provider during the rate-limit wait")
		}
		clock.Advance(w)
	}
	// 1s, 2s, 4s, 8s plus an eighth; then the cap, which jitter never passes.
	want := []time.Duration{1125 * time.Millisecond, 2250 * time.Millisecond, 4500 * time.Millisecond, 9 * time.Second, 10 * time.Second, 10 * time.Second}
	if d := cmp.Diff(want, waits); d != "" {
		t.Errorf("waits of six rate limits in a row (-want +got):\n%s", d)
	}
	// Another token is limited on its own.
	if _, err := other.List(ctx, 0); err != nil || clientOther.Calls["List"] != 1 {
		t.Errorf("another token's List = %v after %d calls; want it unaffected", err, clientOther.Calls["List"])
	}

	// A success ends the streak: the next rate limit starts from the first wait again.
	if _, err := repoA.List(ctx, 0); err != nil {
		t.Fatalf("List after the wait: %v", err)
	}
	clientA.FailOn["List"] = limited(0)
	_, err := repoA.List(ctx, 0)
	if w := providers.RetryAfter(err); w != 1125*time.Millisecond {
		t.Errorf("first wait after a success = %s; want the backoff to restart at 1s (plus an eighth)", w)
	}
	clock.Advance(providers.RetryAfter(err))

	// Retry-After is honoured exactly, even past the cap (GitHub's primary limit resets hourly).
	clientA.FailOn["List"] = limited(40 * time.Minute)
	_, err = repoA.List(ctx, 0)
	if w := providers.RetryAfter(err); w != 40*time.Minute {
		t.Errorf("wait with Retry-After 40m = %s; want exactly 40m", w)
	}
	clock.Advance(39 * time.Minute)
	if _, err := repoB.List(ctx, 0); providers.RetryAfter(err) != time.Minute {
		t.Errorf("List a minute before the reset: %v; want RateLimited with 1m left", err)
	}
}

// ratedClient is a fake client whose provider documents a rate.
type ratedClient struct {
	*accounttest.FakeClient
	rate providers.Rate
}

func (c ratedClient) Capabilities() providers.Capabilities {
	return providers.Capabilities{Markers: true, Rate: c.rate}
}

func TestAccountsPaceEachCredentialAtItsProvidersRate(t *testing.T) {
	cases := []struct {
		reason     string
		documented providers.Rate
		opts       AccountOptions
		want       providers.Rate
	}{
		{"no override: the provider's documented rate (Stripe test mode)", providers.Rate{PerSecond: 25, Burst: 5}, AccountOptions{}, providers.Rate{PerSecond: 25, Burst: 5}},
		{"a provider that documents no rate gets the defaults", providers.Rate{}, AccountOptions{}, providers.Rate{PerSecond: DefaultQPS, Burst: DefaultBurst}},
		{"--provider-qps overrides the rate, the documented burst stays", providers.Rate{PerSecond: 25, Burst: 5}, AccountOptions{QPS: 3}, providers.Rate{PerSecond: 3, Burst: 5}},
		{"both flags override both", providers.Rate{PerSecond: 25, Burst: 5}, AccountOptions{QPS: 3, Burst: 2}, providers.Rate{PerSecond: 3, Burst: 2}},
	}
	for _, c := range cases {
		registry := providers.Registry{"p": {Factory: providers.FactoryFunc(func(providers.Config) (providers.Client, error) {
			return ratedClient{accounttest.NewFakeClient(), c.documented}, nil
		})}}
		accts := NewAccounts(registry, c.opts)
		a, err := accts.Get(AccountKey{Provider: "p", Target: "one", Credential: "k"})
		if err != nil {
			t.Fatal(err)
		}
		got := providers.Rate{PerSecond: float64(a.limiter.bucket.Limit()), Burst: a.limiter.bucket.Burst()}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: -want +got\n%s", c.reason, d)
		}
		b, err := accts.Get(AccountKey{Provider: "p", Target: "two", Credential: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if a == b || a.limiter != b.limiter {
			t.Errorf("%s: two targets on one credential must be two accounts sharing one limiter", c.reason)
		}
	}
}

func TestAccountsPaceEveryRequestOfTheClient(t *testing.T) {
	var cfg providers.Config
	registry := providers.Registry{"p": {Factory: providers.FactoryFunc(func(c providers.Config) (providers.Client, error) {
		cfg = c
		return ratedClient{accounttest.NewFakeClient(), providers.Rate{PerSecond: 0.001, Burst: 2}}, nil
	})}}
	if _, err := NewAccounts(registry, AccountOptions{}).Get(AccountKey{Provider: "p", Credential: "k"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Pace == nil {
		t.Fatal("the client got no Pace: its HTTP requests (each list page) would not take tokens")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 2 {
		if err := cfg.Pace(ctx); err != nil {
			t.Fatalf("request %d within the burst of 2: %v", i+1, err)
		}
	}
	// The third would wait some 1,000 s for a token, past the deadline: refused at once.
	if err := cfg.Pace(ctx); err == nil {
		t.Error("a third request within a second passed a bucket of burst 2 and 0.001/s")
	}
}

// TestAccountsForgetUnusedAccounts: an account (its client and cached list) lives as long as a
// subscription uses it, and a credential's limiter as long as one of its accounts does; a
// rotated credential's account is evicted once the last subscription moved off it.
func TestAccountsForgetUnusedAccounts(t *testing.T) {
	built := map[string]int{}
	registry := providers.Registry{"stripe": {Factory: providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
		built[cfg.Credential]++
		return accounttest.NewFakeClient(), nil
	})}}
	accts := NewAccounts(registry, AccountOptions{})
	old, rotated := AccountKey{Provider: "stripe", Credential: "sk_test_old"}, AccountKey{Provider: "stripe", Credential: "sk_test_new"}
	use := func(user string, k AccountKey) *Account {
		t.Helper()
		a, err := accts.For(user, k)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := use("shop/orders", old)
	if use("shop/refunds", old) != first {
		t.Fatal("two subscriptions on one account got two accounts")
	}
	use("shop/orders", rotated) // its credential was rotated
	if n, l := accts.Len(); n != 2 || l != 2 {
		t.Errorf("after one of two subscriptions moved: %d accounts, %d limiters; want 2 and 2 (refunds still uses the old key)", n, l)
	}
	use("shop/refunds", rotated)
	if n, l := accts.Len(); n != 1 || l != 1 {
		t.Errorf("after both moved: %d accounts, %d limiters; want the old key's account and limiter gone", n, l)
	}
	if use("shop/late", old) == first {
		t.Error("the evicted account came back: its client and cached list were kept")
	}
	if built["sk_test_old"] != 2 {
		t.Errorf("the old key's client was built %d times; want 2 (evicted, then built anew)", built["sk_test_old"])
	}
	accts.Release("shop/late")
	accts.Release("shop/orders")
	accts.Release("shop/refunds")
	accts.Release("shop/unknown") // never used an account: nothing to do
	if n, l := accts.Len(); n != 0 || l != 0 {
		t.Errorf("after every subscription is gone: %d accounts, %d limiters; want none", n, l)
	}
}
