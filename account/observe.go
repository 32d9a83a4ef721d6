package account

import (
	"cmp"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// Observer reaches a subscription's provider account and reads from the cluster what planning
// for it needs. The manager's reconcile and the command line's plan and import all observe
// through it, so a preview plans from what a reconcile would plan from.
type Observer struct {
	Accounts *Accounts
	// Credentials reads the credentials Secrets and settings ConfigMaps subscriptions name.
	Credentials *Credentials
	// API reads uncached: the signing Secret (Preview) and the subscription, to confirm a
	// rotation request (nil: the subscription as given is trusted).
	API client.Reader
	// ClusterName goes into the ownership marker, so clusters sharing an account never prune
	// each other's registrations.
	ClusterName string
	// ReceiverBaseURL is the bundled receiver's public base URL ("" when not known).
	ReceiverBaseURL string
}

// NewObserver is an Observer that reads credentials and settings from the API server (no
// manager's cache): the command line's.
func NewObserver(api client.Reader, accts *Accounts, clusterName, receiverBaseURL string) *Observer {
	return &Observer{Accounts: accts, API: api, ClusterName: clusterName, ReceiverBaseURL: receiverBaseURL,
		Credentials: &Credentials{API: api, Entries: map[CredentialKey]CredentialEntry{}}}
}

// Observation is what a round plans from before the list: the spec checked and the account it
// names reached.
type Observation struct {
	Account *Account
	// Desired is the registration the spec asks for (Desired.URL is the URL to register).
	Desired providers.Desired
	// OwnReceiverURL is sub's bundled-receiver URL on this manager ("" unknown).
	OwnReceiverURL string
}

// Observe checks sub's spec and reaches the account its provider block names: the one prologue
// of a reconcile and of a preview.
func (o *Observer) Observe(ctx context.Context, sub *hookv1.WebhookSubscription) (Observation, error) {
	desiredURL, _, err := decide.ValidateSpec(&sub.Spec, o.Accounts.Registry())
	if err != nil {
		return Observation{}, err
	}
	ob := Observation{OwnReceiverURL: o.ReceiverURL(sub)}
	if sub.Spec.Endpoint.Receiver != nil {
		if desiredURL, err = decide.ReceiverURL(o.ReceiverBaseURL, sub.Namespace, sub.Name); err != nil {
			return Observation{}, err
		}
	}
	if ob.Account, err = o.Reach(ctx, sub); err != nil {
		return Observation{}, err
	}
	ob.Desired = providers.Desired{
		URL:         desiredURL,
		Events:      sub.Spec.Events,
		Description: sub.Spec.Description,
		Disabled:    sub.Spec.Disabled,
		Owner:       o.Owner(sub),
	}
	return ob, nil
}

// Owner is the ownership marker of sub's registration.
func (o *Observer) Owner(sub *hookv1.WebhookSubscription) providers.Owner {
	return providers.Owner{Cluster: o.ClusterName, Namespace: sub.Namespace, Name: sub.Name, UID: string(sub.UID)}
}

// ReceiverURL is the bundled receiver's URL for sub ("" without the manager's
// --receiver-base-url), whatever its spec.endpoint says: on providers without markers, a
// registration for it is ours (it may be left from when the spec named the receiver).
func (o *Observer) ReceiverURL(sub *hookv1.WebhookSubscription) string {
	if o.ReceiverBaseURL == "" {
		return ""
	}
	u, err := decide.ReceiverURL(o.ReceiverBaseURL, sub.Namespace, sub.Name)
	if err != nil {
		return ""
	}
	return u
}

// Reach returns the provider account sub talks to: what its provider block names (scope),
// with its credential and settings.
func (o *Observer) Reach(ctx context.Context, sub *hookv1.WebhookSubscription) (*Account, error) {
	scope, err := decide.ProviderScope(&sub.Spec.Provider, sub.Spec.Events, o.Accounts.Registry())
	if err != nil {
		return nil, err
	}
	cred, err := o.credential(ctx, sub, scope)
	if err != nil {
		return nil, err
	}
	settings, err := o.settings(ctx, sub, scope)
	if err != nil {
		return nil, err
	}
	acct, err := o.Accounts.For(SubscriptionKey(sub), AccountKey{Provider: string(sub.Spec.Provider.Type), APIURL: sub.Spec.Provider.APIURL, Target: scope.Target, Settings: settings, Credential: cred})
	if err != nil {
		return nil, decide.NewStall(hookv1.ReasonInvalidSpec, "spec.provider: %v", err)
	}
	return acct, nil
}

// credential reads the provider API key named by spec.provider.credentialsRef; without a key,
// the one scope's target takes, else the provider's.
func (o *Observer) credential(ctx context.Context, sub *hookv1.WebhookSubscription, scope providers.Scope) (string, error) {
	ref := sub.Spec.Provider.CredentialsRef
	key := cmp.Or(ref.Key, scope.CredentialKey, o.Accounts.Registry()[string(sub.Spec.Provider.Type)].CredentialKey)
	// From the API server (the manager watches Secrets by their metadata only), once per
	// version of the Secret.
	v, err := o.Credentials.Read(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: ref.Name}, key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", &decide.StallError{Reason: hookv1.ReasonCredentialsNotFound, Msg: fmt.Sprintf("credentials Secret %s/%s not found (spec.provider.credentialsRef)", sub.Namespace, ref.Name)}
		}
		return "", fmt.Errorf("reading credentials Secret %s: %w", ref.Name, err)
	}
	if v == "" {
		return "", &decide.StallError{Reason: hookv1.ReasonCredentialsNotFound, Msg: fmt.Sprintf("credentials Secret %s/%s has no key %q (spec.provider.credentialsRef.key)", sub.Namespace, ref.Name, key)}
	}
	return v, nil
}

