package charts_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/internal/testtier"
)

// The chart's CRD and the manager's rules are copies of what controller-gen generates
// (make chart-sync): they follow every API or marker change, or this fails.
func TestChartFollowsGeneratedFiles(t *testing.T) {
	testtier.RequiresServers(t, "helm")
	pairs := map[string]string{filepath.Join("..", "config", "rbac", "role.yaml"): filepath.Join(chartDir, "files", "manager-role.yaml")}
	gen, err := filepath.Glob(filepath.Join("..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	for _, g := range gen {
		pairs[g] = filepath.Join(chartDir, "files", "crds", filepath.Base(g))
	}
	copies, _ := filepath.Glob(filepath.Join(chartDir, "files", "crds", "*.yaml"))
	if len(copies) != len(gen) {
		t.Errorf("%d CRDs in the chart, %d generated: run make chart-sync", len(copies), len(gen))
	}
	for src, dst := range pairs {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Errorf("%s: %v (run make chart-sync)", dst, err)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the generated %s: run make chart-sync", dst, src)
		}
	}
	if _, err := os.Stat(filepath.Join(chartDir, "crds")); err == nil {
		t.Errorf("%s/crds exists: Helm installs it once and never upgrades it; the CRDs are templates (files/crds)", chartDir)
	}
	// The rendered CRD is the generated one, plus the release's labels and, with crds.keep,
	// helm.sh/resource-policy: keep.
	for _, c := range []struct {
		set  []string
		keep bool
	}{{nil, true}, {[]string{"crds.keep=false"}, false}} {
		r := render(t, "hw", "hw-system", c.set...)
		for _, g := range gen {
			b, _ := os.ReadFile(g)
			var want map[string]any
			if err := yaml.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			md := want["metadata"].(map[string]any)
			got := r.find("CustomResourceDefinition", md["name"].(string))
			if got == nil {
				t.Fatalf("%v: the CRD %s is not rendered", c.set, md["name"])
			}
			if diff := cmp.Diff(want["spec"], got.Object["spec"]); diff != "" {
				t.Errorf("%v: the rendered CRD spec differs from %s (-want +got)\n%s", c.set, g, diff)
			}
			if keep := got.GetAnnotations()["helm.sh/resource-policy"] == "keep"; keep != c.keep {
				t.Errorf("%v: helm.sh/resource-policy keep: %v, want %v", c.set, keep, c.keep)
			}
		}
	}
	if r := render(t, "hw", "hw-system", "crds.enabled=false"); r.kinds()["CustomResourceDefinition"] != 0 {
		t.Error("crds.enabled=false still renders a CRD")
	}
}

func TestHelmLint(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	for _, set := range [][]string{
		nil,
		{"receiver.store.type=postgres", "receiver.store.postgres.dsnSecret.name=db", "receiver.replicas=3", "receiver.ingress.enabled=true"},
		{"receiver.store.type=redis", "receiver.store.redis.dsnSecret.name=rd", "receiver.store.redis.passwordSecret.name=rd-pw", "receiver.replicas=3"},
		{"watchNamespaces={team-a}", "clusterName=team", "metrics.secure=false", "rbac.aggregateToDefaultRoles=false"},
	} {
		args := []string{"lint", "--strict", chartDir, "--kube-version", kubeVersion, "--set", "image.registry=" + testRegistry}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := runCmd(t, nil, helmBin, args...); err != nil {
			t.Errorf("helm lint %v: %v\n%s", set, err, out)
		}
	}
}

