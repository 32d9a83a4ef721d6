package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/eventfilter"
	"github.com/hookwarden/hookwarden/internal/routesecret"
)

// The manager prepares what the receiver needs to deliver to each sink and cannot read
// itself (it reads Secrets in its own namespace only and nothing else of the cluster): the
// credentials named in the sink's spec, copied from the user's Secrets, and the URL of a ref
// sink, resolved from the addressable. Both travel in the route Secret under
// routesecret.SinkKey, beside the signing material, and follow a rotated Secret (a watch on
// the Secrets sinks name) or a moved addressable (resolved again at every reconcile). What it
// cannot prepare (a Secret or key that is missing, a filter that does not compile, an
// addressable without an address) is said in the SinksReady condition, sink by sink; the
// registration and the other sinks go on, and the receiver holds that sink's events until it
// is fixed.

// Secret keys of a sink's credentials, as the API documents them.
const (
	sinkKeyUsername = "username"
	sinkKeyPassword = "password"
	sinkKeyToken    = "token"
	sinkKeyCreds    = "user.creds"
)

// sinkSecretNames is every Secret name the sinks of sub read (the index the Secret watch maps
// through).
func sinkSecretNames(sub *hookv1.WebhookSubscription) []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	tls := func(t *hookv1.BrokerTLS) {
		if t == nil {
			return
		}
		if t.CABundle != nil {
			add(t.CABundle.Name)
		}
		if t.ClientCertificate != nil {
			add(t.ClientCertificate.Name)
		}
	}
	for _, s := range sub.Spec.Delivery.EffectiveSinks() {
		switch {
		case s.HTTP != nil && s.HTTP.Auth != nil:
			a := s.HTTP.Auth
			if a.BearerToken != nil {
				add(a.BearerToken.Name)
			}
			if a.Basic != nil {
				add(a.Basic.Name)
			}
			if a.ClientCertificate != nil {
				add(a.ClientCertificate.Name)
			}
			if a.CABundle != nil {
				add(a.CABundle.Name)
			}
		case s.NATS != nil:
			if s.NATS.Credentials != nil {
				add(s.NATS.Credentials.Name)
			}
			tls(s.NATS.TLS)
		case s.AMQP != nil:
			add(s.AMQP.URL.Name)
			tls(s.AMQP.TLS)
		case s.Kafka != nil:
			if s.Kafka.SASL != nil {
				add(s.Kafka.SASL.Credentials.Name)
			}
			tls(s.Kafka.TLS)
		}
	}
	return names
}

// sinkMaterial is what the manager prepared for a subscription's sinks: the route Secret's
// sink keys, and the problems of the sinks it could not prepare ("sink NAME: ...").
type sinkMaterial struct {
	data     map[string][]byte
	problems []string
}

// sinkGatherer reads what one sink needs.
type sinkGatherer struct {
	r    *Reconciler
	ctx  context.Context
	sub  *hookv1.WebhookSubscription
	name string
	out  *sinkMaterial
	errs []string
}

func (g *sinkGatherer) problem(format string, args ...any) {
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
}

// copyKey copies key of Secret name into the route Secret as field; required says whether
// its absence is a problem.
func (g *sinkGatherer) copyKey(name, key, field string, required bool) bool {
	v, found, err := g.r.credentials.SecretKey(g.ctx, types.NamespacedName{Namespace: g.sub.Namespace, Name: name}, key)
	switch {
	case apierrors.IsNotFound(err):
		g.problem("Secret %s/%s not found", g.sub.Namespace, name)
		return false
	case err != nil:
		g.problem("reading Secret %s/%s: %v", g.sub.Namespace, name, err)
		return false
	case !found || len(v) == 0:
		if required {
			g.problem("Secret %s/%s has no key %q", g.sub.Namespace, name, key)
		}
		return false
	}
	g.out.data[routesecret.SinkKey(g.name, field)] = v
	return true
}

func (g *sinkGatherer) tls(t *hookv1.BrokerTLS) {
	if t == nil {
		return
	}
	if t.CABundle != nil {
		g.copyKey(t.CABundle.Name, t.CABundle.Key, routesecret.SinkFieldCA, true)
	}
	if c := t.ClientCertificate; c != nil {
		g.copyKey(c.Name, corev1.TLSCertKey, routesecret.SinkFieldCert, true)
		g.copyKey(c.Name, corev1.TLSPrivateKeyKey, routesecret.SinkFieldKey, true)
	}
}

func (g *sinkGatherer) http(a *hookv1.HTTPAuth) {
	if a == nil {
		return
	}
	if a.BearerToken != nil {
		g.copyKey(a.BearerToken.Name, a.BearerToken.Key, routesecret.SinkFieldBearerToken, true)
	}
	if a.Basic != nil {
		g.copyKey(a.Basic.Name, sinkKeyUsername, routesecret.SinkFieldUsername, true)
		g.copyKey(a.Basic.Name, sinkKeyPassword, routesecret.SinkFieldPassword, true)
	}
	g.tls(&hookv1.BrokerTLS{CABundle: a.CABundle, ClientCertificate: a.ClientCertificate})
}

// nats copies the first of the sink's credentials its Secret holds, in the receiver's order
// (user.creds, token, username and password), and its TLS material.
func (g *sinkGatherer) nats(n *hookv1.NATSSink) {
	if c := n.Credentials; c != nil {
		before := len(g.errs)
		switch {
		case g.copyKey(c.Name, sinkKeyCreds, routesecret.SinkFieldCreds, false):
		case len(g.errs) > before:
			// The Secret is missing or unreadable: said once.
		case g.copyKey(c.Name, sinkKeyToken, routesecret.SinkFieldToken, false):
		case g.copyKey(c.Name, sinkKeyUsername, routesecret.SinkFieldUsername, false):
			g.copyKey(c.Name, sinkKeyPassword, routesecret.SinkFieldPassword, true)
		default:
			g.problem("Secret %s/%s has none of the keys %s, %s, or %s and %s", g.sub.Namespace, c.Name, sinkKeyCreds, sinkKeyToken, sinkKeyUsername, sinkKeyPassword)
		}
	}
	g.tls(n.TLS)
}

