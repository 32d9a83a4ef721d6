// Package routesecret names and fills the route Secrets: the manager's copy of each
// subscription's signing material in the receiver's own namespace. The receiver reads Secrets
// in that one namespace only (a Role, never a ClusterRole), so a token of the internet-facing
// receiver cannot read a Secret anywhere else; the manager, which already writes the signing
// Secrets where the subscriptions live, writes the copies in the same step.
package routesecret

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

const (
	// Label marks route Secrets; the receiver's cache and the manager's sweep select on it.
	Label = "hookwarden.io/route-secret"
	// LabelNamespace and LabelName name the source subscription (the name only when it fits a
	// label value; the annotation always holds both).
	LabelNamespace = "hookwarden.io/subscription-namespace"
	LabelName      = "hookwarden.io/subscription-name"
	// AnnotationSubscription is "<namespace>/<name>" of the source subscription.
	AnnotationSubscription = "hookwarden.io/subscription"
	// AnnotationUID is the source subscription's UID: the receiver ignores a copy written for an
	// earlier subscription of the same name.
	AnnotationUID = "hookwarden.io/subscription-uid"
)

// maxName is the longest Secret name (a DNS subdomain).
const maxName = validation.DNS1123SubdomainMaxLength

// hashLen hex digits (80 bits) of SHA-256 end every name, so distinct subscriptions never share
// a route Secret whatever the readable part loses to truncation.
const hashLen = 20

// Name is the route Secret of subscription namespace/name: "route.<namespace>.<name>.<hash>",
// the readable part cut so that the whole is at most 253 characters, the hash over
// "<namespace>/<name>" (neither may contain a slash, so the input is unambiguous).
func Name(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	h := hex.EncodeToString(sum[:])[:hashLen]
	readable := "route." + namespace + "." + name
	readable = readable[:min(len(readable), maxName-1-hashLen)]
	// A cut may end a DNS label with '-' or leave an empty one ('.'): trim to an alphanumeric end.
	readable = strings.TrimRight(readable, ".-")
	return readable + "." + h
}

// Data is the part of a signing Secret the receiver verifies with: every secret
// (signingSecret, one per registration: whsec.<id>, pendingSecret) and the described scheme (verifier.json). Other keys
// a user may have added stay where they are.
func Data(signing map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range signing {
		if k == hookv1.SecretKeyCurrent || k == hookv1.SecretKeyPending || k == hookv1.SecretKeyVerifier || hookv1.IsRegistrationSecretKey(k) {
			out[k] = v
		}
	}
	return out
}

// Keys of a sink's material in a route Secret (see SinkKey): the URL the manager resolved for a
// ref sink, and the credentials it copied from the user's Secrets named in the sink's spec.
const (
	SinkFieldURL         = "url"
	SinkFieldBearerToken = "bearer-token"
	SinkFieldToken       = "token"
	SinkFieldCreds       = "user.creds"
	SinkFieldUsername    = "username"
	SinkFieldPassword    = "password"
	SinkFieldCert        = "tls.crt"
	SinkFieldKey         = "tls.key"
	SinkFieldCA          = "ca.crt"
)

// SinkKey is the route Secret key of field of the sink named sink: "sink.<sink>.<field>". The
// receiver reads a sink's credentials there (it reads no Secret outside its namespace), so they
// travel to it, and follow rotation, the way signing secrets do.
func SinkKey(sink, field string) string { return SinkPrefix + sink + "." + field }

// SinkPrefix begins every key of sink material in a route Secret.
const SinkPrefix = "sink."

// SinkData is the part of data that is sink material (keys under SinkPrefix); nil when none.
func SinkData(data map[string][]byte) map[string][]byte {
	var out map[string][]byte
	for k, v := range data {
		if strings.HasPrefix(k, SinkPrefix) {
			if out == nil {
				out = map[string][]byte{}
			}
			out[k] = v
		}
	}
	return out
}

// Source is what a route Secret says it was copied from.
type Source struct {
	Namespace, Name, UID string
}

// New returns the route Secret in receiverNamespace for the subscription src with data (a
// signing Secret's full data, Data selects from it, and the sinks' material under SinkPrefix).
func New(receiverNamespace string, src Source, data map[string][]byte) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: receiverNamespace, Name: Name(src.Namespace, src.Name)},
		Type:       corev1.SecretTypeOpaque,
	}
	Fill(sec, src, data)
	return sec
}

// Fill sets the labels, annotations and data of route Secret sec for src, keeping labels and
// annotations it does not own.
func Fill(sec *corev1.Secret, src Source, data map[string][]byte) {
	labels := map[string]string{Label: "true", LabelNamespace: src.Namespace}
	if len(validation.IsValidLabelValue(src.Name)) == 0 {
		labels[LabelName] = src.Name
	}
	if sec.Labels == nil {
		sec.Labels = map[string]string{}
	}
	delete(sec.Labels, LabelName)
	maps.Copy(sec.Labels, labels)
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[AnnotationSubscription] = src.Namespace + "/" + src.Name
	sec.Annotations[AnnotationUID] = src.UID
	sec.Data = Data(data)
	maps.Copy(sec.Data, SinkData(data))
}

// SourceOf reads the source subscription of a route Secret; ok is false for any other object.
func SourceOf(o metav1.Object) (Source, bool) {
	if o.GetLabels()[Label] != "true" {
		return Source{}, false
	}
	ns, name, ok := strings.Cut(o.GetAnnotations()[AnnotationSubscription], "/")
	if !ok || ns == "" || name == "" {
		return Source{}, false
	}
	return Source{Namespace: ns, Name: name, UID: o.GetAnnotations()[AnnotationUID]}, true
}

// serviceAccountNamespace is where the kubelet puts a pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PodNamespace is the namespace of the pod this runs in ("" outside a cluster): the default
// receiver namespace of both binaries, which the chart and the manifests run side by side.
func PodNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
