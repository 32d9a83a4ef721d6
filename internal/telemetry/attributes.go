package telemetry

import "go.opentelemetry.io/otel/attribute"

// Attributes shared by the receiver's spans and its attempts' spans, so a query for one event
// or subscription finds both.
const (
	// AttrSubscription is the subscription, "namespace/name".
	AttrSubscription = attribute.Key("hookwarden.subscription")
	// AttrEventID is the provider's event id, the CloudEvent's id (OTel CloudEvents conventions).
	AttrEventID = attribute.Key("cloudevents.event_id")
)
