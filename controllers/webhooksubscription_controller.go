// Package controllers reconciles WebhookSubscriptions against provider accounts.
package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// +kubebuilder:rbac:groups=hookwarden.io,resources=webhooksubscriptions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hookwarden.io,resources=webhooksubscriptions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hookwarden.io,resources=webhooksubscriptions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// DefaultResyncInterval applies when spec.resyncInterval is unset.
const DefaultResyncInterval = 10 * time.Minute

// profileIndex indexes subscriptions by the ConfigMap holding their REST profile, so an edited
// profile re-triggers only the subscriptions that use it.
const profileIndex = ".spec.provider.rest.profileRef.name"

// credentialsIndex indexes subscriptions by the name of their credentials Secret, so a rotated
// or restored credential re-triggers only the subscriptions that use it.
const credentialsIndex = ".spec.provider.credentialsRef.name"

// Reconciler reconciles WebhookSubscriptions.
type Reconciler struct {
	client.Client
	// APIReader reads signing Secrets uncached: a stale read would look like a lost secret.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Accounts  *Accounts
	// ClusterName goes into the ownership marker, so clusters sharing an account never prune
	// each other's registrations.
	ClusterName string
	// ListTTL caps how long one provider list serves the other subscriptions on its account.
	ListTTL time.Duration
	// ReceiverBaseURL is the bundled receiver's public base URL, for spec.endpoint.receiver.
	ReceiverBaseURL string
	// OperationTimeout bounds the provider work of one reconcile, leaving time to write status.
	OperationTimeout time.Duration
	// MaxConcurrentReconciles across accounts (one account is always serialized).
	MaxConcurrentReconciles int
	// AfterCreate, when set, runs after the provider answered a create and before anything is
	// written to the cluster. Tests use it to crash the manager in exactly that window.
	AfterCreate func(ctx context.Context, sub *hookv1.WebhookSubscription, reg providers.Registration) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// credentials (and REST profiles) are read from the API server, once per version of their
	// Secret (ConfigMap).
	credentials *credentials
	// Metrics are the manager's series (subscription readiness here; the provider requests in
	// Accounts); nil: counted, never served.
	Metrics *Metrics
	// RouteSecrets, when set, copies signing material into the receiver's namespace.
	RouteSecrets *RouteSecrets
}

