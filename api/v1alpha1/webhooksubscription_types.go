package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType names a webhook provider.
// +kubebuilder:validation:Enum=stripe;github;rest
type ProviderType string

const (
	ProviderStripe ProviderType = "stripe"
	ProviderGitHub ProviderType = "github"
	// ProviderREST is any REST API described by a profile (spec.provider.rest).
	ProviderREST ProviderType = "rest"
)

// SecretKeySelector points at one key of a Secret in the subscription's namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the Secret. Defaults to the provider's word for its credential: apiKey for
	// stripe, token for github, privateKey for a GitHub App (spec.provider.github.app).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// ProviderSpec says which provider account to register the webhook with.
// +kubebuilder:validation:XValidation:rule="self.type == 'github' ? has(self.github) : !has(self.github)",message="spec.provider.github must be set when spec.provider.type is github, and only then"
// +kubebuilder:validation:XValidation:rule="self.type == 'rest' ? has(self.rest) : !has(self.rest)",message="spec.provider.rest must be set when spec.provider.type is rest, and only then"
// +kubebuilder:validation:XValidation:rule="!has(self.stripe) || self.type == 'stripe'",message="spec.provider.stripe is only for spec.provider.type stripe"
type ProviderSpec struct {
	// Type of the provider.
	Type ProviderType `json:"type"`
	// CredentialsRef points at the credential in a Secret in this namespace: a Stripe secret
	// key (key apiKey), a GitHub token (key token) or, for spec.provider.github.app, the GitHub
	// App's private key in PEM (key privateKey).
	CredentialsRef SecretKeySelector `json:"credentialsRef"`
	// APIURL overrides the provider's API base URL: https://HOST/api/v3 for GitHub Enterprise
	// Server, stripe-mock, a fake.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == '' || self.startsWith('https://') || self.startsWith('http://')",message="spec.provider.apiURL must be an http(s) URL"
	// +optional
	APIURL string `json:"apiURL,omitempty"`
	// GitHub names the repository or organization whose hooks this subscription manages, or
	// the GitHub App whose webhook it manages; required when type is github.
	// +optional
	GitHub *GitHubTarget `json:"github,omitempty"`
	// REST names the profile that describes the API, and the parameters of this subscription's
	// scope; required when type is rest.
	// +optional
	REST *RESTProvider `json:"rest,omitempty"`
	// Stripe selects what is registered at Stripe: a v1 webhook endpoint (the default, also
	// without this block) or a v2 event destination. Optional when type is stripe.
	// +optional
	Stripe *StripeProvider `json:"stripe,omitempty"`
}

// StripeAPIVersion is the Stripe API a registration is made with.
// +kubebuilder:validation:Enum=v1;v2
type StripeAPIVersion string

const (
	// StripeV1 registers a webhook endpoint (/v1/webhook_endpoints), signed snapshot events.
	StripeV1 StripeAPIVersion = "v1"
	// StripeV2 registers an event destination of type webhook_endpoint
	// (/v2/core/event_destinations), with thin or snapshot payloads.
	StripeV2 StripeAPIVersion = "v2"
)

// StripeEventPayload is what a v2 event destination sends.
// +kubebuilder:validation:Enum=thin;snapshot
type StripeEventPayload string

const (
	// StripeThin events carry ids only; the consumer fetches the event or the object.
	StripeThin StripeEventPayload = "thin"
	// StripeSnapshot events carry the object as it was, rendered at Stripe's API version.
	StripeSnapshot StripeEventPayload = "snapshot"
)

// StripeProvider selects Stripe's registration API. A v1 endpoint and a v2 destination for the
// same URL are different registrations (Stripe's migration runs both side by side): changing
// apiVersion or eventPayload makes a new registration, never converts one.
// +kubebuilder:validation:XValidation:rule="!has(self.eventPayload) || (has(self.apiVersion) && self.apiVersion == 'v2')",message="spec.provider.stripe.eventPayload is for apiVersion v2 (v1 endpoints send snapshot events)"
type StripeProvider struct {
	// APIVersion is v1 (webhook endpoints; the default) or v2 (event destinations).
	// +optional
	APIVersion StripeAPIVersion `json:"apiVersion,omitempty"`
	// EventPayload of a v2 destination: thin (the default) or snapshot.
	// +optional
	EventPayload StripeEventPayload `json:"eventPayload,omitempty"`
}