// settings are the provider-specific settings of the subscription (providers.Config.Settings):
// given in the spec, or read from the ConfigMap its block names (from the API server, once per
// version of the ConfigMap: the manager watches ConfigMaps' metadata only, so ones it does not
// use cost it no memory).
func (o *Observer) settings(ctx context.Context, sub *hookv1.WebhookSubscription, scope providers.Scope) ([]byte, error) {
	ref := scope.SettingsRef
	if ref == nil {
		return scope.Settings, nil
	}
	v, found, err := o.Credentials.Profile(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: ref.Name}, ref.Key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, decide.NewStall(hookv1.ReasonInvalidSpec, "%s: ConfigMap %s/%s not found", ref.Field, sub.Namespace, ref.Name)
		}
		return nil, fmt.Errorf("reading the ConfigMap %s (%s): %w", ref.Name, ref.Field, err)
	}
	if found {
		return v, nil
	}
	return nil, decide.NewStall(hookv1.ReasonInvalidSpec, "%s: ConfigMap %s/%s has no key %q", ref.Field, sub.Namespace, ref.Name, ref.Key)
}

// rotateRequest is the value of the rotate annotation when it asks for a rotation not yet
// handled ("" otherwise).
func rotateRequest(sub *hookv1.WebhookSubscription) string {
	v := sub.Annotations[hookv1.AnnotationRotateRequestedAt]
	if v == sub.Status.LastHandledRotateAt {
		return ""
	}
	return v
}

// PendingRotation is the rotation request of sub not yet handled ("" for none), confirmed
// against the API server: a cached object may predate the status write that recorded the
// rotation as handled, and a second rotation would replace a registration that was just made
// (a new Stripe endpoint, twice). A preview may be of a manifest not in the cluster yet
// (preview): no status of it can have recorded the request handled.
func (o *Observer) PendingRotation(ctx context.Context, sub *hookv1.WebhookSubscription, preview bool) (string, error) {
	rotate := rotateRequest(sub)
	if rotate == "" || o.API == nil {
		return rotate, nil
	}
	live := &hookv1.WebhookSubscription{}
	if err := o.API.Get(ctx, client.ObjectKeyFromObject(sub), live); err != nil {
		if preview && apierrors.IsNotFound(err) {
			return rotate, nil
		}
		return "", fmt.Errorf("reading the subscription to confirm a rotation request: %w", err)
	}
	if live.Status.LastHandledRotateAt == rotate {
		sub.Status.LastHandledRotateAt = rotate
		return "", nil
	}
	return rotate, nil
}

// List lists the account's registrations (a cached list up to maxAge old), a failure
// classified: the one list of a reconcile's rounds, the preview and import.
func List(ctx context.Context, o Ops, maxAge time.Duration) ([]providers.Registration, error) {
	regs, err := o.List(ctx, maxAge)
	if err != nil {
		return nil, decide.FromList(err)
	}
	return regs, nil
}

// Planned is one subscription as a round plans it, besides the list: what its spec asks for,
// what its signing Secret holds, and whether a rotation waits.
type Planned struct {
	Sub            *hookv1.WebhookSubscription
	Desired        providers.Desired
	Signing        SigningState
	OwnReceiverURL string
	// Rotate: a rotation of the signing secret was requested and not yet handled.
	Rotate bool
}

// Input is what p plans from in one round on account o, which listed observed.
func (p Planned) Input(o Ops, observed []providers.Registration, rs decide.Rounds) decide.PlanInput {
	sub := p.Sub
	return decide.PlanInput{
		Desired:         p.Desired,
		Generation:      sub.Generation,
		SpecEdited:      sub.Generation != sub.Status.ObservedGeneration,
		Observed:        observed,
		Caps:            o.Capabilities(),
		CanPing:         o.CanPing(),
		RecordedID:      sub.Status.EndpointID,
		RecordedURL:     sub.Status.URL,
		HeldSecrets:     p.Signing.Held(),
		CurrentID:       p.Signing.Current,
		PendingSecret:   p.Signing.Pending != nil,
		ReceiverURL:     p.OwnReceiverURL,
		Adoption:        sub.Spec.Policies.Adoption,
		Twins:           sub.Spec.Policies.Twins,
		Rounds:          rs,
		RotateRequested: p.Rotate && !rs.Rotated,
		Keys:            o.URLKeys(),
	}
}

// SubscriptionKey is sub's namespace/name.
func SubscriptionKey(sub *hookv1.WebhookSubscription) string { return sub.Namespace + "/" + sub.Name }