// SetupWithManager registers the controller and its watches.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.ListTTL <= 0 {
		r.ListTTL = 30 * time.Second
	}
	if r.OperationTimeout <= 0 {
		r.OperationTimeout = 2 * time.Minute
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = 4
	}
	if r.Metrics == nil {
		r.Metrics = unregisteredMetrics()
	}
	r.credentials = &credentials{meta: mgr.GetCache(), api: r.APIReader, m: map[credentialKey]credentialEntry{}}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hookv1.WebhookSubscription{}, credentialsIndex, func(o client.Object) []string {
		return []string{o.(*hookv1.WebhookSubscription).Spec.Provider.CredentialsRef.Name}
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hookv1.WebhookSubscription{}, profileIndex, func(o client.Object) []string {
		if rp := o.(*hookv1.WebhookSubscription).Spec.Provider.REST; rp != nil && rp.ProfileRef != nil {
			return []string{rp.ProfileRef.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	// Secrets and ConfigMaps are watched by their metadata only (one informer each, shared by
	// the watches below): the manager never caches their content, and reads what it needs
	// from the API server (see CacheOptions).
	secrets := &metav1.PartialObjectMetadata{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	configMaps := &metav1.PartialObjectMetadata{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return ctrl.NewControllerManagedBy(mgr).
		// Our own status patches must not wake the subscription again: after each wave's list
		// every subscription's lastSyncTime changes, and a reconcile per patch would re-list
		// whenever they outlast the shared list's age, a loop that never settles on a busy
		// machine. Spec changes (generation, which deletion also bumps) and annotations do; a
		// status edited by hand is repaired at the next resync.
		For(&hookv1.WebhookSubscription{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A signing Secret edited or deleted by hand wakes its subscription (owner reference).
		Owns(&corev1.Secret{}, builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// A rotated or restored credential wakes the subscriptions naming it.
		Watches(secrets, handler.EnqueueRequestsFromMapFunc(r.subscriptionsUsing(credentialsIndex)), builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(configMaps, handler.EnqueueRequestsFromMapFunc(r.subscriptionsUsing(profileIndex)), builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("webhooksubscription").
		Complete(r)
}

// subscriptionsUsing maps a Secret or ConfigMap to the subscriptions in its namespace that
// reference it through index.
func (r *Reconciler) subscriptionsUsing(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list hookv1.WebhookSubscriptionList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "listing subscriptions that reference an object", "object", o.GetName(), "index", index)
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, s := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
		return reqs
	}
}

// Reconcile is thin: fetch, finalize, suspend or reconcile, then one status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sub := &hookv1.WebhookSubscription{}
	if err := r.Get(ctx, req.NamespacedName, sub); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sub.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, sub)
	}
	if err := r.ensureFinalizer(ctx, sub); err != nil {
		return ctrl.Result{}, err
	}
	base := sub.DeepCopy()
	var res ctrl.Result
	var err error
	if sub.Spec.Suspend {
		r.suspend(ctx, sub)
	} else {
		res, err = r.reconcileOnce(ctx, sub)
	}
	if perr := r.Status().Patch(ctx, sub, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return res, err
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, sub *hookv1.WebhookSubscription) error {
	if controllerutil.ContainsFinalizer(sub, hookv1.Finalizer) {
		return nil
	}
	patch := client.MergeFrom(sub.DeepCopy())
	controllerutil.AddFinalizer(sub, hookv1.Finalizer)
	return r.Patch(ctx, sub, patch)
}

// reconcileOnce runs one reconcile under the operation deadline and records its outcome. A
// reconcile requested through the annotation (reconcile.fluxcd.io/requestedAt) reads the
// provider afresh instead of reusing the account's shared list.
func (r *Reconciler) reconcileOnce(ctx context.Context, sub *hookv1.WebhookSubscription) (ctrl.Result, error) {
	requested := sub.Annotations[hookv1.AnnotationReconcileRequestedAt]
	if requested == sub.Status.LastHandledReconcileAt {
		requested = ""
	}
	opCtx, cancel := context.WithTimeout(ctx, r.OperationTimeout)
	defer cancel()
	res, err := r.reconcile(opCtx, sub, requested != "")
	if requested != "" {
		sub.Status.LastHandledReconcileAt = requested
	}
	return r.record(ctx, sub, res, err)
}

// suspend leaves the registration alone and says so in a status kstatus reads as Current:
// observedGeneration caught up, Ready True with reason Suspended, no Reconciling or Stalled.
// Ready False would not do: kstatus reads a False Ready as InProgress, and health checks
// (Flux, kubectl wait) would wait for a reconcile that does not come. The message keeps what
// was last known. A suspended subscription has no ready series (its alert would only say it
// was suspended on purpose).
func (r *Reconciler) suspend(ctx context.Context, sub *hookv1.WebhookSubscription) {
	sub.Status.ObservedGeneration = sub.Generation
	msg := "reconciliation is suspended (spec.suspend); the registration at the provider is left as it is"
	if id := sub.Status.EndpointID; id != "" {
		msg += " (last known: " + id + ")"
	} else {
		msg += " (none recorded)"
	}
	prev := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
	if prev == nil || prev.Reason != hookv1.ReasonSuspended {
		if prev != nil {
			msg += "; before: " + prev.Reason + ": " + prev.Message
		}
		log.FromContext(ctx).Info("reconciliation suspended", logSubscription, subscriptionKey(sub), logProvider, string(sub.Spec.Provider.Type), logEndpointID, sub.Status.EndpointID)
	} else {
		msg = prev.Message // unchanged while it stays suspended
	}
	setReady(sub, metav1.ConditionTrue, hookv1.ReasonSuspended, msg)
	meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionReconciling)
	meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionStalled)
	r.Metrics.forget(sub.Namespace, sub.Name)
}

// session is one reconcile of one subscription while it holds its account's lock.
type session struct {
	r       *Reconciler
	sub     *hookv1.WebhookSubscription
	ops     ops
	caps    providers.Capabilities
	desired providers.Desired
	// signing is what the signing Secret holds, kept in step with this session's own writes.
	signing signingState
}

// reconcile observes, plans and acts; fresh skips the account's shared list.
func (r *Reconciler) reconcile(ctx context.Context, sub *hookv1.WebhookSubscription, fresh bool) (ctrl.Result, error) {
	desiredURL, err := validateSpec(&sub.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	ownReceiverURL := r.ownReceiverURL(sub)
	if sub.Spec.Endpoint.Receiver != nil {
		if desiredURL, err = receiverURL(r.ReceiverBaseURL, sub.Namespace, sub.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	acct, err := r.account(ctx, sub)
	if err != nil {
		return ctrl.Result{}, err
	}
	signing, err := r.readSigningState(ctx, sub)
	if err != nil {
		return ctrl.Result{}, err
	}
	o, unlock := acct.Lock()
	defer unlock()

	s := &session{r: r, sub: sub, ops: o, caps: o.Capabilities(), signing: signing, desired: providers.Desired{
		URL:         desiredURL,
		Events:      sub.Spec.Events,
		Description: sub.Spec.Description,
		Disabled:    sub.Spec.Disabled,
		Owner:       r.owner(sub),
	}}
	if err := s.describeVerifier(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var keep providers.Registration
	maxAge := r.maxListAge(sub)
	switch {
	case fresh:
		maxAge = 0
	case steady(sub):
		// A resync of a subscription already in step: any list of this wave serves it, however
		// long the wave has run (thousands of subscriptions on one account outlast maxAge).
		maxAge = max(maxAge, r.sinceWaveStart(sub, o.Epoch()))
	}
	for attempt := 1; ; attempt++ {
		observed, err := o.List(ctx, maxAge)
		if err != nil {
			return ctrl.Result{}, fromList(err)
		}
		p := computePlan(planInput{
			Desired:       s.desired,
			Observed:      observed,
			Caps:          s.caps,
			RecordedID:    sub.Status.EndpointID,
			HeldSecrets:   s.signing.held(),
			PendingSecret: s.signing.pending != nil,
			ReceiverURL:   ownReceiverURL,
			Adoption:      sub.Spec.Policies.Adoption,
			Twins:         sub.Spec.Policies.Twins,
			Keys:          o.URLKeys(),
		})
		keep, err = s.apply(ctx, p)
		if providers.KindOf(err) == providers.AlreadyExists {
			// The provider refused the create because a registration for this target exists
			// that the list did not show us (it changed meanwhile, or the list is partial): read
			// it again and plan once more; a second refusal needs a human.
			o.Invalidate()
			if attempt == 1 {
				continue
			}
			return ctrl.Result{}, stallAtProvider(hookv1.ReasonConflict, "the provider refuses a new registration for %s because one exists, but no registration it lists serves this spec (%v); it may belong to an app or user this credential cannot see", desiredURL, err)
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		break
	}
	sub.Status.URL = desiredURL
	sub.Status.LastDelivery = deliveryStatus(keep.LastDelivery)
	fetched := metav1.NewTime(o.FetchedAt())
	sub.Status.LastSyncTime = &fetched
	return ctrl.Result{RequeueAfter: r.nextResync(sub, o.Epoch())}, nil
}

// apply acts on a plan: create or adopt, update in place, secure the secret, then prune. It
// returns the registration kept.
func (s *session) apply(ctx context.Context, p plan) (providers.Registration, error) {
	sub := s.sub
	if p.Conflict != "" {
		s.r.event(sub, corev1.EventTypeWarning, hookv1.ReasonConflict, "Reconcile", p.Conflict)
		return providers.Registration{}, wait(hookv1.ReasonConflict, resyncInterval(sub), "%s", p.Conflict)
	}
	var keep providers.Registration
	switch {
	case p.Create:
		reg, err := s.create(ctx, s.desired, createKey(sub))
		if err != nil {
			return reg, err
		}
		keep = reg
		s.r.audit(ctx, sub, actionCreate, reg.ID, "no registration at the provider serves this spec")
		s.r.event(sub, corev1.EventTypeNormal, hookv1.ReasonCreated, "Create", "registered %s for %s", reg.ID, reg.URL)
		s.ping(ctx, reg.ID)
	default:
		keep = *p.Keep
		// Recover the secret before fixing drift: the replay must repeat the original create's
		// parameters, which the registration still has until it is updated.
		if p.RecoverSecret {
			reg, fixed, err := s.recoverSecret(ctx, keep)
			if err != nil {
				return keep, err
			}
			switch {
			case fixed:
				p.Drift = nil // the secret was set by an update that also carried the spec
			case reg.ID != keep.ID:
				// Rotated make-before-break: the old registration goes once the new secret is stored.
				// The new one may already have been planned as a twin (an earlier recovery that
				// crashed before storing its secret): it is the keeper now.
				p.Prune = slices.DeleteFunc(p.Prune, func(a pruneAction) bool { return a.Registration.ID == reg.ID })
				p.Prune = append(p.Prune, pruneAction{Registration: keep, Why: pruneRotated})
				p.Drift = drift(s.desired, reg, s.caps)
			}
			keep = reg
		}
		if fields := recreateFields(p.Drift, s.caps); len(fields) > 0 {
			// The provider cannot change these in place: replace the registration, make
			// before break, like a rotation.
			reg, err := s.create(ctx, s.desired, rotateKey(sub, keep.ID))
			if err != nil {
				return keep, err
			}
			p.Prune = append(p.Prune, pruneAction{Registration: keep, Why: pruneRotated})
			s.r.audit(ctx, sub, actionCreate, reg.ID, fmt.Sprintf("replaces %s: the provider cannot change %v in place", keep.ID, fields))
			s.r.event(sub, corev1.EventTypeNormal, hookv1.ReasonUpdated, "Recreate", "replaced %s by %s: the provider cannot change %v in place", keep.ID, reg.ID, fields)
			keep, p.Drift = reg, nil
		}
		if len(p.Drift) > 0 {
			d := s.desired
			d.Secret = string(s.signing.secrets[keep.ID])
			reg, err := s.ops.Update(ctx, keep.ID, d)
			if err != nil {
				return keep, fromProvider("updating registration "+keep.ID, err)
			}
			s.r.audit(ctx, sub, actionUpdate, keep.ID, fmt.Sprintf("drifted from the spec: %v", p.Drift))
			s.r.event(sub, corev1.EventTypeNormal, hookv1.ReasonUpdated, "Update", "updated %s in place: %v", keep.ID, p.Drift)
			keep = reg
		}
	}
	sub.Status.EndpointID = keep.ID
	if keep.ID != s.signing.current && s.caps.Secret != providers.SecretNone {
		if err := s.r.markCurrent(ctx, sub, keep.ID); err != nil {
			return keep, err
		}
		s.signing.current = keep.ID
	}
	if p.Vanished != "" && p.Vanished != keep.ID {
		if err := s.r.forgetSecret(ctx, sub, p.Vanished); err != nil {
			return keep, err
		}
		delete(s.signing.secrets, p.Vanished)
	}
	if err := s.prune(ctx, p.Prune); err != nil {
		return keep, err
	}
	s.r.reportNearTwins(sub, p)
	return keep, nil
}

// create registers a webhook and makes sure its secret is stored whatever goes wrong.
func (s *session) create(ctx context.Context, d providers.Desired, key string) (providers.Registration, error) {
	if s.caps.Secret == providers.SecretClientChosen {
		return s.createWithOwnSecret(ctx, d, key)
	}
	reg, err := s.ops.Create(ctx, d, key)
	if err != nil {
		if reg.ID != "" && reg.Secret != "" {
			// Created, but a follow-up step failed (Stripe: disabling after create): the secret
			// exists only in this response, so keep it before reporting the error.
			if serr := s.storeSecret(ctx, reg.ID, reg.Secret); serr != nil {
				return reg, errors.Join(fromProvider("creating registration", err), serr)
			}
		}
		return reg, fromProvider("creating registration", err)
	}
	if err := s.afterCreate(ctx, reg); err != nil {
		return reg, err
	}
	if s.caps.Secret == providers.SecretNone {
		return reg, nil
	}
	if reg.Secret == "" {
		return reg, fmt.Errorf("provider returned no signing secret for new registration %s", reg.ID)
	}
	return reg, s.storeSecret(ctx, reg.ID, reg.Secret)
}

// createWithOwnSecret creates a registration with a secret we chose. The secret is written to
// the signing Secret (pending) before the provider hears of it, so a crash anywhere leaves at
// most one registration, and the Secret holding the secret it verifies with: after a crash the
// next reconcile finds the registration (adopting it if it cannot be proven ours) and sets the
// pending secret on it, which is then confirmed under its id.
func (s *session) createWithOwnSecret(ctx context.Context, d providers.Desired, key string) (providers.Registration, error) {
	secret, err := s.pendingSecret(ctx)
	if err != nil {
		return providers.Registration{}, err
	}
	d.Secret = secret
	reg, err := s.ops.Create(ctx, d, key)
	if err != nil {
		if providers.KindOf(err) != providers.Transient {
			// The provider refused it: nothing was created with the pending secret.
			if derr := s.dropPending(ctx); derr != nil {
				return reg, errors.Join(fromProvider("creating registration", err), derr)
			}
		}
		return reg, fromProvider("creating registration", err)
	}
	if err := s.afterCreate(ctx, reg); err != nil {
		return reg, err
	}
	return reg, s.confirmPending(ctx, reg.ID, secret)
}

func (s *session) afterCreate(ctx context.Context, reg providers.Registration) error {
	if s.r.AfterCreate == nil {
		return nil
	}
	return s.r.AfterCreate(ctx, s.sub, reg)
}

// recoverSecret gets a signing secret for keep, which we serve but whose secret is not held
// (or, client-chosen, whose pending secret may be set already). fixed reports that the returned
// registration was updated to the whole spec on the way.
//
// Where the client chooses the secret, a new one (or the pending one) is set on keep itself,
// in place: the Secret keeps accepting the old one until the provider confirmed the new.
//
// Where the provider returns the secret on create only, it replays keep's original create (same
// idempotency key, same parameters): within the provider's idempotency window that returns the
// original response, secret included. When the window has passed, the same call creates a new
// registration instead, which is a rotation; when the replay is refused (parameters changed
// since), it rotates explicitly. Either way the new registration's secret is stored before the
// old registration is deleted.
func (s *session) recoverSecret(ctx context.Context, keep providers.Registration) (reg providers.Registration, fixed bool, err error) {
	switch s.caps.Secret {
	case providers.SecretClientChosen:
		reg, err := s.setNewSecret(ctx, keep)
		return reg, err == nil, err
	case providers.SecretReadable, providers.SecretFetched:
		// The provider shows the secret again: read it.
		secret, err := s.ops.FetchSecret(ctx, keep.ID)
		if err != nil {
			return keep, false, fromProvider("reading the signing secret of "+keep.ID, err)
		}
		if err := s.storeSecret(ctx, keep.ID, secret); err != nil {
			return keep, false, err
		}
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRecovered, "RecoverSecret", "read the signing secret of %s back from the provider", keep.ID)
		return keep, false, nil
	}
	if s.caps.ReplayableCreate && keep.CreateKey != "" && keep.Owner == s.desired.Owner {
		original := providers.Desired{URL: keep.URL, Events: keep.Events, Description: keep.Description, Owner: keep.Owner}
		reg, err := s.ops.Create(ctx, original, keep.CreateKey)
		switch {
		case err == nil && reg.Secret != "":
			if err := s.storeSecret(ctx, reg.ID, reg.Secret); err != nil {
				return keep, false, err
			}
			if reg.ID == keep.ID {
				s.ops.Remember(keep) // the replayed body is the original; keep the current view
				s.r.audit(ctx, s.sub, actionRecover, keep.ID, "signing secret not held: replayed the original create (same idempotency key)")
				s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRecovered, "RecoverSecret", "recovered the signing secret of %s by replaying its create", keep.ID)
				return keep, false, nil
			}
			s.r.audit(ctx, s.sub, actionRotate, reg.ID, "signing secret of "+keep.ID+" not held and its create no longer replays: the replay created a new registration")
			s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "RecoverSecret", "signing secret of %s was lost; rotated to %s", keep.ID, reg.ID)
			return reg, false, nil
		case err != nil && providers.KindOf(err) != providers.Permanent:
			return keep, false, fromProvider("recovering the signing secret of "+keep.ID, err)
		}
	}
	reg, err = s.create(ctx, s.desired, rotateKey(s.sub, keep.ID))
	if err != nil {
		return keep, false, err
	}
	s.r.audit(ctx, s.sub, actionRotate, reg.ID, "signing secret of "+keep.ID+" not held: created a replacement, "+keep.ID+" goes once its secret is stored")
	s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "RotateSecret", "signing secret of %s is not held; rotated to %s", keep.ID, reg.ID)
	return reg, false, nil
}

// setNewSecret sets a client-chosen secret on keep in place (same id), with an update that also
// carries the rest of the spec. The secret is pending in the Secret first, so the receiver
// accepts it (beside the old one, if held) from the moment the provider might sign with it.
func (s *session) setNewSecret(ctx context.Context, keep providers.Registration) (providers.Registration, error) {
	wasHeld := s.signing.secrets[keep.ID] != nil
	secret, err := s.pendingSecret(ctx)
	if err != nil {
		return keep, err
	}
	d := s.desired
	d.Secret = secret
	reg, err := s.ops.Update(ctx, keep.ID, d)
	if err != nil {
		return keep, fromProvider("setting a new signing secret on "+keep.ID, err)
	}
	if err := s.confirmPending(ctx, keep.ID, secret); err != nil {
		return reg, err
	}
	why := "the signing secret was not held: set a new one in place"
	if wasHeld {
		why = "finished setting the pending signing secret"
	}
	s.r.audit(ctx, s.sub, actionSetSecret, keep.ID, why)
	if wasHeld {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "SetSecret", "finished setting the pending signing secret on %s", keep.ID)
	} else {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "SetSecret", "the signing secret of %s was not held; set a new one on it in place", keep.ID)
	}
	return reg, nil
}

// recreateFields are the drifted fields the provider can only change by a new registration.
func recreateFields(drift []string, caps providers.Capabilities) []string {
	byName := map[string]providers.Field{"url": providers.FieldURL, "events": providers.FieldEvents, "description": providers.FieldDescription, "disabled": providers.FieldDisabled, "ownership marker": providers.FieldMarker}
	var out []string
	for _, d := range drift {
		if f, ok := byName[d]; ok && caps.Recreate&f != 0 {
			out = append(out, d)
		}
	}
	return out
}

// ping asks the provider for a test delivery to a new registration and records the outcome in
// status; a failed ping leaves the registration as it is.
func (s *session) ping(ctx context.Context, id string) {
	ok, err := s.ops.Ping(ctx, id)
	if !ok {
		return
	}
	ps := &hookv1.PingStatus{EndpointID: id, Time: metav1.NewTime(s.r.Now()), Result: hookv1.PingRequested}
	if err != nil {
		ps.Result, ps.Message = hookv1.PingFailed, err.Error()
		s.r.event(s.sub, corev1.EventTypeWarning, hookv1.ReasonPinged, "Ping", "the provider refused to ping %s: %v", id, err)
	} else {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonPinged, "Ping", "asked the provider to ping %s", id)
	}
	s.sub.Status.Ping = ps
}

const pruneRotated pruneReason = "rotated"

// prune deletes twins and stale or rotated registrations. Events are aggregated per reason:
// the events API folds events that differ only in their note into one series.
func (s *session) prune(ctx context.Context, actions []pruneAction) error {
	deleted := map[pruneReason][]providers.Registration{}
	defer func() {
		if twins := deleted[pruneTwin]; len(twins) > 0 {
			s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonTwinsPruned, "Prune", "deleted %d twin registration(s): %s", len(twins), registrationIDs(twins))
		}
		var other []providers.Registration
		other = append(other, deleted[pruneStale]...)
		other = append(other, deleted[pruneRotated]...)
		if len(other) > 0 {
			s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonDeleted, "Prune", "deleted replaced registration(s): %s", registrationIDs(other))
		}
	}()
	for _, a := range actions {
		if err := s.ops.Delete(ctx, a.Registration.ID); err != nil {
			return fromProvider("deleting "+string(a.Why)+" registration "+a.Registration.ID, err)
		}
		deleted[a.Why] = append(deleted[a.Why], a.Registration)
		s.r.audit(ctx, s.sub, actionPrune, a.Registration.ID, pruneWhy(a.Why, s.sub.Status.EndpointID))
		if a.Why == pruneTwin {
			s.sub.Status.TwinsPruned++
		}
		if err := s.r.forgetSecret(ctx, s.sub, a.Registration.ID); err != nil {
			return err
		}
		delete(s.signing.secrets, a.Registration.ID)
	}
	return nil
}