// RESTProvider selects a REST profile (one built into Hookwarden, from a ConfigMap in this
// namespace, or inline) and fills its parameters.
// +kubebuilder:validation:XValidation:rule="[has(self.builtin), has(self.profileRef), has(self.profile)].filter(x, x).size() == 1",message="spec.provider.rest: set exactly one of builtin, profileRef or profile"
type RESTProvider struct {
	// Builtin names a profile shipped inside Hookwarden (the files of config/samples/rest,
	// without .profile.yaml): it follows the manager's version, nothing to install.
	// +kubebuilder:validation:Enum=bitbucket-repository-hooks;bitbucket-workspace-hooks;gitlab-group-hooks;gitlab-project-hooks;gitlab-project-hooks-pre-17.1;pagerduty-webhook-subscriptions;svix-endpoints;zendesk-webhooks
	// +optional
	Builtin string `json:"builtin,omitempty"`
	// ProfileRef is the ConfigMap key, in this namespace, that holds the profile (YAML or JSON).
	// Editing it re-reconciles the subscriptions that use it.
	// +optional
	ProfileRef *ConfigMapKeySelector `json:"profileRef,omitempty"`
	// Profile is the profile itself, inline.
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Profile string `json:"profile,omitempty"`
	// Parameters fill the profile's declared parameters (a GitLab project, a Zendesk
	// subdomain); together they name what one list covers.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
}

// ConfigMapKeySelector points at one key of a ConfigMap in the subscription's namespace.
type ConfigMapKeySelector struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// GitHubTarget is a repository ({owner, repository}: a repository hook), an organization
// ({organization}: an organization hook) or a GitHub App ({app}: the App's one webhook).
// +kubebuilder:validation:XValidation:rule="[has(self.owner) || has(self.repository), has(self.organization), has(self.app)].filter(x, x).size() == 1",message="spec.provider.github: set either owner and repository (a repository hook), organization (an organization hook) or app (a GitHub App's webhook)"
// +kubebuilder:validation:XValidation:rule="has(self.owner) == has(self.repository)",message="spec.provider.github: owner and repository are set together"
type GitHubTarget struct {
	// Owner is the user or organization that owns the repository: a GitHub login (letters,
	// digits and inner hyphens, at most 39), or an Enterprise Managed User's (a login and an
	// _shortcode suffix).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9-]{0,37}[A-Za-z0-9])?(_[A-Za-z0-9]{1,24})?$`
	// +optional
	Owner string `json:"owner,omitempty"`
	// Repository is the repository's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="spec.provider.github.repository must not be . or .."
	// +optional
	Repository string `json:"repository,omitempty"`
	// Organization is the organization's login, for an organization hook.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`
	// +optional
	Organization string `json:"organization,omitempty"`
	// App selects a GitHub App's webhook: the one webhook every App has, which Hookwarden points
	// at the endpoint and gives a signing secret. The credential is then the App's private key
	// (the .pem file GitHub issues; spec.provider.credentialsRef.key defaults to privateKey).
	// The App's events are set in its settings only: a difference from spec.events is reported
	// (condition ReadOnlyDrift), never changed; events ["*"] takes the App's settings as they are.
	// +optional
	App *GitHubApp `json:"app,omitempty"`
}

// GitHubApp names a GitHub App.
type GitHubApp struct {
	// AppID is the App's ID (digits) or its client ID (Iv…), as its settings page shows them:
	// the issuer of the JSON web tokens signed with its private key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=66
	// +kubebuilder:validation:Pattern=`^([1-9][0-9]{0,19}|Iv[0-9A-Za-z._-]{1,64})$`
	AppID string `json:"appID"`
}

// EndpointSpec says where the provider delivers: an explicit URL, or the bundled receiver.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.receiver)",message="spec.endpoint: set exactly one of url or receiver"
type EndpointSpec struct {
	// URL the provider POSTs deliveries to. It is registered in its canonical form (lowercase
	// scheme and host, no default port, uppercase percent-hex).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self)",message="spec.endpoint.url must be an absolute URL"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="spec.endpoint.url must use https (or http with spec.endpoint.allowInsecureHTTP)"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="spec.endpoint.url must have a host"
	// +kubebuilder:validation:XValidation:rule="!self.contains('#')",message="spec.endpoint.url must not contain a fragment (#...): providers never send it"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="spec.endpoint.url must not contain credentials (user:password@)"
	// +optional
	URL string `json:"url,omitempty"`
	// Receiver registers the bundled receiver for this subscription: the manager's
	// --receiver-base-url followed by /hooks/<namespace>/<name>.
	// +optional
	Receiver *ReceiverEndpoint `json:"receiver,omitempty"`
	// AllowInsecureHTTP permits an http:// URL; deliveries then travel unencrypted.
	// +optional
	AllowInsecureHTTP bool `json:"allowInsecureHTTP,omitempty"`
}

// ReceiverEndpoint selects the bundled receiver as the delivery endpoint.
type ReceiverEndpoint struct{}

