package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

func resyncSub(interval time.Duration) *hookv1.WebhookSubscription {
	sub := &hookv1.WebhookSubscription{}
	if interval != 0 {
		sub.Spec.ResyncInterval = &metav1.Duration{Duration: interval}
	}
	return sub
}

func TestResyncMaxListAge(t *testing.T) {
	cases := []struct {
		reason   string
		ttl      time.Duration
		interval time.Duration // 0: unset
		want     time.Duration
	}{
		{"ListTTL is the cap with a long interval", 30 * time.Second, 10 * time.Minute, 30 * time.Second},
		{"half the interval when that is shorter than ListTTL", 30 * time.Second, 40 * time.Second, 20 * time.Second},
		{"unset interval means the 10m default", 30 * time.Second, 0, 30 * time.Second},
		{"unset interval with a long TTL: half the default", time.Hour, 0, 5 * time.Minute},
	}
	for _, c := range cases {
		r := &Reconciler{ListTTL: c.ttl}
		if got := r.maxListAge(resyncSub(c.interval)); got != c.want {
			t.Errorf("maxListAge(ttl %s, interval %s) = %s; want %s (%s)", c.ttl, c.interval, got, c.want, c.reason)
		}
	}
}

func TestResyncNext(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		reason    string
		ttl       time.Duration
		interval  time.Duration
		fetchedAt time.Time     // the account's epoch: its first list
		base      time.Duration // result is in [base, base+spread)
		spread    time.Duration
	}{
		{"account's grid started 3m ago: come back at the next grid point, with the account's other subscriptions",
			30 * time.Second, 10 * time.Minute, now.Add(-3 * time.Minute), 7 * time.Minute, 15 * time.Second},
		{"grid starts now: a full interval",
			30 * time.Second, 10 * time.Minute, now, 10 * time.Minute, 15 * time.Second},
		{"grid started 11m ago: the next grid point is 9m ahead, whichever list this subscription saw",
			30 * time.Second, 10 * time.Minute, now.Add(-11 * time.Minute), 9 * time.Minute, 15 * time.Second},
		{"grid started many waves ago: still on the grid",
			30 * time.Second, 10 * time.Minute, now.Add(-(5*time.Hour + 4*time.Minute)), 6 * time.Minute, 15 * time.Second},
		{"no list yet (zero epoch): the interval",
			30 * time.Second, 10 * time.Minute, time.Time{}, 10 * time.Minute, 15 * time.Second},
		{"epoch in the future (clock skew): never more than the interval",
			30 * time.Second, 10 * time.Minute, now.Add(time.Minute), 10 * time.Minute, 15 * time.Second},
		{"short interval: jitter bounded by interval/20",
			30 * time.Second, time.Minute, now.Add(-20 * time.Second), 40 * time.Second, 3 * time.Second},
		{"short ListTTL: jitter bounded by maxListAge/2, so the late ones still reuse the list",
			4 * time.Second, 10 * time.Minute, now.Add(-time.Minute), 9 * time.Minute, 2 * time.Second},
		{"unset interval: the 10m default",
			30 * time.Second, 0, now.Add(-time.Minute), 9 * time.Minute, 15 * time.Second},
	}
	for _, c := range cases {
		r := &Reconciler{ListTTL: c.ttl, Now: func() time.Time { return now }}
		sub := resyncSub(c.interval)
		if maxAge := r.maxListAge(sub); c.spread > maxAge/2 {
			t.Fatalf("case %q: spread %s must stay below maxListAge/2 = %s", c.reason, c.spread, maxAge/2)
		}
		jittered := false
		for range 500 {
			got := r.nextResync(sub, c.fetchedAt)
			if got < c.base || got >= c.base+c.spread {
				t.Errorf("nextResync = %s; want in [%s, %s) (%s)", got, c.base, c.base+c.spread, c.reason)
				break
			}
			jittered = jittered || got != c.base
		}
		if !jittered {
			t.Errorf("nextResync returned exactly %s 500 times: no jitter (%s)", c.base, c.reason)
		}
	}
}