// pruneWhy says, for the audit log, why a registration was deleted beside the kept one.
func pruneWhy(why pruneReason, kept string) string {
	switch why {
	case pruneTwin:
		return "twin of " + kept + " (same canonical URL)"
	case pruneStale:
		return "stale: ours, for a URL the spec no longer names"
	case pruneRotated:
		return "replaced by " + kept
	}
	return string(why)
}

func (r *Reconciler) reportNearTwins(sub *hookv1.WebhookSubscription, p plan) {
	var parts []string
	if len(p.NearTwins) > 0 {
		parts = append(parts, "foreign registrations that differ only by a trailing slash or scheme, left untouched: "+registrationIDs(p.NearTwins))
	}
	if len(p.Unproven) > 0 {
		parts = append(parts, "registrations for this URL that cannot be proven ours (the provider stores no marker), left untouched: "+registrationIDs(p.Unproven))
	}
	if len(p.KeptTwins) > 0 {
		parts = append(parts, "twins kept by policies.twins=Keep: "+registrationIDs(p.KeptTwins))
	}
	if len(parts) == 0 {
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionTwinsFound)
		return
	}
	msg := strings.Join(parts, "; ")
	if c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionTwinsFound); c == nil || c.Message != msg {
		r.event(sub, corev1.EventTypeWarning, hookv1.ReasonNearTwinFound, "Reconcile", "%s", msg)
	}
	meta.SetStatusCondition(&sub.Status.Conditions, metav1.Condition{
		Type: hookv1.ConditionTwinsFound, Status: metav1.ConditionTrue, Reason: hookv1.ReasonNearTwinFound, Message: msg, ObservedGeneration: sub.Generation,
	})
}