// DeliverySpec tells the bundled receiver where and how to deliver verified events: to every
// sink of sinks whose filter matches, each on its own (retries, backoff, dead letters and order
// per event and sink), or to the one HTTP sink of the older sink field.
// +kubebuilder:validation:XValidation:rule="!(has(self.sink) && has(self.sinks))",message="spec.delivery: set sinks or the older sink, not both (sink is one HTTP sink named default: move it into sinks)"
// +kubebuilder:validation:XValidation:rule="has(self.sink) || has(self.sinks)",message="spec.delivery: set sinks (or the older sink)"
type DeliverySpec struct {
	// Sink is the older form of one HTTP sink: the same as sinks with one http sink named
	// default. Use sinks for anything else.
	// +optional
	Sink *SinkSpec `json:"sink,omitempty"`
	// Sinks receive each event whose filter they match, each independently: one sink failing
	// or slow never holds back another.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(s, self.exists_one(t, t.name == s.name))",message="spec.delivery.sinks: two sinks have the same name; each name must be unique in the list"
	// +optional
	Sinks []Sink `json:"sinks,omitempty"`
	// MaxAttempts before an event is dead-lettered (a sink's own maxAttempts overrides it).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=10
	// +optional
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// DedupeWindow is how long processed event ids are remembered; keep it longer than the
	// provider's redelivery horizon (Stripe retries for 3 days).
	// +kubebuilder:default="72h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="spec.delivery.dedupeWindow must be a duration such as 72h, 30m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1m')",message="spec.delivery.dedupeWindow must be at least 1m"
	// +optional
	DedupeWindow *metav1.Duration `json:"dedupeWindow,omitempty"`
	// Retention is how long the bundled receiver keeps an event's payload once it was
	// delivered to every sink, for hookwarden events show and replay; then the payload is
	// dropped (the event id stays remembered for dedupeWindow). Default: the dedupe window.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="spec.delivery.retention must be a duration such as 720h, 30m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1m') && duration(self) <= duration('8760h'))",message="spec.delivery.retention must be between 1m and 8760h (a year)"
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
}

// DefaultSinkName is the name of the sink that spec.delivery.sink stands for.
const DefaultSinkName = "default"

// EffectiveSinks is the list of sinks d delivers to: sinks, or the older sink as one HTTP sink
// named default (nil when d is nil or names neither).
func (d *DeliverySpec) EffectiveSinks() []Sink {
	switch {
	case d == nil:
		return nil
	case len(d.Sinks) > 0:
		return d.Sinks
	case d.Sink != nil:
		return []Sink{{Name: DefaultSinkName, HTTP: &HTTPSink{URL: d.Sink.URL}}}
	}
	return nil
}

// SinkSpec is the older single HTTP sink (spec.delivery.sink).
type SinkSpec struct {
	// URL of the sink (http or https; usually a cluster Service).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('https://') || self.startsWith('http://'))",message="spec.delivery.sink.url must be an absolute http(s) URL"
	URL string `json:"url"`
}

// Sink is one named consumer of a subscription's events: exactly one of http, ref, kafka, nats
// or amqp, with an optional filter, attempt budget and per-key order.
// +kubebuilder:validation:XValidation:rule="(has(self.http) ? 1 : 0) + (has(self.ref) ? 1 : 0) + (has(self.kafka) ? 1 : 0) + (has(self.nats) ? 1 : 0) + (has(self.amqp) ? 1 : 0) == 1",message="spec.delivery.sinks[]: set exactly one of http, ref, kafka, nats or amqp"
type Sink struct {
	// Name identifies the sink in metrics, dead letters and conditions: a DNS label, unique
	// in the list.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.delivery.sinks[].name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`
	// HTTP posts each event as a CloudEvent in HTTP binary mode.
	// +optional
	HTTP *HTTPSink `json:"http,omitempty"`
	// Ref posts each event to a Kubernetes addressable (a Service, a Knative Broker, anything
	// with status.address.url), resolved by the manager and followed when it changes.
	// +optional
	Ref *RefSink `json:"ref,omitempty"`
	// Kafka produces each event as a CloudEvents binary-mode record.
	// +optional
	Kafka *KafkaSink `json:"kafka,omitempty"`
	// NATS publishes each event to a JetStream stream, which drops a repeat inside its
	// duplicate window (Nats-Msg-Id is the Idempotency-Key).
	// +optional
	NATS *NATSSink `json:"nats,omitempty"`
	// AMQP publishes each event to a RabbitMQ exchange with publisher confirms.
	// +optional
	AMQP *AMQPSink `json:"amqp,omitempty"`
	// Filter is a CEL expression over the event (type, source, subject, id, time, data) that
	// selects the events this sink gets, for example type.startsWith('charge.'). Empty: all.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Filter string `json:"filter,omitempty"`
	// MaxAttempts before an event is dead-lettered for this sink (default: spec.delivery's).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// Ordering, when set, delivers events with the same key to this sink in arrival order.
	// +optional
	Ordering *SinkOrdering `json:"ordering,omitempty"`
}

