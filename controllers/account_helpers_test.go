package controllers

import (
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/account"
	"github.com/hookwarden/hookwarden/account/accounttest"
	"github.com/hookwarden/hookwarden/providers"
)

// newTestAccount returns the account for one fake client, through Accounts.Get as the
// reconciler does, with a rate limit high enough never to wait.
func newTestAccount(t *testing.T, client providers.Client) (account.Ops, *accounttest.Clock) {
	t.Helper()
	acct, clock := newTestAccountOf(t, client)
	o, unlock := acct.Lock()
	t.Cleanup(unlock)
	return o, clock
}

// newTestAccountOf is newTestAccount's account, not locked.
func newTestAccountOf(t *testing.T, client providers.Client) (*account.Account, *accounttest.Clock) {
	t.Helper()
	clock := &accounttest.Clock{T: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	registry := providers.Registry{"stripe": {Factory: providers.FactoryFunc(func(providers.Config) (providers.Client, error) {
		return client, nil
	})}}
	accts := account.NewAccounts(registry, account.AccountOptions{QPS: 1e6, Burst: 1000, Now: clock.Now})
	acct, err := accts.Get(account.AccountKey{Provider: "stripe", Credential: "sk_test_one"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return acct, clock
}
