package controllers_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// What an operator sees: kstatus (as Flux and `kubectl wait` compute it) of ready, stalled
// and suspended subscriptions, the printer columns, a reconcile requested by annotation, the
// manager's metrics (from a registry of this manager's own) and its logs (JSON, with the
// production settings cmd/manager uses).
var _ = Describe("Operating the manager", Ordered, ContinueOnFailure, func() {
	var (
		mgr     *runningManager
		reg     *prometheus.Registry
		jsonLog = &syncBuffer{}
	)
	BeforeAll(func() {
		reg = prometheus.NewRegistry()
		// cmd/manager's logger: zap's flags at their defaults (production: JSON, info, stack
		// traces on errors).
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		opts := zap.Options{}
		opts.BindFlags(fs)
		Expect(fs.Parse(nil)).To(Succeed())
		opts.DestWriter = ioMulti{GinkgoWriter, jsonLog}
		mgr = startManager(managerOptions{metrics: reg, logger: zap.New(zap.UseFlagOptions(&opts))})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	It("suspend: terminal for kstatus (Current), shown in columns, nothing sent while suspended; ready is Current, stalled is Failed", func() {
		t := newTenant()
		ready := t.sub("ready", "https://hooks.example.com/ops/ready")
		stalled := t.sub("stalled", "https://hooks.example.com/ops/stalled")
		stalled.Spec.Provider.CredentialsRef.Name = "missing"
		born := t.sub("born-suspended", "https://hooks.example.com/ops/born")
		born.Spec.Suspend = true
		for _, s := range []*hookv1.WebhookSubscription{ready, stalled, born} {
			Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		}
		expectReady(ready)
		Eventually(func(g Gomega) {
			g.Expect(condition(get(g, stalled), hookv1.ConditionStalled)).NotTo(BeNil())
		}).Should(Succeed())
		expectSuspended(born)

		Expect(kstatus(ready)).To(Equal(status.CurrentStatus))
		Expect(kstatus(stalled)).To(Equal(status.FailedStatus))
		Expect(kstatus(born)).To(Equal(status.CurrentStatus))
		Expect(t.endpoints()).To(HaveLen(1), "a subscription created suspended registers nothing")
		Expect(condition(get(Default, born), hookv1.ConditionReady).Message).To(ContainSubstring("none recorded"))

		// Suspend the ready one, then edit it: the provider hears nothing, the status catches
		// up with every generation.
		id := get(Default, ready).Status.EndpointID
		patchSpec(ready, func(s *hookv1.WebhookSubscription) { s.Spec.Suspend = true })
		expectSuspended(ready)
		t.srv.ResetRequests()
		patchSpec(ready, func(s *hookv1.WebhookSubscription) { s.Spec.Events = []string{"invoice.paid"} })
		got := expectSuspended(ready)
		c := condition(got, hookv1.ConditionReady)
		Expect(c.Message).To(ContainSubstring(id), "the message names the registration left as it is")
		Expect(c.Message).To(ContainSubstring("before: Succeeded"))
		Expect(kstatus(ready)).To(Equal(status.CurrentStatus))
		fmt.Printf("\nREPORT kstatus ready, then suspended and edited (generation %d, observed %d, Ready=True/Suspended): %s\n", got.Generation, got.Status.ObservedGeneration, kstatus(ready))
		Consistently(func() []fake.Request { return t.requests("POST", "") }).WithTimeout(3*time.Second).Should(BeEmpty(), "nothing is sent while suspended")

		cols := table(t.ns)
		Expect(cols["ready"]).To(HaveKeyWithValue("Suspended", true))
		Expect(cols["ready"]).To(HaveKeyWithValue("Ready", "True"))
		Expect(cols["ready"]["Status"]).To(ContainSubstring("suspended"))
		Expect(cols["stalled"]).To(HaveKeyWithValue("Ready", "False"))
		Expect(cols["stalled"]["Status"]).To(ContainSubstring(t.ns + "/missing"))

		Eventually(func(g Gomega) {
			g.Expect(gauge(g, reg, "hookwarden_subscription_ready", map[string]string{"namespace": t.ns, "name": "stalled", "provider": "stripe"})).To(Equal(ptrTo(0.0)))
			g.Expect(gauge(g, reg, "hookwarden_subscription_ready", map[string]string{"namespace": t.ns, "name": "ready"})).To(BeNil(), "no ready series while suspended")
			g.Expect(gauge(g, reg, "hookwarden_subscription_ready", map[string]string{"namespace": t.ns, "name": "born-suspended"})).To(BeNil())
		}).Should(Succeed())

		// Resumed: the edit made while suspended is applied in place.
		patchSpec(ready, func(s *hookv1.WebhookSubscription) { s.Spec.Suspend = false })
		Expect(expectReady(ready).Status.EndpointID).To(Equal(id))
		Eventually(func(g Gomega) {
			g.Expect(t.endpoints()[0].EnabledEvents).To(ConsistOf("invoice.paid"))
			g.Expect(gauge(g, reg, "hookwarden_subscription_ready", map[string]string{"namespace": t.ns, "name": "ready", "provider": "stripe"})).To(Equal(ptrTo(1.0)))
		}).Should(Succeed())
		for _, s := range []*hookv1.WebhookSubscription{ready, stalled, born} {
			u := unstructuredOf(s)
			res, err := status.Compute(u)
			Expect(err).NotTo(HaveOccurred())
			fmt.Printf("\nREPORT kstatus %s (suspend=%v, Ready=%s/%s): %s: %s\n", s.Name, get(Default, s).Spec.Suspend,
				jsonpathReady(u, "status"), jsonpathReady(u, "reason"), res.Status, res.Message)
		}
		patchSpec(born, func(s *hookv1.WebhookSubscription) { s.Spec.Description = "edited while suspended" })
		expectSuspended(born)
		Expect(kstatus(born)).To(Equal(status.CurrentStatus))
		fmt.Printf("\nREPORT kstatus born-suspended after a spec edit while suspended (generation %d): %s\n", get(Default, born).Generation, kstatus(born))
	})

	It("reconcile.fluxcd.io/requestedAt reconciles now, reading the provider afresh", func() {
		t := newTenant()
		s := t.sub("now", "https://hooks.example.com/ops/now")
		s.Spec.ResyncInterval = &metav1.Duration{Duration: time.Hour}
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		old := expectReady(s).Status.EndpointID
		// Deleted at the provider behind the manager's back: the account's shared list (younger
		// than its 30s) still shows it, and the next resync is an hour away.
		Expect(t.srv.Remove(t.apiKey, old)).To(BeTrue())
		lists := t.lists()
		const at = "2026-01-02T03:04:05Z"
		Expect(k8s.Patch(suiteCtx, s, client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, hookv1.AnnotationReconcileRequestedAt, at)))).To(Succeed())
		Eventually(func(g Gomega) {
			got := get(g, s)
			g.Expect(got.Status.LastHandledReconcileAt).To(Equal(at))
			g.Expect(got.Status.EndpointID).NotTo(Equal(old))
			g.Expect(condition(got, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(t.endpoints()).To(HaveLen(1), "recreated at once")
		Expect(t.lists()).To(BeNumerically(">", lists), "a fresh list")
		// Handled once: the same value asks for nothing more.
		creates := t.creates()
		Consistently(t.creates).WithTimeout(3 * time.Second).Should(Equal(creates))
	})

	It("metrics: provider requests by result (snake_case), their duration, rate-limit waits, Ready per subscription", func() {
		srv := fake.New()
		url, stop := srv.Start()
		defer stop()
		t := newTenantOn(srv, url)
		stripeSeries := map[string]string{"provider": "stripe"}
		Expect(counter(Default, reg, "hookwarden_provider_rate_limited_total", stripeSeries)).NotTo(BeNil(), "the rate-limit series exists from the start")
		before := *counter(Default, reg, "hookwarden_provider_rate_limited_total", stripeSeries)

		s := t.sub("metered", "https://hooks.example.com/ops/metered")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		remove := srv.Inject(fake.Fault{Method: "GET", PathPrefix: "/v1/webhook_endpoints", Status: 429, Code: "rate_limit", Times: 2})
		defer remove()
		Expect(k8s.Patch(suiteCtx, s, client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"rate-limit-me"}}}`, hookv1.AnnotationReconcileRequestedAt)))).To(Succeed())
		Eventually(func(g Gomega) {
			got := get(g, s)
			g.Expect(got.Status.LastHandledReconcileAt).To(Equal("rate-limit-me"))
			g.Expect(condition(got, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(*counter(g, reg, "hookwarden_provider_rate_limited_total", stripeSeries)).To(BeNumerically(">=", before+2))
			g.Expect(counter(g, reg, "hookwarden_provider_requests_total", map[string]string{"provider": "stripe", "operation": "list", "result": "rate_limited"})).To(HaveValue(BeNumerically(">=", 2)))
			g.Expect(gauge(g, reg, "hookwarden_subscription_ready", map[string]string{"namespace": t.ns, "name": "metered", "provider": "stripe"})).To(Equal(ptrTo(1.0)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(counter(Default, reg, "hookwarden_provider_requests_total", map[string]string{"provider": "stripe", "operation": "create", "result": "ok"})).To(HaveValue(BeNumerically(">=", 1)))

		families, err := reg.Gather()
		Expect(err).NotTo(HaveOccurred())
		var histogram *dto.Histogram
		snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
		for _, f := range families {
			for _, m := range f.Metric {
				labels := labelMap(m)
				Expect(labels).NotTo(HaveKey("outcome"), "%s: the label is result, as in the receiver", f.GetName())
				if r, ok := labels["result"]; ok {
					Expect(r).To(MatchRegexp(snake.String()), "%s{result=%q}", f.GetName(), r)
				}
				if f.GetName() == "hookwarden_provider_request_duration_seconds" && labels["operation"] == "list" && labels["result"] == "ok" && labels["provider"] == "stripe" {
					histogram = m.Histogram
				}
			}
		}
		Expect(histogram).NotTo(BeNil())
		Expect(histogram.GetSampleCount()).To(BeNumerically(">=", 1))
		Expect(histogram.GetSampleSum()).To(BeNumerically(">", 0))
		fmt.Printf("\nREPORT manager metrics: list ok %d requests, %.3fs in all; rate-limited %v -> %v\n", histogram.GetSampleCount(), histogram.GetSampleSum(),
			before, *counter(Default, reg, "hookwarden_provider_rate_limited_total", stripeSeries))

		Expect(k8s.Delete(suiteCtx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(gauge(g, reg, "hookwarden_subscription_ready", map[string]string{"namespace": t.ns, "name": "metered"})).To(BeNil(), "a deleted subscription leaves no series")
		}).Should(Succeed())
	})

	It("logs: provider writes at info with subscription, provider, endpointID and reason; user errors at info, never as errors with stack traces", func() {
		t := newTenant()
		s := t.sub("audited", "https://hooks.example.com/ops/audited")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		// A signing Secret deleted by hand: Stripe replays the original create (same parameters,
		// so before any edit).
		Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: s.Spec.SigningSecret.Name}})).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(signingSecret(g, s).Data).To(HaveKey(hookv1.SecretKeyCurrent)) }).Should(Succeed())
		patchSpec(s, func(s *hookv1.WebhookSubscription) { s.Spec.Events = []string{"invoice.paid"} })
		Eventually(func(g Gomega) { g.Expect(t.endpoints()[0].EnabledEvents).To(ConsistOf("invoice.paid")) }).Should(Succeed())
		// A new URL: created, the old one pruned as stale.
		patchSpec(s, func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "https://hooks.example.com/ops/audited-2" })
		Eventually(func(g Gomega) {
			eps := t.endpoints()
			g.Expect(eps).To(HaveLen(1))
			g.Expect(eps[0].URL).To(HaveSuffix("/audited-2"))
		}).Should(Succeed())
		orphan := t.sub("orphan", "https://hooks.example.com/ops/orphan")
		orphan.Spec.Policies.Deletion = hookv1.DeletionOrphan
		Expect(k8s.Create(suiteCtx, orphan)).To(Succeed())
		expectReady(orphan)
		for _, d := range []*hookv1.WebhookSubscription{s, orphan} {
			Expect(k8s.Delete(suiteCtx, d)).To(Succeed())
		}
		nocreds := t.sub("nocreds", "https://hooks.example.com/ops/nocreds")
		nocreds.Spec.Provider.CredentialsRef.Name = "missing"
		Expect(k8s.Create(suiteCtx, nocreds)).To(Succeed())
		srv := fake.New()
		url, stop := srv.Start()
		defer stop()
		refused := newTenantOn(srv, url)
		srv.Inject(fake.Fault{Method: "POST", PathPrefix: "/v1/webhook_endpoints", Status: 400, Code: "url_invalid", Message: "Invalid URL: must be publicly accessible."})
		rejected := refused.sub("rejected", "https://hooks.example.com/ops/rejected")
		Expect(k8s.Create(suiteCtx, rejected)).To(Succeed())

		writes := func(g Gomega) map[string]logLine {
			out := map[string]logLine{}
			for _, l := range logLines(g, jsonLog.String()) {
				if l.str("msg") == "provider write" && strings.HasPrefix(l.str("subscription"), t.ns+"/") {
					out[l.str("action")] = l
				}
			}
			return out
		}
		Eventually(func(g Gomega) {
			g.Expect(writes(g)).To(HaveKey("orphan"))
			g.Expect(writes(g)).To(HaveKey("delete"))
			for _, sub := range []*hookv1.WebhookSubscription{nocreds, rejected} {
				g.Expect(condition(get(g, sub), hookv1.ConditionStalled)).NotTo(BeNil())
			}
		}).WithTimeout(30 * time.Second).Should(Succeed())

		w := writes(Default)
		for _, action := range []string{"create", "update", "recover-secret", "prune", "delete", "orphan"} {
			Expect(w).To(HaveKey(action), "no provider write %q logged", action)
			l := w[action]
			Expect(l.str("level")).To(Equal("info"), "%s", l)
			Expect(l.str("provider")).To(Equal("stripe"), "%s", l)
			Expect(l.str("endpointID")).To(HavePrefix("we_"), "%s", l)
			Expect(l.str("reason")).NotTo(BeEmpty(), "%s", l)
			Expect(l.str("subscription")).To(MatchRegexp(`^`+t.ns+`/(audited|orphan)$`), "%s", l)
			fmt.Printf("\nREPORT log provider write %-14s reason=%q\n", action, l.str("reason"))
		}
		Expect(w["prune"].str("reason")).To(HavePrefix("stale"))

		lines := logLines(Default, jsonLog.String())
		stalls := map[string]string{}
		for _, l := range lines {
			// The user errors: lines about nocreds and rejected, from us or controller-runtime.
			key := l.str("subscription")
			if key == "" {
				key = l.str("namespace") + "/" + l.str("name")
			}
			if key != t.ns+"/nocreds" && key != refused.ns+"/rejected" {
				continue
			}
			Expect(l.str("level")).NotTo(Equal("error"), "an expected user error logged as an error: %s", l)
			Expect(l).NotTo(HaveKey("stacktrace"), "%s", l)
			if strings.HasPrefix(l.str("msg"), "reconcile stalled") {
				stalls[l.str("subscription")] = l.str("reason")
			}
		}
		Expect(stalls).To(HaveKeyWithValue(t.ns+"/nocreds", hookv1.ReasonCredentialsNotFound))
		Expect(stalls).To(HaveKeyWithValue(refused.ns+"/rejected", hookv1.ReasonProviderRejected))
	})
})

// expectSuspended waits until the subscription's status says it is suspended for its current
// generation.
func expectSuspended(s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	var out *hookv1.WebhookSubscription
	Eventually(func(g Gomega) {
		out = get(g, s)
		g.Expect(out.Status.ObservedGeneration).To(Equal(out.Generation))
		c := condition(out, hookv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(hookv1.ReasonSuspended))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.ObservedGeneration).To(Equal(out.Generation))
		g.Expect(condition(out, hookv1.ConditionReconciling)).To(BeNil())
		g.Expect(condition(out, hookv1.ConditionStalled)).To(BeNil())
	}).Should(Succeed())
	return out
}

func patchSpec(s *hookv1.WebhookSubscription, mutate func(*hookv1.WebhookSubscription)) {
	Eventually(func(g Gomega) {
		cur := get(g, s)
		base := cur.DeepCopy()
		mutate(cur)
		g.Expect(k8s.Patch(suiteCtx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).Should(Succeed())
}

// unstructuredOf reads the subscription from the API server as kstatus sees any object.
func unstructuredOf(s *hookv1.WebhookSubscription) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hookv1.GroupVersion.WithKind("WebhookSubscription"))
	Expect(k8s.Get(suiteCtx, client.ObjectKeyFromObject(s), u)).To(Succeed())
	return u
}

func kstatus(s *hookv1.WebhookSubscription) status.Status {
	res, err := status.Compute(unstructuredOf(s))
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

func jsonpathReady(u *unstructured.Unstructured, field string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == hookv1.ConditionReady {
			v, _ := m[field].(string)
			return v
		}
	}
	return ""
}

// table returns the printer columns of the namespace's subscriptions, by name, as the API
// server renders them for kubectl get.
func table(ns string) map[string]map[string]any {
	hc, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(cfg.Host, "/")+"/apis/hookwarden.io/v1alpha1/namespaces/"+ns+"/webhooksubscriptions", nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	res, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.StatusCode).To(Equal(http.StatusOK), "%s", b)
	var tbl metav1.Table
	Expect(json.Unmarshal(b, &tbl)).To(Succeed())
	out := map[string]map[string]any{}
	for _, row := range tbl.Rows {
		cols := map[string]any{}
		for i, c := range tbl.ColumnDefinitions {
			cols[c.Name] = row.Cells[i]
		}
		out[cols["Name"].(string)] = cols
	}
	return out
}

type logLine map[string]any

func (l logLine) str(k string) string {
	v, _ := l[k].(string)
	return v
}

func (l logLine) String() string {
	b, _ := json.Marshal(map[string]any(l))
	return string(b)
}

func logLines(g Gomega, text string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l logLine
		g.Expect(json.Unmarshal(sc.Bytes(), &l)).To(Succeed(), "not a JSON log line: %s", sc.Text())
		out = append(out, l)
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.Label {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// series returns the metric of family name whose labels include want (nil when none).
func series(g Gomega, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			labels := labelMap(m)
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

func gauge(g Gomega, reg *prometheus.Registry, name string, want map[string]string) *float64 {
	if m := series(g, reg, name, want); m != nil {
		return ptrTo(m.GetGauge().GetValue())
	}
	return nil
}

func counter(g Gomega, reg *prometheus.Registry, name string, want map[string]string) *float64 {
	if m := series(g, reg, name, want); m != nil {
		return ptrTo(m.GetCounter().GetValue())
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