// OrderingMode says how a sink orders its events.
type OrderingMode string

// OrderingPerKey delivers events with the same key in arrival order, retries included: a
// failing event holds back only its own key, and a dead-lettered one releases it.
const OrderingPerKey OrderingMode = "PerKey"

// SinkOrdering orders a sink's events per key.
type SinkOrdering struct {
	// Mode is PerKey.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self == 'PerKey'",message="spec.delivery.sinks[].ordering.mode must be PerKey"
	Mode OrderingMode `json:"mode"`
	// Key is the path of the value events are ordered by: id, type, subject, or data followed
	// by dot-separated fields (data.object.id). An event without it is ordered under the
	// empty key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^(id|type|subject|data([.][^.]+)+)$')",message="spec.delivery.sinks[].ordering.key must be id, type, subject, or data followed by dot-separated fields such as data.object.id"
	Key string `json:"key"`
}

// HTTPSink posts events to a URL.
type HTTPSink struct {
	// URL of the sink (http or https).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('https://') || self.startsWith('http://'))",message="spec.delivery.sinks[].http.url must be an absolute http(s) URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="spec.delivery.sinks[].http.url must not contain credentials (user:password@): use auth"
	URL string `json:"url"`
	// Headers are added to every request. The receiver's own headers (Content-Type,
	// Idempotency-Key, ce-*, Authorization, Host) cannot be set here.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Headers []HTTPHeader `json:"headers,omitempty"`
	// Auth authenticates the receiver to the sink, from Secrets in the subscription's
	// namespace.
	// +optional
	Auth *HTTPAuth `json:"auth,omitempty"`
}

// HTTPHeader is one extra request header.
type HTTPHeader struct {
	// Name of the header.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9!#$%&*+.^_|~-]+$')",message="spec.delivery.sinks[].http.headers[].name must be an HTTP header name"
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['content-type', 'idempotency-key', 'authorization', 'host', 'content-length', 'user-agent', 'traceparent', 'tracestate']) && !self.lowerAscii().startsWith('ce-')",message="spec.delivery.sinks[].http.headers[].name is a header the receiver sets itself (Content-Type, Idempotency-Key, Authorization, Host, Content-Length, User-Agent, traceparent, tracestate, ce-*)"
	Name string `json:"name"`
	// Value of the header.
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value"`
}

// HTTPAuth is how the receiver authenticates to an HTTP sink, and how it checks the sink.
// +kubebuilder:validation:XValidation:rule="!(has(self.bearerToken) && has(self.basic))",message="spec.delivery.sinks[].http.auth: set bearerToken or basic, not both"
type HTTPAuth struct {
	// BearerToken is sent as Authorization: Bearer <token>.
	// +optional
	BearerToken *SinkSecretKey `json:"bearerToken,omitempty"`
	// Basic is a Secret with the keys username and password.
	// +optional
	Basic *SinkSecretRef `json:"basic,omitempty"`
	// ClientCertificate is a Secret with the keys tls.crt and tls.key (kubernetes.io/tls), the
	// client certificate for mutual TLS.
	// +optional
	ClientCertificate *SinkSecretRef `json:"clientCertificate,omitempty"`
	// CABundle is the PEM bundle the sink's certificate must chain to (default: the system's).
	// +optional
	CABundle *SinkSecretKey `json:"caBundle,omitempty"`
}

// SinkSecretRef names a Secret in the subscription's namespace.
type SinkSecretRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SinkSecretKey names one key of a Secret in the subscription's namespace.
type SinkSecretKey struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// RefSink is a Kubernetes object in the subscription's namespace that has an address.
type RefSink struct {
	// APIVersion of the object: v1 for a Service, eventing.knative.dev/v1 for a Broker.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// Kind of the object: Service, Broker, ...
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// KafkaKeySource says where a Kafka record's key comes from.
type KafkaKeySource string

const (
	// KafkaKeyEventID keys records by the event id.
	KafkaKeyEventID KafkaKeySource = "EventID"
	// KafkaKeyPath keys records by a value of the event (key.path).
	KafkaKeyPath KafkaKeySource = "Path"
	// KafkaKeyNone sends records without a key.
	KafkaKeyNone KafkaKeySource = "None"
)

// KafkaRecordKey is how records are keyed (and so partitioned).
// +kubebuilder:validation:XValidation:rule="(has(self.source) && self.source == 'Path') == has(self.path)",message="spec.delivery.sinks[].kafka.key: path is set with source Path, and only then"
type KafkaRecordKey struct {
	// Source is EventID (default), Path or None.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self in ['EventID', 'Path', 'None']",message="spec.delivery.sinks[].kafka.key.source must be EventID, Path or None"
	// +optional
	Source KafkaKeySource `json:"source,omitempty"`
	// Path is the value the record is keyed by, with source Path: id, type, subject, or data
	// followed by dot-separated fields (data.object.customer).
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^(id|type|subject|data([.][^.]+)+)$')",message="spec.delivery.sinks[].kafka.key.path must be id, type, subject, or data followed by dot-separated fields such as data.object.id"
	// +optional
	Path string `json:"path,omitempty"`
}

// BrokerTLS is TLS towards a broker.
type BrokerTLS struct {
	// CABundle is the PEM bundle the broker's certificate must chain to (default: the
	// system's).
	// +optional
	CABundle *SinkSecretKey `json:"caBundle,omitempty"`
	// ClientCertificate is a Secret with tls.crt and tls.key for mutual TLS.
	// +optional
	ClientCertificate *SinkSecretRef `json:"clientCertificate,omitempty"`
}

// KafkaSASLMechanism is a SASL mechanism.
type KafkaSASLMechanism string

// KafkaSASL authenticates with a user name and password from a Secret.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self in ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512']",message="spec.delivery.sinks[].kafka.sasl.mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
	Mechanism KafkaSASLMechanism `json:"mechanism"`
	// Credentials is a Secret with the keys username and password.
	Credentials SinkSecretRef `json:"credentials"`
}

