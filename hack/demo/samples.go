package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/builtin"
)

// subRef is what the demo needs to know about one sample subscription.
type subRef struct {
	name          string
	provider      hookv1.ProviderType
	target        string // GitHub: the hooks' owner, "repos/<owner>/<repo>" or "orgs/<org>"; "" otherwise
	signingSecret string
	credsName     string
	credsKey      string
	events        []string // spec.events
	receiver      bool     // the manager registers the bundled receiver (spec.endpoint.receiver, or a URL rewritten to it)
	endpoint      string   // spec.endpoint.url as the sample has it, when the demo rewrote it to the receiver
	sample        string   // spec.delivery.sink.url as the sample has it ("" without a sink)
	sink          string   // the same, rewritten to the demo's sink
	natsSubject   string   // the subject of its NATS JetStream sink ("" without one: see fanOut)
	natsType      string   // the one event type that sink's filter selects ("" for all)
}

// rewriting is where loadSamples points the samples.
type rewriting struct {
	apiURLs      map[hookv1.ProviderType]string // spec.provider.apiURL by provider type: the fakes
	sinkBase     string                         // the demo's sink
	receiverBase string                         // the receiver (http://ADDR)
	resync       string                         // spec.resyncInterval
	natsURL      string                         // the embedded nats-server ("" leaves every sink as it is)
}

// loadSamples reads every YAML document in dirs (kustomization files excepted), points each
// WebhookSubscription at its provider's fake with the given resyncInterval, its delivery sink
// (if any) at sinkBase and an explicit endpoint URL on the receiver's route at the receiver,
// and returns the rewritten multi-document manifest with the subscriptions it holds.
func loadSamples(dirs []string, rw rewriting) ([]byte, []subRef, error) {
	var docs [][]byte
	var subs []subRef
	fannedOut := false
	for _, dir := range dirs {
		files, err := yamlFiles(dir)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			objs, err := readDocs(f)
			if err != nil {
				return nil, nil, err
			}
			for _, obj := range objs {
				if isWebhookSubscription(obj) {
					ref, err := rewrite(obj, rw)
					if err != nil {
						return nil, nil, fmt.Errorf("%s: %w", f, err)
					}
					if rw.natsURL != "" && !fannedOut && ref.sink != "" {
						fanOut(obj, &ref, rw.natsURL)
						fannedOut = true
					}
					subs = append(subs, ref)
				}
				b, err := yaml.Marshal(obj)
				if err != nil {
					return nil, nil, err
				}
				docs = append(docs, b)
			}
		}
	}
	if len(subs) == 0 {
		return nil, nil, fmt.Errorf("no WebhookSubscription found in %s", strings.Join(dirs, ", "))
	}
	return bytes.Join(docs, []byte("---\n")), subs, nil
}

func yamlFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the samples: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") || strings.TrimSuffix(name, ext) == "kustomization" {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	sort.Strings(out)
	return out, nil
}

// readDocs splits a multi-document YAML file into objects, skipping empty documents and
// anything that is not a Kubernetes object (no apiVersion or kind).
func readDocs(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj["apiVersion"] == nil || obj["kind"] == nil || obj["kind"] == "Kustomization" {
			continue
		}
		out = append(out, obj)
	}
}

func isWebhookSubscription(obj map[string]any) bool {
	av, _ := obj["apiVersion"].(string)
	return obj["kind"] == "WebhookSubscription" && strings.HasPrefix(av, hookv1.GroupVersion.Group+"/")
}

