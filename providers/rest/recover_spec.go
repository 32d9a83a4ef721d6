package rest

import (
	"encoding/json"
	"time"
)

// Recovery styles.
const (
	// RecoverRedeliver: the API keeps a log of deliveries per registration and sends one entry
	// again on request (GitLab's hook events and resend).
	RecoverRedeliver = "redeliver"
	// RecoverRange: the API resends every failed delivery since a time in one request (Svix's
	// POST .../endpoint/{id}/recover).
	RecoverRange = "range"
)

// MaxRecoverWindow bounds recover.window: no API here keeps deliveries longer (Svix keeps
// payloads 90 days by default).
const MaxRecoverWindow = Duration(366 * 24 * time.Hour)

// RecoverSpec is the profile's recover section.
type RecoverSpec struct {
	// Style is redeliver or range.
	Style string `json:"style"`
	// Window is how far back the API keeps what can be recovered (GitLab's hook events: 7
	// days); nothing older comes back, and the reconciler reports it instead.
	Window Duration `json:"window"`
	// Redeliver configures style redeliver.
	Redeliver *RedeliverSpec `json:"redeliver,omitempty"`
	// Range configures style range.
	Range *RangeSpec `json:"range,omitempty"`
}

// RedeliverSpec reads a registration's delivery log and asks for one entry again.
type RedeliverSpec struct {
	// Log lists the delivery log of registration {{.ID}}, paged as list.pagination pages
	// (its own pagination block; GitLab: status=client_failure,server_failure, per_page at
	// most 20). The API's order does not matter: entries are sorted by time.
	Log ListOp `json:"log"`
	// Succeeded, when set, lists the log's successful entries (GitLab: status=successful), for
	// a log listed with a failure filter: a failed delivery whose id (entry.id) later
	// succeeded is not missed. It is read up to limits.maxPages pages, newest entries being
	// what matters (a redelivery that succeeded); a failed delivery it misses is only sent
	// again, which the receiver's ledger answers as a duplicate.
	Succeeded *ListOp `json:"succeeded,omitempty"`
	// Entry locates an entry's fields.
	Entry DeliveryMapping `json:"entry"`
	// Resend asks for entry {{.Handle}} of registration {{.ID}} to be sent again.
	Resend ResendOp `json:"resend"`
	// Rate is the API's own limit on resend requests (GitLab: 5 a minute per project and
	// user), which the manager paces redeliveries at (RecoveryCapabilities.RedeliverRate).
	Rate *RateSpec `json:"rate,omitempty"`
}

// DeliveryMapping locates one delivery log entry's fields (gjson dot paths into the entry).
type DeliveryMapping struct {
	// Handle is the entry's own id, what resend names ({{.Handle}}; GitLab id).
	Handle string `json:"handle"`
	// ID is the id the receiver dedupes the delivery on, the same in every attempt (GitLab
	// request_headers.Idempotency-Key).
	ID string `json:"id"`
	// At is when the entry was made (RFC 3339; GitLab created_at).
	At string `json:"at"`
	// Status is the HTTP status the endpoint answered (a number or a numeric string; GitLab
	// response_status): 2xx is delivered, anything else (GitLab's "internal error" when the
	// endpoint could not be reached) is not.
	Status string `json:"status"`
	// Type is the event's type (GitLab trigger, push_hooks); optional.
	Type string `json:"type,omitempty"`
	// Types maps the API's type values onto the profile's event names (push_hooks: push), so
	// a subscription's events select entries; a value not mapped is kept as the API says it.
	Types map[string]string `json:"types,omitempty"`
}

// ResendOp is the resend request.
type ResendOp struct {
	Op
	// Status, when set, is the response path of the status the endpoint answered the resent
	// delivery with (GitLab's resend answers 201 {"response_status": 502} when the endpoint
	// still fails): a value that is not 2xx fails Redeliver as Transient.
	Status string `json:"status,omitempty"`
	// RetryLater are answers that mean "not now" rather than "never" (GitLab: 422 "Hook
	// disabled" while the hook is temporarily disabled): Transient instead of Permanent.
	RetryLater []Match `json:"retryLater,omitempty"`
}

// RateSpec is a request limit: Requests per Period. It is paced one request at a time
// (every Period/Requests), never in bursts: the APIs count in fixed windows, where a burst
// at a window's end followed by one at the next window's start would exceed the limit.
type RateSpec struct {
	Requests int      `json:"requests"`
	Period   Duration `json:"period"`
}

// RangeSpec asks the API to resend every failed delivery to registration {{.ID}} since a
// time: a POST whose JSON body holds the time (RFC 3339, UTC) at Since.
type RangeSpec struct {
	Op
	// Since is the request path of the start time (Svix since).
	Since string `json:"since"`
}

// HealthSpec reads the provider's view of deliveries to a registration from the
// registration itself (the list, get, create and update answers). The first that holds,
// in this order, decides: disabledUntil in the future, a disabled condition (Disabled);
// disabledUntil in the past, a failing condition (Failing); a healthy condition (Healthy);
// otherwise Unknown.
type HealthSpec struct {
	// Disabled are conditions under which the API has stopped delivering (PagerDuty
	// delivery_method.temporarily_disabled true, GitLab alert_status disabled).
	Disabled []Condition `json:"disabled,omitempty"`
	// DisabledUntil is the response path of the end of a temporary disable (RFC 3339 or null;
	// GitLab disabled_until). In the future: disabled until then; in the past: the API sends
	// again but the last deliveries failed (GitLab clears it on the next success).
	DisabledUntil string `json:"disabledUntil,omitempty"`
	// Failing are conditions under which recent deliveries fail.
	Failing []Condition `json:"failing,omitempty"`
	// Healthy are conditions under which deliveries go (GitLab alert_status executable).
	Healthy []Condition `json:"healthy,omitempty"`
	// Reenable, optional, asks the API to deliver to registration {{.ID}} again after it
	// disabled it (PagerDuty POST /webhook_subscriptions/{id}/enable).
	Reenable *Op `json:"reenable,omitempty"`
}

// Condition holds when the value at Path equals one of Values (JSON values: true,
// "temporarily_disabled").
type Condition struct {
	Path   string            `json:"path"`
	Values []json.RawMessage `json:"values"`
}
