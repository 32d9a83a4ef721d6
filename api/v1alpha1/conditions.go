package v1alpha1

// ConditionType is the type of a status condition. The set follows kstatus, so `kubectl wait`,
// Flux and Argo CD read health without knowing this API: Ready is always present, Reconciling
// and Stalled only while they are true.
type ConditionType = string

const (
	// ConditionReady is True when the provider holds exactly the registration the spec asks for
	// and its signing secret is stored.
	ConditionReady ConditionType = "Ready"
	// ConditionReconciling is present (True) while work is in progress or a retry is pending.
	ConditionReconciling ConditionType = "Reconciling"
	// ConditionStalled is present (True) when progress needs a human: bad spec, rejected request.
	ConditionStalled ConditionType = "Stalled"
	// ConditionTwinsFound is present (True) while registrations that resemble this one are left
	// in place: foreign near-twins, or twins kept by policies.twins=Keep.
	ConditionTwinsFound ConditionType = "TwinsFound"
	// ConditionReadOnlyDrift is present (True) while a field of the kept registration that the
	// provider's API cannot change differs from the spec (a GitHub App's events, set in the
	// App's settings only): reported, never repaired; the spec or the provider's settings are
	// the user's to align. Like TwinsFound, it never changes what Ready means.
	ConditionReadOnlyDrift ConditionType = "ReadOnlyDrift"
	// ConditionDelivering is the provider's view of deliveries to the kept registration: True
	// (Healthy), False (Failing, DisabledByProvider) or Unknown. It never changes what Ready,
	// Reconciling and Stalled mean, so kstatus reads the object as before.
	ConditionDelivering ConditionType = "Delivering"
	// ConditionSinksReady is True when the manager has prepared what the receiver needs for
	// every sink (credentials copied, ref sinks resolved, filters compiling), False with each
	// misconfigured sink named (its events wait at the receiver; the other sinks go on), and
	// absent without a spec.delivery.sinks list. Like Delivering, it never changes what Ready means.
	ConditionSinksReady ConditionType = "SinksReady"
)

// ReasonSinkMisconfigured: a sink's Secret or key is missing, its filter does not compile, or
// its addressable has no address.
const ReasonSinkMisconfigured Reason = "SinkMisconfigured"

// Reasons of the Delivering condition.
const (
	// ReasonHealthy: the provider reports recent deliveries succeeding.
	ReasonHealthy Reason = "Healthy"
	// ReasonFailing: the provider reports recent deliveries failing.
	ReasonFailing Reason = "Failing"
	// ReasonDisabledByProvider: the provider stopped delivering because deliveries kept failing.
	ReasonDisabledByProvider Reason = "DisabledByProvider"
	// ReasonUnknown: the provider reports nothing about deliveries (none yet, or no such report).
	ReasonUnknown Reason = "Unknown"
)

// Reasons of the Events a recovery run records.
const (
	ReasonRecoveryCompleted Reason = "RecoveryCompleted"
	ReasonRecoveryFailed    Reason = "RecoveryFailed"
	// ReasonBeyondRecoveryWindow: missed deliveries lie beyond what the provider keeps.
	ReasonBeyondRecoveryWindow Reason = "BeyondRecoveryWindow"
	// ReasonReenabled: the provider had disabled the registration; it was enabled again.
	ReasonReenabled Reason = "Reenabled"
	// ReasonProviderDisabledGap: the provider had the registration disabled for a span and sent
	// nothing meanwhile; it lists none of those events, so they cannot come back.
	ReasonProviderDisabledGap Reason = "ProviderDisabledGap"
)

// Reason is the machine-readable reason of a condition or an Event.
type Reason = string

const (
	ReasonSucceeded            Reason = "Succeeded"
	ReasonProgressing          Reason = "Progressing"
	ReasonRateLimited          Reason = "RateLimited"
	ReasonCredentialsNotFound  Reason = "CredentialsNotFound"
	ReasonProviderUnavailable  Reason = "ProviderUnavailable"
	ReasonUnauthorized         Reason = "Unauthorized"
	ReasonInvalidSpec          Reason = "InvalidSpec"
	ReasonProviderRejected     Reason = "ProviderRejected"
	ReasonQuotaExceeded        Reason = "QuotaExceeded"
	ReasonConflict             Reason = "Conflict"
	ReasonTwinsPruned          Reason = "TwinsPruned"
	ReasonNearTwinFound        Reason = "NearTwinFound"
	ReasonReadOnlyFieldDiffers Reason = "ReadOnlyFieldDiffers"
	ReasonSecretRecovered      Reason = "SecretRecovered"
	ReasonSecretRotated        Reason = "SecretRotated"
	ReasonCreated              Reason = "Created"
	// ReasonAdopted: an Event when a registration not proven this subscription's (no marker of
	// it, not recorded, its secret not held) is taken under policies.adoption Adopt.
	ReasonAdopted         Reason = "Adopted"
	ReasonUpdated         Reason = "Updated"
	ReasonDeleted         Reason = "Deleted"
	ReasonOrphaned        Reason = "Orphaned"
	ReasonDeletionBlocked Reason = "DeletionBlocked"
	ReasonSuspended       Reason = "Suspended"
	// ReasonTargetNotFound: the provider says the list target (a GitHub repository or
	// organization) does not exist, or the credential may not administer its hooks.
	ReasonTargetNotFound Reason = "TargetNotFound"
	// ReasonPinged: the manager asked the provider for a test delivery after a create.
	ReasonPinged Reason = "Pinged"
	// ReasonUnfitRegistration: a registration the provider lists does not fit the shape the
	// provider's client reads (a GitLab hook with a null flag where a boolean belongs, a
	// GitHub hook without config.url): Stalled when it is this subscription's own (it cannot
	// be compared with the spec, so nothing is changed), an Event when it is foreign.
	ReasonUnfitRegistration Reason = "UnfitRegistration"
	// ReasonOwnedByAnother: the registration serving the spec belongs to another subscription
	// of this cluster (its status records it, or it claimed it first): Stalled, naming it, until
	// one of the two is deleted or changed.
	ReasonOwnedByAnother Reason = "OwnedByAnother"
)