// rewrite sets spec.provider.apiURL (to the fake of the provider type) and spec.resyncInterval,
// points spec.delivery.sink.url (a cluster-internal URL in the samples) at sinkBase +
// "/<name>" + its path, points an explicit spec.endpoint.url whose path is the receiver's route
// of this subscription (a public ingress in front of the receiver, in the samples) at the
// receiver, and reads what the demo checks.
func rewrite(obj map[string]any, rw rewriting) (subRef, error) {
	var sub hookv1.WebhookSubscription
	b, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(b, &sub)
	}
	if err != nil {
		return subRef{}, fmt.Errorf("reading a WebhookSubscription: %w", err)
	}
	name := sub.Name
	if name == "" {
		return subRef{}, errors.New("a WebhookSubscription has no metadata.name")
	}
	if sub.Namespace != "" && sub.Namespace != namespace {
		return subRef{}, fmt.Errorf("WebhookSubscription %s is in namespace %s; the demo runs in %s", name, sub.Namespace, namespace)
	}
	p := sub.Spec.Provider
	apiURL, ok := rw.apiURLs[p.Type]
	if !ok {
		return subRef{}, fmt.Errorf("WebhookSubscription %s is for provider %q, which the demo has no fake of", name, p.Type)
	}
	ref := subRef{name: name, provider: p.Type, credsName: p.CredentialsRef.Name, credsKey: p.CredentialsRef.Key,
		signingSecret: sub.Spec.SigningSecret.Name, events: sub.Spec.Events, receiver: sub.Spec.Endpoint.Receiver != nil}
	if ref.credsKey == "" {
		ref.credsKey = builtin.Registry()[string(p.Type)].CredentialKey
	}
	if ref.credsName == "" || ref.signingSecret == "" {
		return subRef{}, fmt.Errorf("WebhookSubscription %s needs spec.provider.credentialsRef.name and spec.signingSecret.name", name)
	}
	if g := p.GitHub; g != nil {
		ref.target = "orgs/" + g.Organization
		if g.Organization == "" {
			ref.target = "repos/" + g.Owner + "/" + g.Repository
		}
	}

	spec := child(obj, "spec")
	child(spec, "provider")["apiURL"] = apiURL
	spec["resyncInterval"] = rw.resync
	route := "/hooks/" + namespace + "/" + name
	if u, err := url.Parse(sub.Spec.Endpoint.URL); err == nil && sub.Spec.Endpoint.URL != "" && u.Path == route {
		endpoint := child(spec, "endpoint")
		endpoint["url"] = rw.receiverBase + route
		// The local receiver speaks plain HTTP; the sample's ingress would terminate TLS.
		endpoint["allowInsecureHTTP"] = strings.HasPrefix(rw.receiverBase, "http://")
		ref.receiver, ref.endpoint = true, sub.Spec.Endpoint.URL
	}
	if d := sub.Spec.Delivery; d != nil && d.Sink != nil && d.Sink.URL != "" {
		u, err := url.Parse(d.Sink.URL)
		if err != nil {
			return subRef{}, fmt.Errorf("WebhookSubscription %s: spec.delivery.sink.url: %w", name, err)
		}
		ref.sample = d.Sink.URL
		ref.sink = strings.TrimRight(rw.sinkBase, "/") + "/" + name + u.EscapedPath()
		child(child(spec, "delivery"), "sink")["url"] = ref.sink
	}
	return ref, nil
}

// fanOut turns the sink of WebhookSubscription obj (ref, already rewritten) into
// spec.delivery.sinks: the same HTTP sink, named default as the older field stands for, and a
// NATS JetStream sink on natsURL, subject <name>.events. When spec.events names two or more
// types the JetStream sink's filter selects only the last of them, to show filters.
func fanOut(obj map[string]any, ref *subRef, natsURL string) {
	ref.natsSubject = ref.name + ".events"
	nats := map[string]any{"name": "jetstream", "nats": map[string]any{"urls": []any{natsURL}, "subject": ref.natsSubject}}
	if len(ref.events) > 1 && !slices.Contains(ref.events, "*") {
		ref.natsType = ref.events[len(ref.events)-1]
		nats["filter"] = natsFilter(ref.natsType)
	}
	delivery := child(child(obj, "spec"), "delivery")
	delete(delivery, "sink")
	delivery["sinks"] = []any{
		map[string]any{"name": hookv1.DefaultSinkName, "http": map[string]any{"url": ref.sink}},
		nats,
	}
}

// natsFilter is the CEL filter of the fan-out's JetStream sink selecting events of type typ.
func natsFilter(typ string) string { return "type == '" + typ + "'" }

// child returns obj[key] as a map, creating it when missing.
func child(obj map[string]any, key string) map[string]any {
	m, ok := obj[key].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj[key] = m
	}
	return m
}
