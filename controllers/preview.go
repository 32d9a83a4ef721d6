package controllers

import (
	"context"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// Preview plans sub as a reconcile would, reading the provider's list (read-only, fresh) and
// the signing Secret through APIReader, and writes nothing: no provider write, no Secret, no
// status, no event. Only r.APIReader, r.Accounts, r.ClusterName and r.ReceiverBaseURL are used.
// sub's status (endpointID, url) and UID are what the plan reads as recorded: for a
// subscription not yet in the cluster, leave them empty.
func (r *Reconciler) Preview(ctx context.Context, sub *hookv1.WebhookSubscription) (decide.Preview, error) {
	return r.preview(ctx, sub, nil)
}

// PreviewListed is Preview from a list of the account read before (Observe's): `hookwarden
// import` plans each manifest it writes from the one list it read, to say what adopting changes.
func (r *Reconciler) PreviewListed(ctx context.Context, sub *hookv1.WebhookSubscription, observed []providers.Registration) (decide.Preview, error) {
	if observed == nil {
		observed = []providers.Registration{}
	}
	return r.preview(ctx, sub, observed)
}

// preview is Preview from observed, or from a fresh list when observed is nil.
func (r *Reconciler) preview(ctx context.Context, sub *hookv1.WebhookSubscription, observed []providers.Registration) (decide.Preview, error) {
	r.readFromAPI()
	ob, err := r.observe(ctx, sub, true)
	if err != nil {
		return decide.Preview{}, err
	}
	defer ob.unlock()
	s, o := ob.s, ob.s.ops
	if observed == nil {
		if observed, err = observeList(ctx, o, 0); err != nil {
			return decide.Preview{}, err
		}
	}
	in, err := s.claimedInput(ctx, s.planInput(observed, ob.ownReceiverURL, decide.Rounds{}))
	if err != nil {
		return decide.Preview{}, err
	}
	out := decide.PreviewRounds(in)
	out.Provider = string(sub.Spec.Provider.Type)
	return out, nil
}

// Observe lists the registrations on the account sub's provider block names (fresh, read-only),
// reached as the reconciler reaches it (credentials from the Secret the block names, the same
// client and pacing), with the provider's capabilities: what `hookwarden import` reads. Only
// sub's namespace, provider block and events are used.
func (r *Reconciler) Observe(ctx context.Context, sub *hookv1.WebhookSubscription) ([]providers.Registration, providers.Capabilities, error) {
	r.readFromAPI()
	acct, err := r.account(ctx, sub)
	if err != nil {
		return nil, providers.Capabilities{}, err
	}
	o, unlock := acct.Lock()
	defer unlock()
	regs, err := observeList(ctx, o, 0)
	if err != nil {
		return nil, o.Capabilities(), err
	}
	return regs, o.Capabilities(), nil
}

// readFromAPI makes a Reconciler the command line built (no manager, no watches) read
// credentials from the API server.
func (r *Reconciler) readFromAPI() {
	if r.credentials == nil {
		r.credentials = &account.Credentials{API: r.APIReader, Entries: map[account.CredentialKey]account.CredentialEntry{}}
	}
}
