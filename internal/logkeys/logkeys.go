// Package logkeys names the structured log keys the manager and the receiver share, so one
// query follows a subscription, a registration or an event through both binaries.
package logkeys

const (
	// Subscription is a WebhookSubscription as namespace/name.
	Subscription = "subscription"
	// Provider is the provider type (stripe, github, rest).
	Provider = "provider"
	// EndpointID is the provider's id of a registration.
	EndpointID = "endpointID"
	// EventID is the provider's id of a delivered event (the dedupe key).
	EventID = "eventID"
	// Reason says why: why a write was made, a reconcile stalled, a delivery was refused.
	Reason = "reason"
	// Attempt numbers a delivery attempt.
	Attempt = "attempt"
)