// ownReceiverURL is the bundled receiver's URL for sub ("" without --receiver-base-url),
// whatever its spec.endpoint says: on providers without markers, a registration for it is ours
// (it may be left from when the spec named the receiver).
func (r *Reconciler) ownReceiverURL(sub *hookv1.WebhookSubscription) string {
	if r.ReceiverBaseURL == "" {
		return ""
	}
	u, err := receiverURL(r.ReceiverBaseURL, sub.Namespace, sub.Name)
	if err != nil {
		return ""
	}
	return u
}

func deliveryStatus(d *providers.DeliveryReport) *hookv1.DeliveryStatus {
	if d == nil {
		return nil
	}
	return &hookv1.DeliveryStatus{Code: int32(d.Code), Status: d.Status, Message: d.Message}
}

func (r *Reconciler) owner(sub *hookv1.WebhookSubscription) providers.Owner {
	return providers.Owner{Cluster: r.ClusterName, Namespace: sub.Namespace, Name: sub.Name, UID: string(sub.UID)}
}

// createKey is deterministic for one generation, so a crash between the provider's answer and
// the status write replays the same create. It also names the registration that was recorded
// before: when that registration vanishes at the provider, the next create gets a new key
// instead of a replay of the vanished one.
func createKey(sub *hookv1.WebhookSubscription) string {
	k := fmt.Sprintf("hookwarden-create-%s-g%d", sub.UID, sub.Generation)
	if sub.Status.EndpointID != "" {
		k += "-after-" + shortID(sub.Status.EndpointID)
	}
	return k
}

// rotateKey is deterministic per replaced registration and generation, so a crash mid-rotation
// replays it, and a spec edit after such a crash does not replay it with other parameters.
func rotateKey(sub *hookv1.WebhookSubscription, old string) string {
	return fmt.Sprintf("hookwarden-rotate-%s-g%d-%s", sub.UID, sub.Generation, shortID(old))
}

// shortID keeps idempotency keys under Stripe's 255 characters whatever the id length.
func shortID(id string) string {
	if len(id) <= 64 {
		return id
	}
	h := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(h[:16])
}

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

func (r *Reconciler) event(sub *hookv1.WebhookSubscription, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sub, nil, typ, reason, action, note, args...)
	}
}