// KafkaSink produces events to a Kafka topic (acks from all in-sync replicas, idempotent
// producer), each a CloudEvents binary-mode record with the Idempotency-Key as a header.
type KafkaSink struct {
	// BootstrapServers are host:port pairs.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	BootstrapServers []string `json:"bootstrapServers"`
	// Topic the records go to (it must exist).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	Topic string `json:"topic"`
	// Key says how records are keyed (default: the event id).
	// +optional
	Key *KafkaRecordKey `json:"key,omitempty"`
	// TLS, when set, connects over TLS.
	// +optional
	TLS *BrokerTLS `json:"tls,omitempty"`
	// SASL, when set, authenticates.
	// +optional
	SASL *KafkaSASL `json:"sasl,omitempty"`
}

// NATSSink publishes events to a subject a JetStream stream captures.
type NATSSink struct {
	// URLs of the servers (nats://host:4222, tls://host:4222).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	URLs []string `json:"urls"`
	// Subject the events are published to; a stream must capture it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ') && !self.contains('*') && !self.contains('>')",message="spec.delivery.sinks[].nats.subject must be a subject without spaces or wildcards"
	Subject string `json:"subject"`
	// Credentials is a Secret with one of: user.creds (a JWT credentials file), token, or
	// username and password.
	// +optional
	Credentials *SinkSecretRef `json:"credentials,omitempty"`
	// TLS, when set, connects over TLS.
	// +optional
	TLS *BrokerTLS `json:"tls,omitempty"`
}

// AMQPSink publishes events to a RabbitMQ exchange (publisher confirms, mandatory, persistent).
type AMQPSink struct {
	// URL is a Secret key holding the amqp:// or amqps:// URL, credentials included.
	URL SinkSecretKey `json:"url"`
	// Exchange the events are published to ("" is the default exchange).
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Exchange string `json:"exchange,omitempty"`
	// RoutingKey of every event.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	RoutingKey string `json:"routingKey,omitempty"`
	// TLS adds a CA bundle or a client certificate to an amqps:// URL.
	// +optional
	TLS *BrokerTLS `json:"tls,omitempty"`
}

