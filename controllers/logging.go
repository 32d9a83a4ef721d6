package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/logkeys"
)

// Log keys are shared with the receiver (internal/logkeys).
const (
	logSubscription = logkeys.Subscription
	logProvider     = logkeys.Provider
	logEndpointID   = logkeys.EndpointID
	logReason       = logkeys.Reason
)

// Provider writes, as the audit trail names them (the "action" of a "provider write" line).
const (
	actionCreate    = "create"
	actionUpdate    = "update"
	actionDelete    = "delete"
	actionPrune     = "prune"
	actionRotate    = "rotate"
	actionRecover   = "recover-secret"
	actionSetSecret = "set-secret"
	actionOrphan    = "orphan"
)

// audit logs one write at the provider (or, for an orphan, the decision not to delete) at
// info: the trail from a subscription to what the manager did at its account.
func (r *Reconciler) audit(ctx context.Context, sub *hookv1.WebhookSubscription, action, endpointID, reason string) {
	log.FromContext(ctx).Info("provider write", "action", action, logSubscription, account.SubscriptionKey(sub),
		logProvider, string(sub.Spec.Provider.Type), logEndpointID, endpointID, logReason, reason)
}