// ref resolves an addressable to its URL: a Service to its cluster DNS name (its first port
// unless 80), anything else to status.address.url, as Knative's addressables publish it.
func (g *sinkGatherer) ref(ref *hookv1.RefSink) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		g.problem("ref apiVersion %q: %v", ref.APIVersion, err)
		return
	}
	key := types.NamespacedName{Namespace: g.sub.Namespace, Name: ref.Name}
	var url string
	if gv.Group == "" && ref.Kind == "Service" {
		svc := &corev1.Service{}
		if err = g.r.APIReader.Get(g.ctx, key, svc); err == nil {
			url = "http://" + svc.Name + "." + svc.Namespace + ".svc.cluster.local"
			if len(svc.Spec.Ports) > 0 && svc.Spec.Ports[0].Port != 80 {
				url += fmt.Sprintf(":%d", svc.Spec.Ports[0].Port)
			}
		}
	} else {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gv.WithKind(ref.Kind))
		if err = g.r.APIReader.Get(g.ctx, key, u); err == nil {
			url, _, _ = unstructured.NestedString(u.Object, "status", "address", "url")
			if url == "" {
				g.problem("%s %s has no status.address.url yet", ref.Kind, key)
				return
			}
		}
	}
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		g.problem("%s %s not found", ref.Kind, key)
	case apierrors.IsForbidden(err):
		g.problem("the manager may not read %s %s: grant its ClusterRole get on %s", ref.Kind, key, strings.ToLower(ref.Kind)+"s")
	case err != nil:
		g.problem("resolving %s %s: %v", ref.Kind, key, err)
	default:
		g.out.data[routesecret.SinkKey(g.name, routesecret.SinkFieldURL)] = []byte(url)
	}
}

// gatherSinks prepares the material of every sink of sub.
func (r *Reconciler) gatherSinks(ctx context.Context, sub *hookv1.WebhookSubscription) sinkMaterial {
	out := sinkMaterial{data: map[string][]byte{}}
	for _, s := range sub.Spec.Delivery.EffectiveSinks() {
		g := &sinkGatherer{r: r, ctx: ctx, sub: sub, name: s.Name, out: &out}
		if s.Filter != "" {
			if _, err := eventfilter.Compile(s.Filter); err != nil {
				g.problem("%v", err)
			}
		}
		switch {
		case s.HTTP != nil:
			g.http(s.HTTP.Auth)
		case s.Ref != nil:
			g.ref(s.Ref)
		case s.NATS != nil:
			g.nats(s.NATS)
		case s.AMQP != nil:
			g.copyKey(s.AMQP.URL.Name, s.AMQP.URL.Key, routesecret.SinkFieldURL, true)
			g.tls(s.AMQP.TLS)
		case s.Kafka != nil:
			if sasl := s.Kafka.SASL; sasl != nil {
				g.copyKey(sasl.Credentials.Name, sinkKeyUsername, routesecret.SinkFieldUsername, true)
				g.copyKey(sasl.Credentials.Name, sinkKeyPassword, routesecret.SinkFieldPassword, true)
			}
			g.tls(s.Kafka.TLS)
		}
		if len(g.errs) > 0 {
			out.problems = append(out.problems, "sink "+s.Name+": "+strings.Join(g.errs, "; "))
		}
	}
	return out
}

// reportSinks says in SinksReady whether every sink has what it needs (absent without a
// spec.delivery.sinks list: the older single sink needs nothing prepared), with a Warning
// Event when the problems change.
func (r *Reconciler) reportSinks(sub *hookv1.WebhookSubscription, m sinkMaterial) {
	if sub.Spec.Delivery == nil || len(sub.Spec.Delivery.Sinks) == 0 {
		meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionSinksReady)
		return
	}
	c := metav1.Condition{Type: hookv1.ConditionSinksReady, Status: metav1.ConditionTrue, Reason: hookv1.ReasonSucceeded,
		Message: "every sink has what the receiver needs to deliver to it", ObservedGeneration: sub.Generation}
	if len(m.problems) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, hookv1.ReasonSinkMisconfigured
		c.Message = strings.Join(m.problems, "; ") + " (its events wait at the receiver; the other sinks go on)"
		if prev := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionSinksReady); prev == nil || prev.Message != c.Message {
			r.event(sub, corev1.EventTypeWarning, hookv1.ReasonSinkMisconfigured, "Reconcile", "%s", c.Message)
		}
	}
	meta.SetStatusCondition(&sub.Status.Conditions, c)
}

// sinkData holds, per subscription, the sink material its last reconcile prepared, for the
// route Secret writes of that subscription (RouteSecrets.ensure).
type sinkData struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string][]byte
}

func (s *sinkData) set(key types.NamespacedName, data map[string][]byte) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.NamespacedName]map[string][]byte{}
	}
	if len(data) == 0 {
		delete(s.m, key)
		return
	}
	s.m[key] = data
}

func (s *sinkData) get(key types.NamespacedName) map[string][]byte {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// digest is a version of data for the route Secret memo: equal data, equal digest.
func digest(data map[string][]byte) string {
	if len(data) == 0 {
		return ""
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