// SigningSecretSpec names the Secret the operator writes the signing secret into.
type SigningSecretSpec struct {
	// Name of the Secret (in this namespace) that the operator owns and writes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// AdoptionPolicy says what to do with an unmarked registration for the desired URL.
// +kubebuilder:validation:Enum=Adopt;Never
type AdoptionPolicy string

const (
	// AdoptionAdopt takes over an unmarked registration whose canonical URL is the desired one.
	AdoptionAdopt AdoptionPolicy = "Adopt"
	// AdoptionNever leaves unmarked registrations alone and stalls with Conflict instead of
	// registering a second hook for the same URL.
	AdoptionNever AdoptionPolicy = "Never"
)

// TwinsPolicy says what to do with extra registrations for the same target.
// +kubebuilder:validation:Enum=Prune;Keep
type TwinsPolicy string

const (
	// TwinsPrune deletes twins, keeping the registration whose secret is held.
	TwinsPrune TwinsPolicy = "Prune"
	// TwinsKeep only reports twins.
	TwinsKeep TwinsPolicy = "Keep"
)

// DeletionPolicy says what happens to the registration when the subscription is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionDelete removes our registrations at the provider.
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionOrphan leaves them in place.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// Policies tune adoption, twin pruning and deletion.
type Policies struct {
	// +kubebuilder:default=Adopt
	// +optional
	Adoption AdoptionPolicy `json:"adoption,omitempty"`
	// +kubebuilder:default=Prune
	// +optional
	Twins TwinsPolicy `json:"twins,omitempty"`
	// +kubebuilder:default=Delete
	// +optional
	Deletion DeletionPolicy `json:"deletion,omitempty"`
}

// The http:// rule asks has() before reading allowInsecureHTTP: omitted when false, a plain
// read of it fails with "no such key" instead of the rule's message.

// WebhookSubscriptionSpec is the desired webhook registration.
// +kubebuilder:validation:XValidation:rule="!has(self.endpoint.url) || !self.endpoint.url.startsWith('http://') || (has(self.endpoint.allowInsecureHTTP) && self.endpoint.allowInsecureHTTP)",message="spec.endpoint.url uses http://; set spec.endpoint.allowInsecureHTTP: true to allow unencrypted deliveries"
// +kubebuilder:validation:XValidation:rule="self.provider.type != 'github' || self.events.all(e, e == '*' || e.matches('^[a-z][a-z0-9_]*$'))",message="spec.events: GitHub names events in lowercase with underscores (push, pull_request), or '*' for all"
type WebhookSubscriptionSpec struct {
	Provider ProviderSpec `json:"provider"`
	Endpoint EndpointSpec `json:"endpoint"`
	// Events to subscribe to, as the provider names them; "*" means every event the provider
	// sends by default (GitHub: all events).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!('*' in self) || size(self) == 1",message="spec.events: '*' already means every event; list it alone"
	// +listType=set
	Events []string `json:"events"`
	// Description shown in the provider's dashboard.
	// +kubebuilder:validation:MaxLength=5000
	// +optional
	Description string `json:"description,omitempty"`
	// Disabled keeps the registration but pauses deliveries at the provider.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// SigningSecret names the Secret the operator writes the signing secret into.
	SigningSecret SigningSecretSpec `json:"signingSecret"`
	// +kubebuilder:default={}
	// +optional
	Policies Policies `json:"policies,omitempty"`
	// ResyncInterval is how often the provider is re-read to repair out-of-band edits.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="spec.resyncInterval must be a duration such as 10m, 30s or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="spec.resyncInterval must be at least 1s"
	// +optional
	ResyncInterval *metav1.Duration `json:"resyncInterval,omitempty"`
	// Suspend stops reconciliation: the registration at the provider is left as it is, and the
	// status says so (Ready True with reason Suspended, observedGeneration caught up), so kstatus
	// reads the object as Current instead of waiting for a reconcile that will not come.
	// Deletion still runs its policy.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// Delivery is read by the bundled receiver: where verified events go.
	// +optional
	Delivery *DeliverySpec `json:"delivery,omitempty"`
	// Recovery gets back the deliveries the provider reports as missed, through the provider
	// (see status.recovery and the hookwarden.io/recover-requested-at annotation).
	// +kubebuilder:default={}
	// +optional
	Recovery RecoverySpec `json:"recovery,omitempty"`
}

// RecoveryMode says when missed deliveries are recovered.
type RecoveryMode string

const (
	// RecoveryAuto recovers when the provider reports failed deliveries to the registration (or,
	// on providers that keep the events themselves, once per resync), and on request.
	RecoveryAuto RecoveryMode = "Auto"
	// RecoveryManual recovers only on request (the hookwarden.io/recover-requested-at annotation).
	RecoveryManual RecoveryMode = "Manual"
	// RecoveryOff never recovers; a request is refused with a message in status.recovery.
	RecoveryOff RecoveryMode = "Off"
)

// RecoverySpec tunes the recovery of missed deliveries. The mode is checked by a CEL rule, not
// an enum, so a wrong value is refused with a message that names the field.
type RecoverySpec struct {
	// Mode is Auto, Manual or Off.
	// +kubebuilder:default=Auto
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self in ['Auto', 'Manual', 'Off']",message="spec.recovery.mode must be Auto, Manual or Off"
	// +optional
	Mode RecoveryMode `json:"mode,omitempty"`
	// Lookback is how far back a run looks when nothing was recovered before (no watermark),
	// and at most. A lookback longer than the provider keeps deliveries is clamped to the
	// provider's window, with a message in status.recovery.lookbackClamped.
	// +kubebuilder:default="72h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="spec.recovery.lookback must be a duration such as 72h, 30m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1m')",message="spec.recovery.lookback must be at least 1m"
	// +optional
	Lookback *metav1.Duration `json:"lookback,omitempty"`
}

// WebhookSubscriptionStatus is the observed state.
type WebhookSubscriptionStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready always (reason Suspended while spec.suspend is true); Reconciling and
	// Stalled while true.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// EndpointID is the provider's id of the registration we keep.
	// +optional
	EndpointID string `json:"endpointID,omitempty"`
	// URL is the canonical URL registered at the provider.
	// +optional
	URL string `json:"url,omitempty"`
	// TwinsPruned counts duplicate registrations deleted over the subscription's life.
	// +optional
	TwinsPruned int32 `json:"twinsPruned,omitempty"`
	// LastSyncTime is when the provider was last read and found matching.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Ping is the outcome of the test delivery requested from the provider after the
	// registration was created (GitHub).
	// +optional
	Ping *PingStatus `json:"ping,omitempty"`
	// LastDelivery is the provider's report of its latest delivery to the registration
	// (GitHub's last_response), as of the last list.
	// +optional
	LastDelivery *DeliveryStatus `json:"lastDelivery,omitempty"`
	// LastHandledReconcileAt is the value of the reconcile.fluxcd.io/requestedAt annotation the
	// manager last acted on (as Flux records it): when it equals the annotation, the requested
	// reconcile, with a fresh list from the provider, has run.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// LastHandledRotateAt is the value of the hookwarden.io/rotate-requested-at annotation the
	// manager last acted on: when it equals the annotation, the requested rotation is done (the
	// provider verifies with the new secret, and the old one is no longer accepted).
	// +optional
	LastHandledRotateAt string `json:"lastHandledRotateAt,omitempty"`
	// Recovery is the state of missed-delivery recovery: how far it got, its last run, totals.
	// +optional
	Recovery *RecoveryStatus `json:"recovery,omitempty"`
	// Manager is how the manager that reconciles the subscription is set up, as far as its
	// decisions depend on it: `hookwarden plan` plans with these, not with a guess.
	// +optional
	Manager *ManagerSettings `json:"manager,omitempty"`
}

