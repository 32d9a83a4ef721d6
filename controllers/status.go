package controllers

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
)

// record turns the outcome of a reconcile into kstatus conditions, the ready metric and the
// controller's result: success is Ready; a stall is Stalled and terminal; a known wait is
// Reconciling with RequeueAfter; anything else is Reconciling and returned for backoff.
//
// Stalls and waits are what users cause or providers ask for (missing credentials, a 4xx, a
// conflict, a rate limit): they are logged at info with their reason and not returned, so
// controller-runtime neither retries them nor logs them as errors with a stack trace. A stall
// waits for a change to the subscription or a Secret it names, which re-triggers it; one the
// provider answered is also looked at again once per resync interval.
func (r *Reconciler) record(ctx context.Context, sub *hookv1.WebhookSubscription, res ctrl.Result, err error) (ctrl.Result, error) {
	sub.Status.ObservedGeneration = sub.Generation
	logger := log.FromContext(ctx).WithValues(logSubscription, account.SubscriptionKey(sub), logProvider, string(sub.Spec.Provider.Type))
	defer func() {
		c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
		r.Metrics.setReady(sub.Namespace, sub.Name, string(sub.Spec.Provider.Type), c != nil && c.Status == metav1.ConditionTrue)
	}()
	var se *decide.StallError
	var we *decide.WaitError
	switch {
	case err == nil:
		spanResult(ctx, "ready", hookv1.ReasonSucceeded)
		setReady(sub, metav1.ConditionTrue, hookv1.ReasonSucceeded, "registration "+sub.Status.EndpointID+" matches the spec and its signing secret is stored")
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionReconciling)
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionStalled)
		return res, nil
	case errors.As(err, &se):
		spanResult(ctx, "stalled", se.Reason)
		logger.Info("reconcile stalled: needs a change to the subscription or a Secret it names", logReason, se.Reason, "message", se.Msg)
		setReady(sub, metav1.ConditionFalse, se.Reason, se.Msg)
		setCondition(sub, hookv1.ConditionStalled, se.Reason, se.Msg)
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionReconciling)
		r.event(sub, corev1.EventTypeWarning, se.Reason, "Reconcile", "%s", se.Msg)
		if se.AtProvider {
			// Fixable at the provider without any change here: look again next resync.
			return ctrl.Result{RequeueAfter: resyncInterval(sub)}, nil
		}
		return ctrl.Result{}, nil
	case errors.As(err, &we):
		spanResult(ctx, "waiting", we.Reason)
		logger.Info("reconcile waits", logReason, we.Reason, "message", we.Msg, "retryAfter", we.After.String())
		if we.Reason == hookv1.ReasonRateLimited {
			r.retrying(sub, we.Reason, we.Msg)
		} else {
			setReady(sub, metav1.ConditionFalse, we.Reason, we.Msg)
			setCondition(sub, hookv1.ConditionReconciling, we.Reason, we.Msg)
		}
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionStalled)
		return ctrl.Result{RequeueAfter: we.After}, nil
	default:
		spanResult(ctx, "retrying", hookv1.ReasonProviderUnavailable)
		r.retrying(sub, hookv1.ReasonProviderUnavailable, err.Error())
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionStalled)
		return ctrl.Result{}, err
	}
}

// DefaultOutageGrace is how long a registration last found good stays Ready while the provider
// keeps failing (5xx, timeouts, rate limits) before Ready turns False: one transient fault, or
// a provider's bad minute, is a retry (Reconciling), not a broken subscription.
const DefaultOutageGrace = 5 * time.Minute

// retrying records a transient failure (the provider unavailable, or rate limiting): Reconciling
// says a retry is pending. Ready stays True while the registration was last found matching the
// spec on this generation and the provider has been failing for less than the outage grace,
// counted from the first failure in a row (when Reconciling turned True); past it, or for a
// subscription never found good, Ready is False with the reason.
func (r *Reconciler) retrying(sub *hookv1.WebhookSubscription, reason hookv1.Reason, msg string) {
	now := r.clock()
	since := now
	if c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == hookv1.ReasonProviderUnavailable || c.Reason == hookv1.ReasonRateLimited) {
		since = c.LastTransitionTime.Time
	}
	grace := r.OutageGrace
	if grace <= 0 {
		grace = DefaultOutageGrace
	}
	// The streak starts when Reconciling turns True, on the reconciler's clock.
	reconciling := metav1.Condition{Type: hookv1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: sub.Generation, LastTransitionTime: metav1.NewTime(now)}
	if steady(sub) && now.Sub(since) < grace {
		reconciling.Message += " (retrying; the registration was last found matching the spec, so Ready stays True for up to " + grace.String() + " of failures in a row)"
		meta.SetStatusCondition(&sub.Status.Conditions, reconciling)
		return
	}
	setReady(sub, metav1.ConditionFalse, reason, msg)
	meta.SetStatusCondition(&sub.Status.Conditions, reconciling)
}

func setReady(sub *hookv1.WebhookSubscription, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&sub.Status.Conditions, metav1.Condition{
		Type: hookv1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: sub.Generation,
	})
}

func setCondition(sub *hookv1.WebhookSubscription, typ, reason, msg string) {
	meta.SetStatusCondition(&sub.Status.Conditions, metav1.Condition{
		Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: sub.Generation,
	})
}
