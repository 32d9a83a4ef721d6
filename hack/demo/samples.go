package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// subRef is what the demo needs to know about one sample subscription.
type subRef struct {
	name          string
	signingSecret string
	credsName     string
	credsKey      string
	events        []string // spec.events
	receiver      bool     // spec.endpoint.receiver: the manager registers the bundled receiver
	sample        string   // spec.delivery.sink.url as the sample has it ("" without a sink)
	sink          string   // the same, rewritten to the demo's sink
}

// loadSamples reads every YAML document in dir (kustomization files excepted), points each
// WebhookSubscription at apiURL with the given resyncInterval and its delivery sink (if any) at
// sinkBase, and returns the rewritten multi-document manifest with the subscriptions it holds.
func loadSamples(dir, apiURL, sinkBase, resync string) ([]byte, []subRef, error) {
	files, err := yamlFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var docs [][]byte
	var subs []subRef
	for _, f := range files {
		objs, err := readDocs(f)
		if err != nil {
			return nil, nil, err
		}
		for _, obj := range objs {
			if isWebhookSubscription(obj) {
				ref, err := rewrite(obj, apiURL, sinkBase, resync)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", f, err)
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
	if len(subs) == 0 {
		return nil, nil, fmt.Errorf("no WebhookSubscription found in %s", dir)
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

// rewrite sets spec.provider.apiURL and spec.resyncInterval, points spec.delivery.sink.url
// (a cluster-internal URL in the samples) at sinkBase + "/<name>" + its path, and reads what the
// demo checks.
func rewrite(obj map[string]any, apiURL, sinkBase, resync string) (subRef, error) {
	meta := child(obj, "metadata")
	name, _ := meta["name"].(string)
	if name == "" {
		return subRef{}, errors.New("a WebhookSubscription has no metadata.name")
	}
	if ns, _ := meta["namespace"].(string); ns != "" && ns != namespace {
		return subRef{}, fmt.Errorf("WebhookSubscription %s is in namespace %s; the demo runs in %s", name, ns, namespace)
	}
	spec := child(obj, "spec")
	provider := child(spec, "provider")
	provider["apiURL"] = apiURL
	spec["resyncInterval"] = resync

	creds := child(provider, "credentialsRef")
	ref := subRef{name: name}
	ref.credsName, _ = creds["name"].(string)
	ref.credsKey, _ = creds["key"].(string)
	if ref.credsKey == "" {
		ref.credsKey = "apiKey" // the CRD's default
	}
	ref.signingSecret, _ = child(spec, "signingSecret")["name"].(string)
	if ref.credsName == "" || ref.signingSecret == "" {
		return subRef{}, fmt.Errorf("WebhookSubscription %s needs spec.provider.credentialsRef.name and spec.signingSecret.name", name)
	}
	if events, ok := spec["events"].([]any); ok {
		for _, e := range events {
			if s, ok := e.(string); ok {
				ref.events = append(ref.events, s)
			}
		}
	}
	if endpoint, ok := spec["endpoint"].(map[string]any); ok {
		_, ref.receiver = endpoint["receiver"]
	}
	if delivery, ok := spec["delivery"].(map[string]any); ok {
		sink := child(delivery, "sink")
		ref.sample, _ = sink["url"].(string)
		if ref.sample != "" {
			u, err := url.Parse(ref.sample)
			if err != nil {
				return subRef{}, fmt.Errorf("WebhookSubscription %s: spec.delivery.sink.url: %w", name, err)
			}
			ref.sink = strings.TrimRight(sinkBase, "/") + "/" + name + u.EscapedPath()
			sink["url"] = ref.sink
		}
	}
	return ref, nil
}

// child returns obj[key] as a map, creating it when missing.
func child(obj map[string]any, key string) map[string]any {
	m, ok := obj[key].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj[key] = m
	}
	return m
}
