package controllers

import (
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// When a subscription is looked at again, and how old a shared list may be when it is.

// DefaultResyncInterval applies when spec.resyncInterval is unset.
const DefaultResyncInterval = 10 * time.Minute

func resyncInterval(sub *hookv1.WebhookSubscription) time.Duration {
	if sub.Spec.ResyncInterval != nil && sub.Spec.ResyncInterval.Duration > 0 {
		return sub.Spec.ResyncInterval.Duration
	}
	return DefaultResyncInterval
}

// maxListAge is how old a shared list may be for this subscription to reuse it.
func (r *Reconciler) maxListAge(sub *hookv1.WebhookSubscription) time.Duration {
	return min(r.ListTTL, resyncInterval(sub)/2)
}

// listAge is how old a list may be for this reconcile: none for a requested reconcile (fresh);
// for a resync of a subscription already in step, any list read since its resync came due
// (sinceDue), however long the wave has run: thousands of subscriptions on one account outlast
// maxListAge, and a busy wave may outlast the interval itself.
func (r *Reconciler) listAge(sub *hookv1.WebhookSubscription, epoch time.Time, fresh bool) time.Duration {
	maxAge := r.maxListAge(sub)
	switch {
	case fresh:
		return 0
	case steady(sub):
		return max(maxAge, r.sinceDue(sub, epoch))
	}
	return maxAge
}

// sinceDue is how long ago the subscription's resync came due: the first point of its
// account's grid after its last sync. A list younger than that was read in this wave, for it.
// Counting from the subscription's own due point, not from the latest grid point, is what keeps
// a wave that outlasts the interval at one list: a subscription whose turn comes after the next
// grid point is still in its wave, and reuses the list read when that wave began (or a newer
// one) instead of reading the account again.
//
// status.lastSyncTime is the time of the list the last sync used, in whole seconds (it is
// serialized so): the due point is counted from the second after it, so a truncated time never
// falls before the grid point of its own wave and makes that wave's list look like the next's.
func (r *Reconciler) sinceDue(sub *hookv1.WebhookSubscription, epoch time.Time) time.Duration {
	last := sub.Status.LastSyncTime
	if epoch.IsZero() || last == nil {
		return r.sinceWaveStart(sub, epoch)
	}
	interval := resyncInterval(sub)
	after := last.Add(time.Second).Sub(epoch)
	due := epoch
	if after >= 0 {
		due = epoch.Add((after/interval + 1) * interval)
	}
	return max(r.Now().Sub(due), 0)
}

// sinceWaveStart is how long ago the subscription's current resync period began on its
// account's grid (zero before the account's first list): a list younger than that was read in
// this wave.
func (r *Reconciler) sinceWaveStart(sub *hookv1.WebhookSubscription, epoch time.Time) time.Duration {
	elapsed := r.Now().Sub(epoch)
	if epoch.IsZero() || elapsed < 0 {
		return 0
	}
	return elapsed % resyncInterval(sub)
}

// steady reports whether the subscription's last reconcile succeeded on its current spec: a
// reconcile now is a resync (or a wake-up by a Secret), not a change to carry out.
func steady(sub *hookv1.WebhookSubscription) bool {
	c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
	return sub.Status.ObservedGeneration == sub.Generation && c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason == hookv1.ReasonSucceeded && c.ObservedGeneration == sub.Generation
}

// nextResync puts every subscription of an account on one grid: the next multiple of the
// resync interval counted from the account's first list (plus a little jitter). The first
// subscription to wake at a grid point re-lists, the rest reuse that list (sinceWaveStart), so
// list calls per wave stay at one however many subscriptions there are and however long the
// wave runs: the grid, not the time of the list each subscription happened to see, decides the
// next wave.
func (r *Reconciler) nextResync(sub *hookv1.WebhookSubscription, epoch time.Time) time.Duration {
	interval := resyncInterval(sub)
	next := interval
	if elapsed := r.Now().Sub(epoch); !epoch.IsZero() && elapsed >= 0 {
		next = interval - elapsed%interval
	}
	spread := min(interval/20, r.maxListAge(sub)/2)
	if spread > 0 {
		next += rand.N(spread)
	}
	return next
}
