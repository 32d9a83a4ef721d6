package controllers

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// finalize deletes our registrations (policy Delete) or leaves them (Orphan), then releases the
// finalizer. Without credentials it cannot delete, and it says so in a condition and an Event
// instead of releasing silently: the user restores the Secret or switches the policy to Orphan.
func (r *Reconciler) finalize(ctx context.Context, sub *hookv1.WebhookSubscription) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sub, hookv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if sub.Spec.Policies.Deletion == hookv1.DeletionOrphan {
		spanDecision(ctx, decisionOrphaned)
		r.audit(ctx, sub, actionOrphan, sub.Status.EndpointID, "subscription deleted with policies.deletion=Orphan: the registration stays at the provider")
		r.event(sub, corev1.EventTypeNormal, hookv1.ReasonOrphaned, "Delete", "left registration %q at the provider (policies.deletion=Orphan)", sub.Status.EndpointID)
		return ctrl.Result{}, r.releaseFinalizer(ctx, sub)
	}
	spanDecision(ctx, decisionDeleted)
	base := sub.DeepCopy()
	opCtx, cancel := context.WithTimeout(ctx, r.OperationTimeout)
	defer cancel()
	kept, err := r.deleteRegistrations(opCtx, sub)
	if err == nil {
		if kept != nil {
			// The account's one registration (a GitHub App's webhook) cannot be deleted, and
			// clearing its URL is not something its API documents: it is left as Orphan leaves
			// it, and the user is told where it still delivers.
			r.audit(ctx, sub, actionOrphan, kept.ID, "subscription deleted with policies.deletion=Delete, but the provider cannot delete the account's one registration")
			r.event(sub, corev1.EventTypeWarning, hookv1.ReasonOrphaned, "Delete", "left registration %q at the provider, still delivering to %s: it is the account's one registration (a GitHub App's webhook), which the API cannot delete; deactivate it or change its URL in the provider's settings", kept.ID, kept.URL)
			return ctrl.Result{}, r.releaseFinalizer(ctx, sub)
		}
		r.event(sub, corev1.EventTypeNormal, hookv1.ReasonDeleted, "Delete", "deleted the registrations of this subscription at the provider")
		return ctrl.Result{}, r.releaseFinalizer(ctx, sub)
	}
	var se *decide.StallError
	if errors.As(err, &se) && se.Reason == hookv1.ReasonCredentialsNotFound {
		se.Msg = "cannot delete the registration at the provider: " + se.Msg + "; restore it, or set spec.policies.deletion to Orphan to release the subscription"
	}
	stalled := errors.As(err, &se)
	res, err := r.record(ctx, sub, ctrl.Result{}, err)
	if stalled {
		// Deletion stays blocked until a referenced Secret or the policy changes (both
		// re-trigger); it is also tried again at each resync.
		res = ctrl.Result{RequeueAfter: resyncInterval(sub)}
	}
	if perr := r.Status().Patch(ctx, sub, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return res, err
}

// deleteRegistrations deletes the registrations proven this subscription's. On a singleton
// account (Capabilities.Singleton) it deletes nothing and returns the one registration when it
// is ours: the caller reports it left in place.
func (r *Reconciler) deleteRegistrations(ctx context.Context, sub *hookv1.WebhookSubscription) (*providers.Registration, error) {
	obs := r.observer()
	acct, err := obs.Reach(ctx, sub)
	if err != nil {
		return nil, err
	}
	signing, err := r.readSigningState(ctx, sub)
	if err != nil {
		return nil, err
	}
	o, unlock := acct.Lock()
	defer unlock()
	// The shared list serves deletions too (our own writes are in it, and a registration gone
	// meanwhile deletes as a 404): deleting a namespace of subscriptions costs one list, not one
	// per subscription.
	observed, err := account.List(ctx, o, r.maxListAge(sub))
	if err != nil {
		return nil, err
	}
	// The same proof of ownership as reconcile: nothing unproven is deleted, nor anything
	// another subscription owns.
	own := decide.Ownership{Me: obs.Owner(sub), Markers: o.Capabilities().Markers, RecordedID: sub.Status.EndpointID, Held: signing.Held(), ReceiverURL: obs.ReceiverURL(sub), Keys: o.URLKeys()}
	var proven []string
	for _, reg := range observed {
		if reg.ID != "" && own.Proves(reg) {
			proven = append(proven, reg.ID)
		}
	}
	if own.ClaimedBy, err = r.claimedBy(ctx, sub, o.Scope(), proven); err != nil {
		return nil, err
	}
	for _, reg := range observed {
		if reg.ID == "" || !own.Owns(reg) {
			continue // an object whose id could not be read can be nobody's to delete
		}
		if o.Capabilities().Singleton {
			return &reg, nil
		}
		if err := o.Delete(ctx, reg.ID); err != nil && !providers.IsNotFound(err) {
			return nil, decide.FromProvider("deleting registration "+reg.ID, err)
		}
		r.audit(ctx, sub, actionDelete, reg.ID, "subscription deleted with policies.deletion=Delete")
	}
	return nil, nil
}

func (r *Reconciler) releaseFinalizer(ctx context.Context, sub *hookv1.WebhookSubscription) error {
	r.Metrics.forget(sub.Namespace, sub.Name)
	r.Accounts.Release(account.SubscriptionKey(sub))
	r.claims.release(account.SubscriptionKey(sub))
	r.signingMemo.forget(account.SigningSecretKey(sub))
	if err := r.RouteSecrets.remove(ctx, sub.Namespace, sub.Name, string(sub.UID)); err != nil {
		return err
	}
	patch := client.MergeFrom(sub.DeepCopy())
	controllerutil.RemoveFinalizer(sub, hookv1.Finalizer)
	return client.IgnoreNotFound(r.Patch(ctx, sub, patch))
}
