package controllers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// Every CEL rule of the CRD answers with its own message when it refuses an object, and with
// nothing else: no evaluation error ("no such key", a failed conversion) in its place. The
// objects are sent as unstructured JSON, so values no Go type can hold (resyncInterval:
// banana) reach the API server as a user's YAML would.
var _ = Describe("CEL rules answer with their own message", Ordered, ContinueOnFailure, func() {
	seen := map[string]bool{}

	valid := func() *unstructured.Unstructured {
		t := &tenant{ns: "default", srvURL: stripeURL}
		s := t.sub(fmt.Sprintf("cel-own-%d", time.Now().UnixNano()), "https://hooks.example.com/x")
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(hookv1.GroupVersion.String())
		u.SetKind("WebhookSubscription")
		delete(u.Object, "status")
		return u
	}
	set := func(value any, path ...string) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			Expect(unstructured.SetNestedField(u.Object, value, append([]string{"spec"}, path...)...)).To(Succeed())
		}
	}
	github := func(u *unstructured.Unstructured) {
		set("github", "provider", "type")(u)
		set(map[string]any{"owner": "acme", "repository": "shop"}, "provider", "github")(u)
		set([]any{"push"}, "events")(u)
	}
	rest := func(u *unstructured.Unstructured) {
		set("rest", "provider", "type")(u)
		set(map[string]any{"profile": "name: x"}, "provider", "rest")(u)
	}
	all := func(fs ...func(u *unstructured.Unstructured)) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			for _, f := range fs {
				f(u)
			}
		}
	}

	DescribeTable("refused with the rule's message",
		func(mutate func(u *unstructured.Unstructured), want string) {
			u := valid()
			mutate(u)
			err := k8s.Create(suiteCtx, u)
			Expect(err).To(HaveOccurred(), "created %v", u.Object["spec"])
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(want))
			for _, bad := range []string{"evaluating rule", "no such key", "conversion", "compilation", "cost"} {
				Expect(err.Error()).NotTo(ContainSubstring(bad), "the answer carries an evaluation error instead of (or beside) the rule's message")
			}
			seen[want] = true
		},
		Entry("http:// without allowInsecureHTTP (omitted)", set("http://hooks.example.com/x", "endpoint", "url"),
			"spec.endpoint.url uses http://; set spec.endpoint.allowInsecureHTTP: true to allow unencrypted deliveries"),
		Entry("http:// with allowInsecureHTTP: false", all(set("http://hooks.example.com/x", "endpoint", "url"), set(false, "endpoint", "allowInsecureHTTP")),
			"spec.endpoint.url uses http://; set spec.endpoint.allowInsecureHTTP: true to allow unencrypted deliveries"),
		Entry("resyncInterval: banana", set("banana", "resyncInterval"), "spec.resyncInterval must be a duration such as 10m, 30s or 1h30m"),
		Entry("resyncInterval without a unit", set("10", "resyncInterval"), "spec.resyncInterval must be a duration such as 10m, 30s or 1h30m"),
		Entry("resyncInterval too short", set("500ms", "resyncInterval"), "spec.resyncInterval must be at least 1s"),
		Entry("dedupeWindow: banana", set(map[string]any{"sink": map[string]any{"url": "http://w/"}, "dedupeWindow": "banana"}, "delivery"),
			"spec.delivery.dedupeWindow must be a duration such as 72h, 30m or 1h30m"),
		Entry("dedupeWindow too short", set(map[string]any{"sink": map[string]any{"url": "http://w/"}, "dedupeWindow": "30s"}, "delivery"),
			"spec.delivery.dedupeWindow must be at least 1m"),
		Entry("sink not absolute", set(map[string]any{"sink": map[string]any{"url": "orders-worker:8080"}}, "delivery"),
			"spec.delivery.sink.url must be an absolute http(s) URL"),
		Entry("both url and receiver", set(map[string]any{"url": "https://hooks.example.com/x", "receiver": map[string]any{}}, "endpoint"),
			"spec.endpoint: set exactly one of url or receiver"),
		Entry("not a URL", set("https://hooks example.com/x", "endpoint", "url"), "spec.endpoint.url must be an absolute URL"),
		Entry("not http(s)", set("ftp://hooks.example.com/x", "endpoint", "url"), "spec.endpoint.url must use https (or http with spec.endpoint.allowInsecureHTTP)"),
		Entry("no host", set("/hooks/x", "endpoint", "url"), "spec.endpoint.url must have a host"),
		Entry("a fragment", set("https://hooks.example.com/x#f", "endpoint", "url"), "spec.endpoint.url must not contain a fragment (#...): providers never send it"),
		Entry("credentials", set("https://u:p@hooks.example.com/x", "endpoint", "url"), "spec.endpoint.url must not contain credentials (user:password@)"),
		Entry("'*' beside other events", set([]any{"*", "invoice.paid"}, "events"), "spec.events: '*' already means every event; list it alone"),
		Entry("github type without its block", set("github", "provider", "type"), "spec.provider.github must be set when spec.provider.type is github, and only then"),
		Entry("rest type without its block", set("rest", "provider", "type"), "spec.provider.rest must be set when spec.provider.type is rest, and only then"),
		Entry("apiURL not http(s)", set("localhost:12111", "provider", "apiURL"), "spec.provider.apiURL must be an http(s) URL"),
		Entry("github repository and organization", all(github, set("acme", "provider", "github", "organization")),
			"spec.provider.github: set either owner and repository (a repository hook) or organization (an organization hook)"),
		Entry("github owner without repository", all(github, set(map[string]any{"owner": "acme"}, "provider", "github")),
			"spec.provider.github: owner and repository are set together"),
		Entry("github repository ..", all(github, set("..", "provider", "github", "repository")), "spec.provider.github.repository must not be . or .."),
		Entry("github event in Stripe style", all(github, set([]any{"invoice.paid"}, "events")),
			"spec.events: GitHub names events in lowercase with underscores (push, pull_request), or '*' for all"),
		Entry("recovery mode unknown", set(map[string]any{"mode": "Sometimes"}, "recovery"), "spec.recovery.mode must be Auto, Manual or Off"),
		Entry("recovery mode in lowercase", set(map[string]any{"mode": "auto"}, "recovery"), "spec.recovery.mode must be Auto, Manual or Off"),
		Entry("recovery lookback: banana", set(map[string]any{"lookback": "banana"}, "recovery"), "spec.recovery.lookback must be a duration such as 72h, 30m or 1h30m"),
		Entry("recovery lookback too short", set(map[string]any{"lookback": "30s"}, "recovery"), "spec.recovery.lookback must be at least 1m"),
		Entry("rest with profile and profileRef", all(rest, set(map[string]any{"profile": "name: x", "profileRef": map[string]any{"name": "p", "key": "k"}}, "provider", "rest")),
			"spec.provider.rest: set exactly one of profileRef or profile"),
	)

	It("covers every rule of the CRD", func() {
		b, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "hookwarden.io_webhooksubscriptions.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(yaml.Unmarshal(b, &crd)).To(Succeed())
		var missing []string
		var walk func(s *apiextensionsv1.JSONSchemaProps)
		walk = func(s *apiextensionsv1.JSONSchemaProps) {
			for _, v := range s.XValidations {
				if !seen[v.Message] {
					missing = append(missing, v.Message)
				}
			}
			for _, p := range s.Properties {
				walk(&p)
			}
			if s.Items != nil && s.Items.Schema != nil {
				walk(s.Items.Schema)
			}
		}
		walk(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
		sort.Strings(missing)
		Expect(missing).To(BeEmpty(), "rules no entry above refuses:\n%s", strings.Join(missing, "\n"))
	})
})