// Well-known names shared by the manager and the receiver.
const (
	// Finalizer guards deletion so registrations are removed (or orphaned) by policy.
	Finalizer = "hookwarden.io/finalizer"
	// LabelSigningSecret marks the Secrets the operator writes; the receiver watches only these.
	LabelSigningSecret = "hookwarden.io/signing-secret"
	// LabelSubscription names the subscription a signing Secret belongs to.
	LabelSubscription = "hookwarden.io/subscription"
	// AnnotationEndpointID records the registration whose secret is current in a signing Secret.
	AnnotationEndpointID = "hookwarden.io/endpoint-id"
	// SecretKeyCurrent holds the current signing secret in a signing Secret.
	SecretKeyCurrent = "signingSecret"
	// SecretKeyPrefix prefixes one key per live registration ("whsec.<endpointID>"; SecretKeyFor), so every
	// secret that may still sign deliveries stays readable during a rotation.
	SecretKeyPrefix = "whsec."
	// SecretKeyPending holds a client-chosen secret (GitHub) written before the provider is asked
	// to use it: before a create, or before it is set on an existing registration. The receiver
	// accepts it like the others, so deliveries signed with it verify from the first one; the
	// manager moves it under the registration's id once the provider confirmed it.
	SecretKeyPending = "pendingSecret"
	// AnnotationReconcileRequestedAt asks for a reconcile now, with a fresh list from the
	// provider, whenever its value changes (any string; a timestamp by convention). It is Flux's
	// name, so `flux`-style tooling and the habit `kubectl annotate --overwrite ...
	// reconcile.fluxcd.io/requestedAt="$(date +%s)"` work unchanged; the value handled last is
	// status.lastHandledReconcileAt.
	AnnotationReconcileRequestedAt = "reconcile.fluxcd.io/requestedAt"
	// AnnotationRecoverRequestedAt asks for a recovery run now whenever its value changes (any
	// string; a timestamp by convention: `kubectl annotate --overwrite whsub NAME
	// hookwarden.io/recover-requested-at="$(date +%s)"`), in mode Auto and Manual; mode Off
	// refuses it with a message in status.recovery.message. The value handled last is
	// status.recovery.lastHandledRequestedAt, set once the run ended (or was refused).
	AnnotationRecoverRequestedAt = "hookwarden.io/recover-requested-at"
	// SecretKeyVerifier holds, for providers whose verification scheme is described rather than
	// known by type (REST profiles), that description (JSON), so the receiver reads no ConfigMap.
	SecretKeyVerifier = "verifier.json"
	// AnnotationRotateRequestedAt asks for a rotation of the signing secret, make-before-break,
	// whenever its value changes (a timestamp by convention; `hookwarden rotate` sets it); the
	// value handled last is status.lastHandledRotateAt.
	AnnotationRotateRequestedAt = "hookwarden.io/rotate-requested-at"
	// AnnotationImportedFrom, on a subscription `hookwarden import` wrote, names the registration
	// it was imported from (informational).
	AnnotationImportedFrom = "hookwarden.io/imported-from"
	// AnnotationImportedFor, on a signing Secret that `hookwarden import --secret` wrote before
	// its subscription existed, names that subscription: the manager takes such a Secret (one
	// with no controller) as the subscription's own, and sets itself as its controller at its
	// first write.
	AnnotationImportedFor = "hookwarden.io/imported-for"
	// AnnotationImportedSecret, on a subscription `hookwarden import --secret` wrote, names the
	// signing Secret written beside it: until it exists (applied in the same `kubectl apply`, it
	// may come a moment later) the manager waits, a short documented time, before it gets the
	// registration a new secret.
	AnnotationImportedSecret = "hookwarden.io/imported-secret"
)
