package controllers

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
)

// Two subscriptions never own one registration (decide/claims.go decides who does). The
// manager reads the claims from its cache (claimIndex: what subscriptions' statuses record) and
// from its own book of what it kept for each subscription before the status write reached the
// cache.

// claimIndex indexes subscriptions by the registration their status records, on the account
// scope their spec names (account.ClaimKeyOf).
const claimIndex = "status.endpointID"

// claimBook is what this manager kept for each subscription, by scope and registration id: it
// covers the moment between a reconcile that adopted a registration and its status write
// reaching the cache, when another subscription on the account may plan already.
type claimBook struct {
	mu    sync.Mutex
	byKey map[string]map[string]decide.Claimant // account.ClaimKey -> subscription key -> claimant
	bySub map[string]string                     // subscription key -> claimKey
}

func (b *claimBook) claim(key string, c decide.Claimant) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(c.Key)
	if b.byKey == nil {
		b.byKey, b.bySub = map[string]map[string]decide.Claimant{}, map[string]string{}
	}
	if b.byKey[key] == nil {
		b.byKey[key] = map[string]decide.Claimant{}
	}
	b.byKey[key][c.Key] = c
	b.bySub[c.Key] = key
}

// release forgets the claim of subscription sub (it is gone).
func (b *claimBook) release(sub string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(sub)
}

func (b *claimBook) drop(sub string) {
	key, ok := b.bySub[sub]
	if !ok {
		return
	}
	delete(b.bySub, sub)
	delete(b.byKey[key], sub)
	if len(b.byKey[key]) == 0 {
		delete(b.byKey, key)
	}
}

func (b *claimBook) claimants(key string) []decide.Claimant {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]decide.Claimant, 0, len(b.byKey[key]))
	for _, c := range b.byKey[key] {
		out = append(out, c)
	}
	return out
}

// claimedBy returns, for each of ids on scope, the subscription other than sub that owns it
// (decide.ClaimedBy), from the subscriptions whose status records it (the manager's cache,
// through claimIndex) and those this manager kept it for (its book).
func (r *Reconciler) claimedBy(ctx context.Context, sub *hookv1.WebhookSubscription, scope string, ids []string) (map[string]string, error) {
	return decide.ClaimedBy(account.ClaimantOf(sub), sub.Status.EndpointID, ids, func(id string) ([]decide.Claimant, error) {
		key := account.ClaimKey(scope, id)
		out := r.claims.claimants(key)
		var list hookv1.WebhookSubscriptionList
		if err := r.List(ctx, &list, client.MatchingFields{claimIndex: key}); err != nil {
			return nil, fmt.Errorf("listing the subscriptions that record registration %s: %w", id, err)
		}
		for i := range list.Items {
			out = append(out, account.ClaimantOf(&list.Items[i]))
		}
		return out, nil
	})
}

// claimedInput is in with the claims of other subscriptions on its contested registrations.
func (s *session) claimedInput(ctx context.Context, in decide.PlanInput) (decide.PlanInput, error) {
	claimed, err := s.r.claimedBy(ctx, s.sub, s.ops.Scope(), in.Contested())
	in.ClaimedBy = claimed
	return in, err
}

// keptFor records that this manager kept registration id for sub: it claims it from now on.
func (r *Reconciler) keptFor(sub *hookv1.WebhookSubscription, scope, id string) {
	if id != "" {
		r.claims.claim(account.ClaimKey(scope, id), account.ClaimantOf(sub))
	}
}