// ManagerSettings are the manager's settings its plans depend on.
type ManagerSettings struct {
	// ClusterName is the manager's --cluster-name, the cluster its ownership markers name.
	ClusterName string `json:"clusterName"`
	// ReceiverBaseURL is the manager's --receiver-base-url ("": none).
	// +optional
	ReceiverBaseURL string `json:"receiverBaseURL,omitempty"`
}

// RecoveryTrigger says why a recovery run started.
// +kubebuilder:validation:Enum=Auto;Requested
type RecoveryTrigger string

const (
	// TriggerAuto: the provider reported failed deliveries (or a resync, on providers that keep
	// the events themselves).
	TriggerAuto RecoveryTrigger = "Auto"
	// TriggerRequested: the hookwarden.io/recover-requested-at annotation changed.
	TriggerRequested RecoveryTrigger = "Requested"
)

// RecoveryResult is the outcome of a recovery run.
// +kubebuilder:validation:Enum=Running;Succeeded;Partial;Failed
type RecoveryResult string

const (
	// RecoveryRunning: the run has started and not ended (a manager killed mid-run leaves it;
	// the next run starts again from the watermark).
	RecoveryRunning RecoveryResult = "Running"
	// RecoverySucceeded: everything missed since the run's start point was recovered or
	// reported.
	RecoverySucceeded RecoveryResult = "Succeeded"
	// RecoveryPartial: the run stopped part way (a failed hand-over, a rate limit); the
	// watermark stays at the first event not recovered and the next run goes on from there.
	RecoveryPartial RecoveryResult = "Partial"
	// RecoveryFailed: nothing could be recovered (the receiver unreachable, the provider
	// failing); the watermark did not move.
	RecoveryFailed RecoveryResult = "Failed"
)

// RecoveryStatus is what recovery of missed deliveries has done.
type RecoveryStatus struct {
	// Available is false on providers that offer no way to recover (a REST profile without a
	// recover section); Message says so.
	Available bool `json:"available"`
	// Message explains why recovery is not available, or why a requested run was refused.
	// +optional
	Message string `json:"message,omitempty"`
	// Watermark: every delivery before it was recovered or reported as beyond the provider's
	// window. It moves only past events the receiver has committed (or the provider confirms
	// delivered).
	// +optional
	Watermark *metav1.Time `json:"watermark,omitempty"`
	// Window is how far back the provider keeps what can be recovered (a duration, "72h").
	// +optional
	Window string `json:"window,omitempty"`
	// LookbackClamped says that spec.recovery.lookback is longer than the provider's window and
	// the window is used instead.
	// +optional
	LookbackClamped string `json:"lookbackClamped,omitempty"`
	// LastRun is the latest recovery run.
	// +optional
	LastRun *RecoveryRun `json:"lastRun,omitempty"`
	// Recovered, Skipped and BeyondWindow are totals over the subscription's life: deliveries
	// recovered, found already delivered (the receiver's ledger held them), and missed
	// deliveries beyond the provider's window that cannot come back.
	// +optional
	Recovered int64 `json:"recovered,omitempty"`
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
	// +optional
	BeyondWindow int64 `json:"beyondWindow,omitempty"`
	// Gaps are the latest spans (at most 10, oldest first) in which deliveries may have been
	// missed that no recovery can bring back: before the provider's window, or while the
	// provider had the registration disabled and sent nothing.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Gaps []RecoveryGap `json:"gaps,omitempty"`
	// ProviderDisabledAt is when the manager found the registration disabled by the provider
	// (Stripe, after days of failed deliveries). A provider that disabled an endpoint sends it
	// nothing and does not count it as pending, so until a run succeeds, recovery lists every
	// event since one resync interval before this time, delivered or not, and the receiver's
	// ledger answers those it holds as duplicates.
	// +optional
	ProviderDisabledAt *metav1.Time `json:"providerDisabledAt,omitempty"`
	// LastHandledRequestedAt is the value of the hookwarden.io/recover-requested-at annotation
	// last handled: the requested run has ended (see lastRun), or was refused (see message).
	// +optional
	LastHandledRequestedAt string `json:"lastHandledRequestedAt,omitempty"`
}

