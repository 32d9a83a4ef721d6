package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// cluster is the cluster the kubeconfig flags name.
type cluster struct {
	client    client.Client
	namespace string // -n, or the kubeconfig context's, or "default"
	// explicitNamespace: -n was given; a manifest of another namespace is refused (as kubectl).
	explicitNamespace bool
}

func (g *globals) cluster() (*cluster, error) {
	cfg, err := g.kube.ToRESTConfig()
	if err != nil {
		return nil, usageError("kubeconfig: %v", err)
	}
	// Following several subscriptions' status reads often: more than client-go's default 5/s.
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	ns, explicit, err := g.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, usageError("kubeconfig: %v", err)
	}
	return &cluster{client: c, namespace: ns, explicitNamespace: explicit}, nil
}

// kubeError says what a failed API call means in one line.
func kubeError(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: forbidden: %s", what, apierrors.ReasonForError(err))
	case apierrors.IsNotFound(err) && isCRDMissing(err):
		return fmt.Errorf("%s: the cluster has no WebhookSubscription CRD (install Hookwarden first)", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isCRDMissing(err error) bool {
	var se *apierrors.StatusError
	return errors.As(err, &se) && se.ErrStatus.Details != nil && se.ErrStatus.Details.Kind == "webhooksubscriptions" && se.ErrStatus.Details.Name == ""
}

// listSubscriptions lists the subscriptions in the namespace (all with -A) that match selector,
// sorted; where says which ("namespace shop matching team=a") for a command that needs one.
func (g *globals) listSubscriptions(ctx context.Context, c *cluster, selector string) (subs []hookv1.WebhookSubscription, where string, err error) {
	opts := []client.ListOption{}
	where = "namespace " + c.namespace
	if !g.allNamespaces {
		opts = append(opts, client.InNamespace(c.namespace))
	} else {
		where = "any namespace"
	}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, "", usageError("--selector %q: %v", selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		where += " matching " + selector
	}
	var list hookv1.WebhookSubscriptionList
	if err := c.client.List(ctx, &list, opts...); err != nil {
		return nil, "", kubeError("listing WebhookSubscriptions", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return key(&list.Items[i]) < key(&list.Items[j]) })
	return list.Items, where, nil
}

// listOrNone is listSubscriptions for the list-like commands (status, plan): a namespace (-A:
// a cluster) without subscriptions is no error, and says so as kubectl get does (on stderr;
// none is nil then); a selector matching nothing is bad input (a typo must not pass a gate).
func (g *globals) listOrNone(ctx context.Context, w io.Writer, c *cluster, selector string) ([]hookv1.WebhookSubscription, error) {
	subs, where, err := g.listSubscriptions(ctx, c, selector)
	switch {
	case err != nil:
		return nil, err
	case len(subs) > 0:
		return subs, nil
	case selector != "":
		return nil, usageError("no WebhookSubscription in %s", where)
	}
	g.noResources(w, c)
	return nil, nil
}

func (g *globals) noResources(w io.Writer, c *cluster) {
	if g.allNamespaces {
		fmt.Fprintln(w, "No resources found")
		return
	}
	fmt.Fprintf(w, "No resources found in %s namespace.\n", c.namespace)
}

func key(s *hookv1.WebhookSubscription) string { return s.Namespace + "/" + s.Name }

// manifests are what a file given to plan -f holds: its WebhookSubscriptions, its Secrets (a
// credential, the signing Secret import wrote), and how many documents of other kinds it had
// (kustomize build output: Namespaces, Deployments...), which are not planned.
type manifests struct {
	subs    []hookv1.WebhookSubscription
	secrets []corev1.Secret
	others  int
}

// readManifests reads a multi-document YAML or JSON file ("-": stdin), v1 Lists included; one
// without a WebhookSubscription, or with a document that is no Kubernetes object, is bad input.
// Documents without a namespace are in ns; with enforce (-n given), one naming another
// namespace is refused, in kubectl's words.
func readManifests(path string, stdin io.Reader, ns string, enforce bool) (manifests, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return manifests{}, usageError("reading %s: %v", path, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out manifests
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return manifests{}, usageError("%s: document %d: %v", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isComment(raw) {
			continue
		}
		if err := out.add(raw, ns); err != nil {
			return manifests{}, usageError("%s: document %d: %v", path, doc, err)
		}
		if err := out.checkNamespace(ns, enforce); err != nil {
			return manifests{}, err
		}
	}
	if len(out.subs) == 0 {
		return manifests{}, usageError("%s holds no WebhookSubscription", path)
	}
	return out, nil
}

// add reads one document: a WebhookSubscription, a Secret, a v1 List of them, or another kind
// (counted).
func (m *manifests) add(raw []byte, defaultNS string) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return err
	}
	switch {
	case tm.Kind == "" || tm.APIVersion == "":
		return errors.New("not a Kubernetes object (no apiVersion or kind)")
	case tm.APIVersion == "v1" && tm.Kind == "List":
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := yaml.Unmarshal(raw, &list); err != nil {
			return err
		}
		for i, item := range list.Items {
			if err := m.add(item, defaultNS); err != nil {
				return fmt.Errorf("item %d: %w", i+1, err)
			}
		}
	case tm.APIVersion == "v1" && tm.Kind == "Secret":
		var sec corev1.Secret
		if err := yaml.UnmarshalStrict(raw, &sec); err != nil {
			return err
		}
		if sec.Namespace == "" {
			sec.Namespace = defaultNS
		}
		m.secrets = append(m.secrets, sec)
	case tm.APIVersion == hookv1.GroupVersion.String() && tm.Kind == "WebhookSubscription":
		var sub hookv1.WebhookSubscription
		if err := yaml.UnmarshalStrict(raw, &sub); err != nil {
			return err
		}
		if sub.Name == "" {
			return errors.New("metadata.name is empty")
		}
		if sub.Namespace == "" {
			sub.Namespace = defaultNS
		}
		m.subs = append(m.subs, sub)
	default:
		m.others++
	}
	return nil
}

// checkNamespace refuses, when enforce, a document of another namespace than ns: kubectl's
// words (kubectl apply -n y -f x.yaml).
func (m *manifests) checkNamespace(ns string, enforce bool) error {
	if !enforce {
		return nil
	}
	for _, got := range m.namespaces() {
		if got != ns {
			return usageError("the namespace from the provided object %q does not match the namespace %q. You must pass '--namespace=%s' to perform this operation.", got, ns, got)
		}
	}
	return nil
}

func (m *manifests) namespaces() []string {
	out := make([]string, 0, len(m.subs)+len(m.secrets))
	for i := range m.subs {
		out = append(out, m.subs[i].Namespace)
	}
	for i := range m.secrets {
		out = append(out, m.secrets[i].Namespace)
	}
	return out
}

// withSecrets reads Secrets from secrets first (as they would be once applied: stringData
// written into data), then from the cluster: plan -f plans with the Secrets its input holds.
type withSecrets struct {
	client.Reader
	secrets map[types.NamespacedName]*corev1.Secret
}

func newWithSecrets(next client.Reader, secrets []corev1.Secret) withSecrets {
	m := map[types.NamespacedName]*corev1.Secret{}
	for i := range secrets {
		sec := secrets[i].DeepCopy()
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		for k, v := range sec.StringData {
			sec.Data[k] = []byte(v)
		}
		sec.StringData = nil
		m[client.ObjectKeyFromObject(sec)] = sec
	}
	return withSecrets{Reader: next, secrets: m}
}

func (w withSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if sec, ok := obj.(*corev1.Secret); ok {
		if from, ok := w.secrets[key]; ok {
			from.DeepCopyInto(sec)
			return nil
		}
	}
	return w.Reader.Get(ctx, key, obj, opts...)
}

func isComment(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}

// clusterName is what the manager puts in ownership markers: --cluster-name, or (as the
// manager's default) the UID of kube-system.
func clusterName(ctx context.Context, c *cluster, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	var ns corev1.Namespace
	if err := c.client.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", kubeError("reading the cluster name (the UID of namespace kube-system; or pass --cluster-name as the manager's)", err)
	}
	return string(ns.UID), nil
}

func nsName(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// notFoundIsUsage makes a named object that does not exist bad input.
func notFoundIsUsage(wrapped, err error) error {
	if apierrors.IsNotFound(err) {
		return &exitError{code: ExitUsage, err: wrapped}
	}
	return wrapped
}