// Values that cannot work fail at render with a message naming the key and what it allows:
// values.schema.json for types, enums, ranges and unknown keys (Helm prints the JSON pointer of
// the key), the templates for what depends on several values.
func TestBadValuesFailAtRender(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	cases := []struct {
		reason string
		set    []string
		want   string
	}{
		{"SQLite has one writer on one volume", []string{"receiver.replicas=2"},
			"receiver.replicas=2 with receiver.store.type=sqlite"},
		{"PostgreSQL needs its DSN from a Secret", []string{"receiver.store.type=postgres"},
			"receiver.store.type=postgres needs receiver.store.postgres.dsnSecret.name"},
		{"an unknown store", []string{"receiver.store.type=mongodb"}, "at '/receiver/store/type': value must be one of 'sqlite', 'postgres', 'redis'"},
		{"Redis needs its DSN from a Secret", []string{"receiver.store.type=redis"},
			"receiver.store.type=redis needs receiver.store.redis.dsnSecret.name"},
		{"a promise the receiver does not know", []string{"receiver.store.type=redis", "receiver.store.redis.dsnSecret.name=rd", "receiver.store.redis.promise=eventually"},
			"at '/receiver/store/redis/promise': value must be one of 'strict', 'at-least-once', 'best-effort'"},
		{"a password Secret without its key", []string{"receiver.store.type=redis", "receiver.store.redis.dsnSecret.name=rd", "receiver.store.redis.passwordSecret.name=pw", "receiver.store.redis.passwordSecret.key="},
			"receiver.store.redis.passwordSecret.key must name the key"},
		{"a NetworkPolicy that would shut Redis out", []string{"receiver.store.type=redis", "receiver.store.redis.dsnSecret.name=rd", "receiver.store.redis.ports=null"},
			"receiver.store.redis.ports must list the ports"},
		{"no receiver replica", []string{"receiver.replicas=0"}, "at '/receiver/replicas': minimum: got 0, want 1"},
		{"kube-system is never watched", []string{"watchNamespaces={shop,kube-system}"}, "watchNamespaces must not include kube-system"},
		// The cases: a string where a boolean belongs would have rendered port 8443 and
		// an https ServiceMonitor while the binary got --metrics-secure=false.
		{"metrics.secure as a string", []string{"--set-string=metrics.secure=false"}, "at '/metrics/secure': got string, want boolean"},
		{"a replica count that is not a number", []string{"manager.replicas=two"}, "at '/manager/replicas': got string, want integer"},
		{"resources that are not resources", []string{"manager.resources=big"}, "at '/manager/resources': got string, want object"},
		{"a quantity that is not one", []string{"receiver.resources.limits.memory=lots"}, "at '/receiver/resources/limits/memory'"},
		{"an unknown key (a typo)", []string{"manager.replica=2"}, "at '/manager': additional properties 'replica' not allowed"},
		{"an unknown top-level key", []string{"recevier.enabled=false"}, "at '': additional properties 'recevier' not allowed"},
		{"a pull policy Kubernetes does not know", []string{"image.receiver.pullPolicy=Sometimes"}, "at '/image/receiver/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		{"a port out of range", []string{"networkPolicy.managerEgressPorts={443,70000}"}, "at '/networkPolicy/managerEgressPorts/1': maximum: got 70,000, want 65,535"},
		{"no image registry: nothing publishes hookwarden/manager", []string{"image.registry="}, "image.registry is empty: set it to where you pushed the images"},
		{"a rolling update of the SQLite receiver (two writers on one volume)", []string{"receiver.strategy.type=RollingUpdate"},
			"receiver.strategy.type=RollingUpdate with receiver.store.type=sqlite"},
		{"a fullnameOverride that is no name", []string{"fullnameOverride=Hooks_1"}, "at '/fullnameOverride'"},
		{"a receiver Service of an unknown type", []string{"receiver.service.type=Ingress"}, "at '/receiver/service/type': value must be one of 'ClusterIP', 'NodePort', 'LoadBalancer'"},
		{"an existing ServiceAccount without its name", []string{"manager.serviceAccount.create=false"}, "manager.serviceAccount.create=false needs manager.serviceAccount.name"},
		// The ValidatingAdmissionPolicy is admissionregistration.k8s.io/v1 from 1.30.
		{"a Kubernetes version below the chart's", []string{"--kube-version=1.28.0"}, "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.28.0"},
	}
	for _, c := range cases {
		_, err := helmTemplate(t, "hw", "hw-system", c.set...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: helm template %v: %v, want an error containing %q", c.reason, c.set, err, c.want)
			continue
		}
		if strings.HasPrefix(c.want, "at '") {
			t.Logf("REPORT schema refusal (%s): %s", c.reason, c.want)
		}
	}
}

type rendered struct {
	objs  []*unstructured.Unstructured
	other [][]byte // monitoring.coreos.com: its CRDs are not in envtest
	rest  []byte   // everything the API server can check
}

func render(t *testing.T, release, ns string, set ...string) rendered {
	t.Helper()
	out, err := helmTemplate(t, release, ns, set...)
	if err != nil {
		t.Fatal(err)
	}
	return parseRendered(t, out)
}

// parseRendered splits helm template's output into objects.
func parseRendered(t *testing.T, out []byte) rendered {
	t.Helper()
	var r rendered
	var rest bytes.Buffer
	for _, d := range splitDocs(out) {
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, d)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		r.objs = append(r.objs, u)
		if strings.HasPrefix(u.GetAPIVersion(), "monitoring.coreos.com/") {
			r.other = append(r.other, d)
			continue
		}
		rest.WriteString("---\n")
		rest.Write(bytes.TrimPrefix(bytes.TrimSpace(d), []byte("---")))
		rest.WriteString("\n")
	}
	r.rest = rest.Bytes()
	return r
}

