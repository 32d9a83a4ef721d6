package controllers

import (
	"time"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// What the recovery decision reads, gathered: the subscription's recovery spec and status, the
// account's recovery capabilities and what its client implements, the provider's view of
// deliveries. The runner (recovery.go) reads no capability itself: it carries out
// decide.Recovery's decision.

// recoveryAvailability is what the provider offers, for status.recovery.
func recoveryAvailability(ro account.RecoveryOps) (available bool, window time.Duration) {
	return decide.Availability(ro.Caps(), ro.CanRecover())
}

// gatherRecoveryInput is decide.Recovery's input for sub, whose status.recovery exists.
func gatherRecoveryInput(sub *hookv1.WebhookSubscription, ro account.RecoveryOps, t recoveryTarget, health providers.DeliveryHealth, now time.Time) decide.RecoveryInput {
	st := sub.Status.Recovery
	in := decide.RecoveryInput{
		Provider: string(sub.Spec.Provider.Type), Mode: sub.Spec.Recovery.Mode, Requested: sub.Annotations[hookv1.AnnotationRecoverRequestedAt], LastHandled: st.LastHandledRequestedAt,
		Caps: ro.Caps(), CanRecover: ro.CanRecover(), CanReenable: ro.CanReenable(), CanListEvents: ro.CanListEvents(), Synced: t.kept.ID != "" && !sub.Spec.Disabled,
		Health: health, Resync: resyncInterval(sub), Now: now, Created: t.kept.Created,
	}
	if sub.Spec.Recovery.Lookback != nil {
		in.Lookback = sub.Spec.Recovery.Lookback.Duration
	}
	if st.Watermark != nil {
		in.Watermark = st.Watermark.Time
	}
	if st.ProviderDisabledAt != nil {
		in.DisabledAt = st.ProviderDisabledAt.Time
	}
	if st.LastRun != nil {
		in.LastRunStart = st.LastRun.StartTime.Time
		if st.LastRun.Result == hookv1.RecoveryPartial {
			in.Unfinished = st.LastRun.Trigger
		}
	}
	return in
}