// RecoveryGapReason says why the deliveries of a span cannot be recovered.
// +kubebuilder:validation:Enum=BeyondWindow;ProviderDisabled
type RecoveryGapReason string

const (
	// GapBeyondWindow: the span lies before what the provider keeps (its window, or its log).
	GapBeyondWindow RecoveryGapReason = "BeyondWindow"
	// GapProviderDisabled: the provider had the registration disabled and sent nothing; it
	// lists none of the span's events (GitLab), so they cannot be recovered.
	GapProviderDisabled RecoveryGapReason = "ProviderDisabled"
)

// MaxRecoveryGaps is how many gaps status.recovery.gaps keeps.
const MaxRecoveryGaps = 10

// RecoveryGap is a span of possibly missed deliveries that no recovery can bring back.
type RecoveryGap struct {
	// Start and End bound the span [start, end).
	Start metav1.Time `json:"start"`
	End   metav1.Time `json:"end"`
	// Reason: BeyondWindow or ProviderDisabled.
	Reason RecoveryGapReason `json:"reason"`
}

// RecoveryRun is one recovery run.
type RecoveryRun struct {
	Trigger   RecoveryTrigger `json:"trigger"`
	StartTime metav1.Time     `json:"startTime"`
	// +optional
	CompletionTime *metav1.Time   `json:"completionTime,omitempty"`
	Result         RecoveryResult `json:"result"`
	// Recovered deliveries: handed to the receiver and accepted, or redeliveries the provider
	// accepted.
	// +optional
	Recovered int64 `json:"recovered,omitempty"`
	// Skipped deliveries the receiver already held.
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
	// BeyondWindow deliveries missed but past the provider's window.
	// +optional
	BeyondWindow int64 `json:"beyondWindow,omitempty"`
	// Malformed entries of the provider's answer, skipped (a delivery without a guid, an event
	// without an id).
	// +optional
	Malformed int64 `json:"malformed,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// PingResult is the outcome of a ping request.
// +kubebuilder:validation:Enum=Requested;Failed
type PingResult string

const (
	// PingRequested: the provider accepted the request and sends the ping; its delivery shows
	// in status.lastDelivery after the next list.
	PingRequested PingResult = "Requested"
	// PingFailed: the provider refused the ping request (see message).
	PingFailed PingResult = "Failed"
)

// PingStatus records the ping requested after a create.
type PingStatus struct {
	// EndpointID is the registration that was pinged.
	EndpointID string `json:"endpointID"`
	// Time the ping was requested.
	Time metav1.Time `json:"time"`
	// Result of the request.
	Result PingResult `json:"result"`
	// Message explains a failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// DeliveryStatus is the provider's account of its latest delivery to the registration.
type DeliveryStatus struct {
	// Code is the HTTP status the endpoint answered (absent: no answer, or nothing delivered).
	// +optional
	Code int32 `json:"code,omitempty"`
	// Status is the provider's word for it ("active", "unused", ...).
	// +optional
	Status string `json:"status,omitempty"`
	// Message is the provider's message.
	// +optional
	Message string `json:"message,omitempty"`
}

// WebhookSubscription registers one webhook at a provider, exactly once.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=whsub,categories=hookwarden
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider.type`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpointID`
// +kubebuilder:printcolumn:name="Delivering",type=string,JSONPath=`.status.conditions[?(@.type=="Delivering")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type WebhookSubscription struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebhookSubscriptionSpec   `json:"spec,omitempty"`
	Status WebhookSubscriptionStatus `json:"status,omitempty"`
}

// WebhookSubscriptionList contains a list of WebhookSubscription.
// +kubebuilder:object:root=true
type WebhookSubscriptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebhookSubscription `json:"items"`
}
