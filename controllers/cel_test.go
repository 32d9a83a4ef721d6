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

	sinks := func(list ...map[string]any) func(u *unstructured.Unstructured) {
		items := make([]any, len(list))
		for i, m := range list {
			items[i] = m
		}
		return set(map[string]any{"sinks": items}, "delivery")
	}
	httpSink := func(name string, extra map[string]any) map[string]any {
		m := map[string]any{"name": name, "http": map[string]any{"url": "http://worker.shop.svc/events"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	withHTTP := func(name string, http map[string]any) map[string]any {
		if _, ok := http["url"]; !ok {
			http["url"] = "http://worker.shop.svc/events"
		}
		return map[string]any{"name": name, "http": http}
	}
	kafka := func(key map[string]any) map[string]any {
		k := map[string]any{"bootstrapServers": []any{"kafka:9092"}, "topic": "orders"}
		if key != nil {
			k["key"] = key
		}
		return map[string]any{"name": "bus", "kafka": k}
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
		Entry("retention: banana", set(map[string]any{"sink": map[string]any{"url": "http://w/"}, "retention": "banana"}, "delivery"),
			"spec.delivery.retention must be a duration such as 720h, 30m or 1h30m"),
		Entry("retention over a year", set(map[string]any{"sink": map[string]any{"url": "http://w/"}, "retention": "8761h"}, "delivery"),
			"spec.delivery.retention must be between 1m and 8760h (a year)"),
		Entry("sink not absolute", set(map[string]any{"sink": map[string]any{"url": "orders-worker:8080"}}, "delivery"),
			"spec.delivery.sink.url must be an absolute http(s) URL"),
		Entry("both sink and sinks", set(map[string]any{"sink": map[string]any{"url": "http://w/"}, "sinks": []any{httpSink("worker", nil)}}, "delivery"),
			"spec.delivery: set sinks or the older sink, not both (sink is one HTTP sink named default: move it into sinks)"),
		Entry("neither sink nor sinks", set(map[string]any{"maxAttempts": int64(3)}, "delivery"), "spec.delivery: set sinks (or the older sink)"),
		Entry("two sinks of one name", sinks(httpSink("worker", nil), httpSink("audit", nil), httpSink("worker", nil)),
			"spec.delivery.sinks: two sinks have the same name; each name must be unique in the list"),
		Entry("a sink with no type", sinks(map[string]any{"name": "worker"}), "spec.delivery.sinks[]: set exactly one of http, ref, kafka, nats or amqp"),
		Entry("a sink with two types", sinks(httpSink("worker", map[string]any{"nats": map[string]any{"urls": []any{"nats://n:4222"}, "subject": "a.b"}})),
			"spec.delivery.sinks[]: set exactly one of http, ref, kafka, nats or amqp"),
		Entry("a sink name that is not a DNS label", sinks(httpSink("Worker_1", nil)),
			"spec.delivery.sinks[].name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"),
		Entry("ordering mode unknown", sinks(httpSink("worker", map[string]any{"ordering": map[string]any{"mode": "Global", "key": "data.object.id"}})),
			"spec.delivery.sinks[].ordering.mode must be PerKey"),
		Entry("ordering key not a path", sinks(httpSink("worker", map[string]any{"ordering": map[string]any{"mode": "PerKey", "key": "object.id"}})),
			"spec.delivery.sinks[].ordering.key must be id, type, subject, or data followed by dot-separated fields such as data.object.id"),
		Entry("http sink not absolute", sinks(withHTTP("worker", map[string]any{"url": "worker:8080"})), "spec.delivery.sinks[].http.url must be an absolute http(s) URL"),
		Entry("http sink with credentials in the URL", sinks(withHTTP("worker", map[string]any{"url": "https://u:p@worker/"})),
			"spec.delivery.sinks[].http.url must not contain credentials (user:password@): use auth"),
		Entry("http header name with a space", sinks(withHTTP("worker", map[string]any{"headers": []any{map[string]any{"name": "X Team", "value": "a"}}})),
			"spec.delivery.sinks[].http.headers[].name must be an HTTP header name"),
		Entry("http header the receiver sets", sinks(withHTTP("worker", map[string]any{"headers": []any{map[string]any{"name": "Ce-Id", "value": "a"}}})),
			"spec.delivery.sinks[].http.headers[].name is a header the receiver sets itself (Content-Type, Idempotency-Key, Authorization, Host, Content-Length, User-Agent, traceparent, tracestate, ce-*)"),
		Entry("http auth bearer and basic", sinks(withHTTP("worker", map[string]any{"auth": map[string]any{
			"bearerToken": map[string]any{"name": "s", "key": "token"}, "basic": map[string]any{"name": "s"}}})),
			"spec.delivery.sinks[].http.auth: set bearerToken or basic, not both"),
		Entry("kafka key path without source Path", sinks(kafka(map[string]any{"path": "data.object.id"})),
			"spec.delivery.sinks[].kafka.key: path is set with source Path, and only then"),
		Entry("kafka key source unknown", sinks(kafka(map[string]any{"source": "Random"})), "spec.delivery.sinks[].kafka.key.source must be EventID, Path or None"),
		Entry("kafka key path not a path", sinks(kafka(map[string]any{"source": "Path", "path": "customer"})),
			"spec.delivery.sinks[].kafka.key.path must be id, type, subject, or data followed by dot-separated fields such as data.object.id"),
		Entry("kafka sasl mechanism unknown", sinks(map[string]any{"name": "bus", "kafka": map[string]any{"bootstrapServers": []any{"kafka:9092"}, "topic": "t",
			"sasl": map[string]any{"mechanism": "GSSAPI", "credentials": map[string]any{"name": "s"}}}}),
			"spec.delivery.sinks[].kafka.sasl.mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
		Entry("nats subject with a wildcard", sinks(map[string]any{"name": "bus", "nats": map[string]any{"urls": []any{"nats://n:4222"}, "subject": "orders.>"}}),
			"spec.delivery.sinks[].nats.subject must be a subject without spaces or wildcards"),
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
			"spec.provider.github: set either owner and repository (a repository hook), organization (an organization hook) or app (a GitHub App's webhook)"),
		Entry("github repository and App", all(github, set(map[string]any{"appID": "12345"}, "provider", "github", "app")),
			"spec.provider.github: set either owner and repository (a repository hook), organization (an organization hook) or app (a GitHub App's webhook)"),
		Entry("github owner without repository", all(github, set(map[string]any{"owner": "acme"}, "provider", "github")),
			"spec.provider.github: owner and repository are set together"),
		Entry("github repository ..", all(github, set("..", "provider", "github", "repository")), "spec.provider.github.repository must not be . or .."),
		Entry("github event in Stripe style", all(github, set([]any{"invoice.paid"}, "events")),
			"spec.events: GitHub names events in lowercase with underscores (push, pull_request), or '*' for all"),
		Entry("recovery mode unknown", set(map[string]any{"mode": "Sometimes"}, "recovery"), "spec.recovery.mode must be Auto, Manual or Off"),
		Entry("recovery mode in lowercase", set(map[string]any{"mode": "auto"}, "recovery"), "spec.recovery.mode must be Auto, Manual or Off"),
		Entry("recovery lookback: banana", set(map[string]any{"lookback": "banana"}, "recovery"), "spec.recovery.lookback must be a duration such as 72h, 30m or 1h30m"),
		Entry("recovery lookback too short", set(map[string]any{"lookback": "30s"}, "recovery"), "spec.recovery.lookback must be at least 1m"),
		Entry("a stripe block on another provider", all(github, set(map[string]any{"apiVersion": "v2"}, "provider", "stripe")),
			"spec.provider.stripe is only for spec.provider.type stripe"),
		Entry("stripe eventPayload on a v1 endpoint", set(map[string]any{"apiVersion": "v1", "eventPayload": "thin"}, "provider", "stripe"),
			"spec.provider.stripe.eventPayload is for apiVersion v2 (v1 endpoints send snapshot events)"),
		Entry("stripe eventPayload without apiVersion", set(map[string]any{"eventPayload": "snapshot"}, "provider", "stripe"),
			"spec.provider.stripe.eventPayload is for apiVersion v2 (v1 endpoints send snapshot events)"),
		Entry("rest with profile and profileRef", all(rest, set(map[string]any{"profile": "name: x", "profileRef": map[string]any{"name": "p", "key": "k"}}, "provider", "rest")),
			"spec.provider.rest: set exactly one of builtin, profileRef or profile"),
		Entry("rest with a built-in profile and an inline one", all(rest, set(map[string]any{"builtin": "gitlab-project-hooks", "profile": "name: x"}, "provider", "rest")),
			"spec.provider.rest: set exactly one of builtin, profileRef or profile"),
	)

	It("refuses more than 8 sinks with the schema's own message", func() {
		u := valid()
		var list []any
		for i := range 9 {
			list = append(list, httpSink(fmt.Sprintf("s%d", i), nil))
		}
		Expect(unstructured.SetNestedField(u.Object, map[string]any{"sinks": list}, "spec", "delivery")).To(Succeed())
		err := k8s.Create(suiteCtx, u)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.delivery.sinks: Too many: 9: must have at most 8 items"))
	})

	It("accepts every sink type, filters, ordering and the older sink alone", func() {
		for _, delivery := range []map[string]any{
			{"sink": map[string]any{"url": "http://w/"}},
			{"sinks": []any{
				withHTTP("worker", map[string]any{"headers": []any{map[string]any{"name": "X-Team", "value": "payments"}},
					"auth": map[string]any{"bearerToken": map[string]any{"name": "s", "key": "token"}, "caBundle": map[string]any{"name": "s", "key": "ca.crt"}}}),
				map[string]any{"name": "broker", "ref": map[string]any{"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}},
				kafka(map[string]any{"source": "Path", "path": "data.object.customer"}),
				map[string]any{"name": "stream", "nats": map[string]any{"urls": []any{"nats://n:4222"}, "subject": "webhooks.orders"},
					"filter": "type.startsWith('invoice.')", "maxAttempts": int64(5), "ordering": map[string]any{"mode": "PerKey", "key": "data.object.id"}},
				map[string]any{"name": "rabbit", "amqp": map[string]any{"url": map[string]any{"name": "s", "key": "url"}, "exchange": "webhooks", "routingKey": "orders"}},
			}},
		} {
			u := valid()
			Expect(unstructured.SetNestedField(u.Object, delivery, "spec", "delivery")).To(Succeed())
			Expect(k8s.Create(suiteCtx, u)).To(Succeed(), "%v", delivery)
			Expect(k8s.Delete(suiteCtx, u)).To(Succeed())
		}
	})

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
