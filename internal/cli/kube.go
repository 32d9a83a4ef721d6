package cli

import (
	"bufio"
	"bytes"
	"context"
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
	ns, _, err := g.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, usageError("kubeconfig: %v", err)
	}
	return &cluster{client: c, namespace: ns}, nil
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

// listSubscriptions lists the subscriptions in the namespace (all with -A) that match selector;
// none is bad input.
func (g *globals) listSubscriptions(ctx context.Context, c *cluster, selector string) ([]hookv1.WebhookSubscription, error) {
	opts := []client.ListOption{}
	where := "namespace " + c.namespace
	if !g.allNamespaces {
		opts = append(opts, client.InNamespace(c.namespace))
	} else {
		where = "any namespace"
	}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, usageError("--selector %q: %v", selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		where += " matching " + selector
	}
	var list hookv1.WebhookSubscriptionList
	if err := c.client.List(ctx, &list, opts...); err != nil {
		return nil, kubeError("listing WebhookSubscriptions", err)
	}
	if len(list.Items) == 0 {
		return nil, usageError("no WebhookSubscription in %s", where)
	}
	sort.Slice(list.Items, func(i, j int) bool { return key(&list.Items[i]) < key(&list.Items[j]) })
	return list.Items, nil
}

func key(s *hookv1.WebhookSubscription) string { return s.Namespace + "/" + s.Name }

// readManifests reads the WebhookSubscriptions of a multi-document YAML or JSON file ("-":
// stdin); any other kind is bad input.
func readManifests(path string, stdin io.Reader, defaultNS string) ([]hookv1.WebhookSubscription, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageError("reading %s: %v", path, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []hookv1.WebhookSubscription
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, usageError("%s: document %d: %v", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isComment(raw) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			return nil, usageError("%s: document %d: %v", path, doc, err)
		}
		if tm.Kind != "WebhookSubscription" || tm.APIVersion != hookv1.GroupVersion.String() {
			return nil, usageError("%s: document %d is a %s %s, not a %s WebhookSubscription", path, doc, tm.APIVersion, tm.Kind, hookv1.GroupVersion)
		}
		var sub hookv1.WebhookSubscription
		if err := yaml.UnmarshalStrict(raw, &sub); err != nil {
			return nil, usageError("%s: document %d: %v", path, doc, err)
		}
		if sub.Name == "" {
			return nil, usageError("%s: document %d: metadata.name is empty", path, doc)
		}
		if sub.Namespace == "" {
			sub.Namespace = defaultNS
		}
		out = append(out, sub)
	}
	if len(out) == 0 {
		return nil, usageError("%s holds no WebhookSubscription", path)
	}
	return out, nil
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