func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r rendered) kinds() map[string]int {
	k := map[string]int{}
	for _, o := range r.objs {
		k[o.GetKind()]++
	}
	return k
}

// helm template | kubectl apply --dry-run=server: the API server validates every object
// (schemas, admission, the CRD's CEL rules) without keeping any.
func TestTemplateAppliesToAPIServer(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	ensureNamespace(t, "hw-system")
	ensureNamespace(t, "team-a")
	ensureNamespace(t, "team-system")
	sets := []struct {
		name, release, ns string
		set               []string
		check             func(t *testing.T, r rendered)
	}{
		{"defaults: cluster mode, SQLite receiver", "hw", "hw-system", nil, func(t *testing.T, r rendered) {
			d := r.find("Deployment", "hw-hookwarden-receiver")
			if r.find("CustomResourceDefinition", "webhooksubscriptions.hookwarden.io") == nil {
				t.Error("no CRD rendered: crds.enabled is the default")
			}
			for _, c := range []struct{ d, want string }{{"hw-hookwarden-manager", "manager"}, {"hw-hookwarden-receiver", "receiver"}} {
				if got := podField(r.find("Deployment", c.d), "containers", 0, "image"); got != testRegistry+"/"+c.want+":0.1.0" {
					t.Errorf("%s image %v, want %s/%s:<appVersion>", c.d, got, testRegistry, c.want)
				}
			}
			for _, a := range []struct {
				d    *unstructured.Unstructured
				want string
			}{{d, "--receiver-namespace=hw-system"}, {r.find("Deployment", "hw-hookwarden-manager"), "--receiver-namespace=hw-system"}} {
				if !slices.Contains(containerArgs(t, a.d), a.want) {
					t.Errorf("%s args %v lack %s", a.d.GetName(), containerArgs(t, a.d), a.want)
				}
			}
			if p := r.find("Pod", "hw-hookwarden-test-receiver"); p == nil || p.GetAnnotations()["helm.sh/hook"] != "test" {
				t.Errorf("no helm test pod: %v", p)
			}
			if s, _, _ := unstructured.NestedString(d.Object, "spec", "strategy", "type"); s != "Recreate" {
				t.Errorf("SQLite receiver strategy %q, want Recreate", s)
			}
			if r.find("PersistentVolumeClaim", "hw-hookwarden-receiver-data") == nil {
				t.Error("no PVC for the SQLite store")
			}
			if r.find("PodDisruptionBudget", "hw-hookwarden-manager") == nil {
				t.Error("no PodDisruptionBudget for the manager")
			}
			m := r.find("Deployment", "hw-hookwarden-manager")
			spread, _, _ := unstructured.NestedSlice(m.Object, "spec", "template", "spec", "topologySpreadConstraints")
			if len(spread) != 2 {
				t.Errorf("manager topology spread constraints: %d, want hostname and zone", len(spread))
			}
			for _, a := range containerArgs(t, m) {
				if strings.HasPrefix(a, "--cluster-name") {
					t.Errorf("manager has %s: the default must be the kube-system UID", a)
				}
			}
			if r.find("ClusterRole", "hw-hookwarden-cluster-name") == nil {
				t.Error("no get on namespaces/kube-system for the default cluster name")
			}
			for _, k := range []string{"Role", "ClusterRole", "NetworkPolicy", "ValidatingAdmissionPolicy"} {
				if r.kinds()[k] == 0 {
					t.Errorf("no %s rendered", k)
				}
			}
		}},
		{"PostgreSQL receiver with 3 replicas, ingress, monitoring", "hw", "hw-system", []string{
			"receiver.store.type=postgres", "receiver.store.postgres.dsnSecret.name=hw-db", "receiver.replicas=3",
			"receiver.ingress.enabled=true", "receiver.ingress.tls[0].secretName=hooks-tls", "receiver.ingress.tls[0].hosts[0]=hooks.example.com",
			"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true",
			// A cluster with the Prometheus Operator's CRDs (helm install passes the server's).
			"--api-versions=monitoring.coreos.com/v1/ServiceMonitor", "--api-versions=monitoring.coreos.com/v1/PrometheusRule",
			"clusterName=prod-eu-1", "manager.receiverBaseURL=https://hooks.example.com",
		}, func(t *testing.T, r rendered) {
			d := r.find("Deployment", "hw-hookwarden-receiver")
			strategy, _, _ := unstructured.NestedMap(d.Object, "spec", "strategy")
			want := map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": float64(0), "maxSurge": float64(1)}}
			if diff := cmp.Diff(want, strategy); diff != "" {
				t.Errorf("PostgreSQL receiver strategy (-want +got)\n%s", diff)
			}
			for _, a := range containerArgs(t, d) {
				if strings.Contains(a, "postgres") || strings.HasPrefix(a, "--store") {
					t.Errorf("receiver arg %q: the DSN must come from the Secret through the environment", a)
				}
			}
			if r.find("PodDisruptionBudget", "hw-hookwarden-receiver") == nil || r.find("Ingress", "hw-hookwarden-receiver") == nil {
				t.Error("no receiver PodDisruptionBudget or Ingress")
			}
			if r.find("ClusterRole", "hw-hookwarden-cluster-name") != nil {
				t.Error("clusterName is set, yet the manager may still read kube-system")
			}
			if len(r.other) != 3 {
				t.Errorf("%d monitoring objects, want 2 ServiceMonitors and 1 PrometheusRule", len(r.other))
			}
			checkPrometheusRule(t, r.find("PrometheusRule", "hw-hookwarden"))
		}},
		{"Redis receiver with 3 replicas, a password Secret, a weaker promise", "hw", "hw-system", []string{
			"receiver.store.type=redis", "receiver.store.redis.dsnSecret.name=hw-redis", "receiver.store.redis.passwordSecret.name=hw-redis-pw",
			"receiver.store.redis.promise=at-least-once", "receiver.store.redis.ports={6379,7000}", "receiver.replicas=3",
		}, func(t *testing.T, r rendered) {
			d := r.find("Deployment", "hw-hookwarden-receiver")
			if s, _, _ := unstructured.NestedString(d.Object, "spec", "strategy", "type"); s != "RollingUpdate" {
				t.Errorf("Redis receiver strategy %q, want RollingUpdate", s)
			}
			args := strings.Join(containerArgs(t, d), " ")
			for _, want := range []string{"--store-promise=at-least-once", "--store-password-file=/etc/hookwarden/store-password/password"} {
				if !strings.Contains(args, want) {
					t.Errorf("receiver args %q lack %s", args, want)
				}
			}
			if strings.Contains(args, "redis://") || strings.Contains(args, "--store=") {
				t.Errorf("receiver args %q: the DSN must come from the Secret through the environment", args)
			}
			cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			env, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "env")
			wantEnv := []any{map[string]any{"name": "HOOKWARDEN_STORE", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "hw-redis", "key": "dsn"}}}}
			if diff := cmp.Diff(wantEnv, env); diff != "" {
				t.Errorf("receiver env (-want +got)\n%s", diff)
			}
			vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
			if len(vols) != 1 || vols[0].(map[string]any)["secret"].(map[string]any)["secretName"] != "hw-redis-pw" {
				t.Errorf("receiver volumes %v, want the password Secret only", vols)
			}
			if r.find("PodDisruptionBudget", "hw-hookwarden-receiver") == nil || r.find("PersistentVolumeClaim", "hw-hookwarden-receiver-data") != nil {
				t.Error("want a receiver PodDisruptionBudget and no PVC")
			}
			np, _ := yaml.Marshal(r.find("NetworkPolicy", "hw-hookwarden-receiver").Object)
			for _, port := range []string{"port: 6379", "port: 7000"} {
				if !strings.Contains(string(np), port) {
					t.Errorf("the receiver's NetworkPolicy does not open %s:\n%s", port, np)
				}
			}
		}},
		{"a corporate cluster: proxy, priority, IRSA-style annotations, pod labels, OpenShift's UIDs, a pinned digest", "hw", "hw-system", []string{
			"manager.extraEnv[0].name=HTTPS_PROXY", "manager.extraEnv[0].value=http://proxy.corp:3128",
			"manager.envFrom[0].configMapRef.name=corp-proxy", "receiver.extraEnv[0].name=NO_PROXY", "receiver.extraEnv[0].value=.svc",
			"manager.priorityClassName=platform-critical", "receiver.priorityClassName=platform-critical",
			"manager.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/hw",
			"manager.podLabels.team=platform", "receiver.podLabels.team=platform", "--set-string=receiver.podAnnotations.sidecar\\.istio\\.io/inject=false",
			"manager.podSecurityContext.runAsUser=null", "manager.podSecurityContext.runAsGroup=null",
			"receiver.podSecurityContext.runAsUser=null", "receiver.podSecurityContext.runAsGroup=null", "receiver.podSecurityContext.fsGroup=null",
			"networkPolicy.managerEgressPorts={443,3128}", "networkPolicy.extraEgress[0].to[0].ipBlock.cidr=10.1.2.3/32", "networkPolicy.extraEgress[0].ports[0].port=3128",
			"image.manager.digest=sha256:" + strings.Repeat("ab", 32), "image.receiver.repository=mirror.corp/hw/receiver", "image.receiver.tag=0.1.0-corp",
		}, func(t *testing.T, r rendered) {
			m, rc := r.find("Deployment", "hw-hookwarden-manager"), r.find("Deployment", "hw-hookwarden-receiver")
			for _, c := range []struct {
				what string
				got  any
				want any
			}{
				{"manager env", podField(m, "containers", 0, "env"), []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy.corp:3128"}}},
				{"manager envFrom", podField(m, "containers", 0, "envFrom"), []any{map[string]any{"configMapRef": map[string]any{"name": "corp-proxy"}}}},
				{"receiver env", podField(rc, "containers", 0, "env"), []any{map[string]any{"name": "NO_PROXY", "value": ".svc"}}},
				{"manager priorityClassName", podField(m, "priorityClassName"), "platform-critical"},
				{"receiver priorityClassName", podField(rc, "priorityClassName"), "platform-critical"},
				{"manager pod securityContext (OpenShift assigns the UID)", podField(m, "securityContext"), map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}},
				{"receiver pod securityContext", podField(rc, "securityContext"), map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}},
				{"manager image", podField(m, "containers", 0, "image"), testRegistry + "/manager@sha256:" + strings.Repeat("ab", 32)},
				{"receiver image", podField(rc, "containers", 0, "image"), "mirror.corp/hw/receiver:0.1.0-corp"},
				{"manager pod label", podMeta(m, "labels")["team"], "platform"},
				{"receiver pod annotation", podMeta(rc, "annotations")["sidecar.istio.io/inject"], "false"},
				{"manager ServiceAccount annotation", r.find("ServiceAccount", "hw-hookwarden-manager").GetAnnotations()["eks.amazonaws.com/role-arn"], "arn:aws:iam::1:role/hw"},
			} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%s (-want +got)\n%s", c.what, diff)
				}
			}
			np, _ := yaml.Marshal(r.find("NetworkPolicy", "hw-hookwarden-manager").Object)
			for _, want := range []string{"port: 3128", "cidr: 10.1.2.3/32"} {
				if !strings.Contains(string(np), want) {
					t.Errorf("the manager's NetworkPolicy lacks %s:\n%s", want, np)
				}
			}
		}},
		{"a platform team's extension points", "hw", "hw-system", []string{"--values=" + writeFile(t, "platform.yaml", platformValues)}, checkPlatformValues},
		{"namespaced: one team namespace, no cluster rights", "team", "team-system", []string{
			"watchNamespaces={team-a}", "clusterName=team", "metrics.secure=false", "rbac.aggregateToDefaultRoles=false", "crds.enabled=false",
		}, func(t *testing.T, r rendered) {
			for _, o := range r.objs {
				if o.GetNamespace() == "" {
					t.Errorf("cluster-scoped %s %s rendered in namespaced mode", o.GetKind(), o.GetName())
				}
			}
			if r.find("Role", "team-hookwarden-manager") == nil || r.find("Role", "team-hookwarden-receiver") == nil {
				t.Error("no Roles for the manager and the receiver")
			}
		}},
	}
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			r := render(t, s.release, s.ns, s.set...)
			s.check(t, r)
			out := kubectl(t, r.rest, "apply", "--dry-run=server", "-f", "-")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, l := range lines {
				if !strings.HasSuffix(l, "(server dry run)") {
					t.Errorf("kubectl: %s", l)
				}
				t.Logf("REPORT helm template (%s) | kubectl apply --dry-run=server: %s", s.name, l)
			}
			if want := len(r.objs) - len(r.other); len(lines) != want {
				t.Errorf("the API server accepted %d objects, %d rendered", len(lines), want)
			}
		})
	}
}

// podField returns a field of a Deployment's pod spec; ints index lists.
func podField(d *unstructured.Unstructured, path ...any) any {
	cur := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"]
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := cur.(map[string]any)
			cur = m[k]
		case int:
			l, _ := cur.([]any)
			if k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

// podMeta returns the labels or annotations of a Deployment's pod template.
func podMeta(d *unstructured.Unstructured, field string) map[string]string {
	m, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", field)
	return m
}

func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s has no containers", d.GetName())
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

// The PrometheusRule carries exactly the rule file promtool checks.
func checkPrometheusRule(t *testing.T, pr *unstructured.Unstructured) {
	t.Helper()
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want["groups"], pr.Object["spec"].(map[string]any)["groups"]); diff != "" {
		t.Errorf("PrometheusRule spec differs from files/alerts.yaml (-want +got)\n%s", diff)
	}
}