func TestResyncSinceWaveStart(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		reason   string
		interval time.Duration
		epoch    time.Time
		want     time.Duration
	}{
		{"3m into the first period: a list of the last 3m is this wave's", 10 * time.Minute, now.Add(-3 * time.Minute), 3 * time.Minute},
		{"many periods on: counted from the latest grid point", 10 * time.Minute, now.Add(-(5*time.Hour + 4*time.Minute)), 4 * time.Minute},
		{"on a grid point: nothing is this wave's yet", 10 * time.Minute, now.Add(-20 * time.Minute), 0},
		{"no list yet (zero epoch)", 10 * time.Minute, time.Time{}, 0},
		{"epoch in the future (clock skew)", 10 * time.Minute, now.Add(time.Minute), 0},
	}
	for _, c := range cases {
		r := &Reconciler{Now: func() time.Time { return now }}
		if got := r.sinceWaveStart(resyncSub(c.interval), c.epoch); got != c.want {
			t.Errorf("sinceWaveStart = %s; want %s (%s)", got, c.want, c.reason)
		}
	}
}

// TestResyncSinceDue: a steady subscription accepts any list read since its resync came due on
// its account's grid, however late its turn in the wave: a wave that outlasts the interval
// lists the account once, not once more for every subscription served after the next grid
// point. lastSyncTime is in whole seconds.
func TestResyncSinceDue(t *testing.T) {
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC) // grid points at :00.3, :20.3, :40.3
	const interval = 20 * time.Second
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	synced := func(t time.Time) *metav1.Time { v := metav1.NewTime(t.Truncate(time.Second)); return &v }
	cases := []struct {
		reason   string
		lastSync *metav1.Time
		now      time.Time
		want     time.Duration
	}{
		{"synced in wave 1 (list at :20.5, stored as :20), on time for wave 2: due at :40.3",
			synced(at(20*time.Second + 200*time.Millisecond)), at(40*time.Second + 800*time.Millisecond), 800 * time.Millisecond},
		{"the same subscription served late, 25 s past the grid point of wave 2: still wave 2's list",
			synced(at(20*time.Second + 200*time.Millisecond)), at(65 * time.Second), 25 * time.Second},
		{"before its due point (a Secret woke it): nothing is this wave's",
			synced(at(20*time.Second + 200*time.Millisecond)), at(30 * time.Second), 0},
		{"the truncated second falls before its own wave's grid point: the due point is still the next one",
			synced(at(20*time.Second + 100*time.Millisecond)), at(22 * time.Second), 0},
		{"synced before this manager's first list (a restart): any list since the epoch",
			synced(at(-5 * time.Minute)), at(3 * time.Second), 3 * time.Second},
		{"never synced: from the latest grid point", nil, at(45 * time.Second), 5 * time.Second},
	}
	for _, c := range cases {
		r := &Reconciler{Now: func() time.Time { return c.now }}
		sub := resyncSub(interval)
		sub.Status.LastSyncTime = c.lastSync
		if got := r.sinceDue(sub, epoch); got != c.want {
			t.Errorf("sinceDue = %s; want %s (%s)", got, c.want, c.reason)
		}
	}
}

func TestSteadyOnlyAfterSuccessOnTheCurrentSpec(t *testing.T) {
	ready := func(gen, observed, condGen int64, status metav1.ConditionStatus, reason string) *hookv1.WebhookSubscription {
		sub := &hookv1.WebhookSubscription{}
		sub.Generation = gen
		sub.Status.ObservedGeneration = observed
		sub.Status.Conditions = []metav1.Condition{{Type: hookv1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: condGen}}
		return sub
	}
	cases := []struct {
		reason string
		sub    *hookv1.WebhookSubscription
		want   bool
	}{
		{"Ready on the current generation: a resync", ready(2, 2, 2, metav1.ConditionTrue, hookv1.ReasonSucceeded), true},
		{"spec changed since (generation ahead): a change to carry out", ready(3, 2, 2, metav1.ConditionTrue, hookv1.ReasonSucceeded), false},
		{"last reconcile failed", ready(2, 2, 2, metav1.ConditionFalse, hookv1.ReasonSucceeded), false},
		{"suspended is not in step with the provider", ready(2, 2, 2, metav1.ConditionTrue, hookv1.ReasonSuspended), false},
		{"new subscription, no status", &hookv1.WebhookSubscription{}, false},
	}
	for _, c := range cases {
		if got := steady(c.sub); got != c.want {
			t.Errorf("steady = %v; want %v (%s)", got, c.want, c.reason)
		}
	}
}
