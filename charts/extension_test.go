package charts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hookwarden/hookwarden/internal/testtier"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// What platform teams fork charts for, set as values: a corporate CA bundle the manager
// trusts, a metrics certificate, names, labels, annotations, spread, probes, rollout, budget,
// the receiver's Service, an extra object.
const platformValues = `
fullnameOverride: hooks
commonLabels: {team: platform, cost-center: "42"}
extraObjects:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: '{{ include "hookwarden.fullname" . }}-corp-ca', namespace: '{{ .Release.Namespace }}'}
  data: {corp.crt: "-----BEGIN CERTIFICATE-----"}
- |
  apiVersion: v1
  kind: ConfigMap
  metadata: {name: {{ .Release.Name }}-as-text, namespace: {{ .Release.Namespace }}}
manager:
  deploymentAnnotations: {reloader.stakater.com/auto: "true"}
  revisionHistoryLimit: 3
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  livenessProbe: {initialDelaySeconds: 30, timeoutSeconds: 5}
  topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  extraEnv: [{name: SSL_CERT_DIR, value: /etc/ssl/certs:/etc/corp-ca}]
  extraVolumes: [{name: corp-ca, configMap: {name: hooks-corp-ca}}]
  extraVolumeMounts: [{name: corp-ca, mountPath: /etc/corp-ca, readOnly: true}]
  extraArgs: [--metrics-cert-path=/etc/metrics-tls]
  podDisruptionBudget: {maxUnavailable: 1}
receiver:
  deploymentAnnotations: {reloader.stakater.com/auto: "true"}
  revisionHistoryLimit: 2
  readinessProbe: {periodSeconds: 2, failureThreshold: 6}
  extraVolumes: [{name: metrics-tls, secret: {secretName: hooks-metrics-tls}}]
  extraVolumeMounts: [{name: metrics-tls, mountPath: /etc/metrics-tls, readOnly: true}]
  service:
    type: LoadBalancer
    annotations: {service.beta.kubernetes.io/aws-load-balancer-internal: "true"}
metrics:
  serviceMonitor:
    enabled: true
    force: true
    namespace: monitoring
    scrapeTimeout: 10s
    relabelings: [{action: replace, targetLabel: cluster, replacement: prod-eu-1}]
    tlsConfig: {ca: {secret: {name: hooks-metrics-tls, key: ca.crt}}, serverName: hooks-manager-metrics.hw-system.svc}
`

func checkPlatformValues(t *testing.T, r rendered) {
	t.Helper()
	m, rc := r.find("Deployment", "hooks-manager"), r.find("Deployment", "hooks-receiver")
	if m == nil || rc == nil {
		t.Fatalf("fullnameOverride=hooks: no Deployments hooks-manager and hooks-receiver in %v", r.kinds())
	}
	for _, o := range r.objs {
		if o.GetKind() == "ConfigMap" && o.GetLabels() == nil {
			continue // extraObjects: the user's, as written
		}
		if l := o.GetLabels(); l["team"] != "platform" || l["cost-center"] != "42" || l["app.kubernetes.io/part-of"] != "hookwarden" {
			t.Errorf("%s %s labels %v: want commonLabels and the chart's", o.GetKind(), o.GetName(), l)
		}
	}
	field := func(o *unstructured.Unstructured, path ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
		return v
	}
	sm := r.find("ServiceMonitor", "hooks-manager")
	if sm == nil {
		t.Fatal("serviceMonitor.force: no ServiceMonitor rendered")
	}
	endpoint := field(sm, "spec", "endpoints").([]any)[0].(map[string]any)
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"manager Deployment annotations", m.GetAnnotations(), map[string]string{"reloader.stakater.com/auto": "true"}},
		{"manager revisionHistoryLimit", field(m, "spec", "revisionHistoryLimit"), float64(3)},
		{"receiver revisionHistoryLimit", field(rc, "spec", "revisionHistoryLimit"), float64(2)},
		{"manager strategy", field(m, "spec", "strategy"), map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": float64(0), "maxSurge": float64(1)}}},
		{"receiver strategy (SQLite)", field(rc, "spec", "strategy"), map[string]any{"type": "Recreate"}},
		{"manager liveness probe", podField(m, "containers", 0, "livenessProbe"), map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "probes"}, "initialDelaySeconds": float64(30), "timeoutSeconds": float64(5)}},
		{"receiver readiness probe", podField(rc, "containers", 0, "readinessProbe"), map[string]any{"httpGet": map[string]any{"path": "/readyz", "port": "probes"}, "periodSeconds": float64(2), "failureThreshold": float64(6)}},
		{"manager spread", podField(m, "topologySpreadConstraints"), []any{map[string]any{"maxSkew": float64(2), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "hookwarden-manager", "app.kubernetes.io/instance": "hw"}}}}},
		{"manager volumes", podField(m, "volumes"), []any{map[string]any{"name": "corp-ca", "configMap": map[string]any{"name": "hooks-corp-ca"}}}},
		{"manager mounts", podField(m, "containers", 0, "volumeMounts"), []any{map[string]any{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": true}}},
		{"receiver volumes (the data claim first)", podField(rc, "volumes"), []any{
			map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "hooks-receiver-data"}},
			map[string]any{"name": "metrics-tls", "secret": map[string]any{"secretName": "hooks-metrics-tls"}}}},
		{"receiver mounts", podField(rc, "containers", 0, "volumeMounts"), []any{
			map[string]any{"name": "data", "mountPath": "/data"},
			map[string]any{"name": "metrics-tls", "mountPath": "/etc/metrics-tls", "readOnly": true}}},
		{"manager PodDisruptionBudget", field(r.find("PodDisruptionBudget", "hooks-manager"), "spec", "maxUnavailable"), float64(1)},
		{"receiver Service type", field(r.find("Service", "hooks-receiver"), "spec", "type"), "LoadBalancer"},
		{"receiver Service annotations", r.find("Service", "hooks-receiver").GetAnnotations(), map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
		{"ServiceMonitor namespace", sm.GetNamespace(), "monitoring"},
		{"ServiceMonitor scrapeTimeout", endpoint["scrapeTimeout"], "10s"},
		{"ServiceMonitor relabelings", endpoint["relabelings"], []any{map[string]any{"action": "replace", "targetLabel": "cluster", "replacement": "prod-eu-1"}}},
		{"ServiceMonitor tlsConfig (verifies the certificate)", endpoint["tlsConfig"], map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "hooks-metrics-tls", "key": "ca.crt"}}, "serverName": "hooks-manager-metrics.hw-system.svc"}},
		{"ServiceMonitor still selects the release namespace", field(sm, "spec", "namespaceSelector"), map[string]any{"matchNames": []any{"hw-system"}}},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got)\n%s", c.what, diff)
		}
	}
	for _, name := range []string{"hooks-corp-ca", "hw-as-text"} {
		if r.find("ConfigMap", name) == nil {
			t.Errorf("extraObjects: no ConfigMap %s", name)
		}
	}
}

// The Prometheus Operator's objects render only where the cluster has their CRDs (helm install
// passes the server's API versions), or when forced; otherwise NOTES says why there are none
// (helm install against envtest, which has no such CRD).
func TestMonitoringFollowsTheCluster(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	on := []string{"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"}
	for _, c := range []struct {
		reason string
		set    []string
		want   int
	}{
		{"no Prometheus Operator in the cluster", on, 0},
		{"the cluster has both CRDs", append(on, "--api-versions=monitoring.coreos.com/v1/ServiceMonitor", "--api-versions=monitoring.coreos.com/v1/PrometheusRule"), 3},
		{"only ServiceMonitor's", append(on, "--api-versions=monitoring.coreos.com/v1/ServiceMonitor"), 2},
		{"forced, for a tool that renders without the cluster", append(on, "metrics.serviceMonitor.force=true", "metrics.prometheusRule.force=true"), 3},
	} {
		r := render(t, "hw", "hw-system", c.set...)
		if got := r.kinds()["ServiceMonitor"] + r.kinds()["PrometheusRule"]; got != c.want {
			t.Errorf("%s: %d monitoring objects, want %d", c.reason, got, c.want)
		}
	}
	out, err := runCmd(t, nil, helmBin, "install", "hw", chartDir, "--dry-run=client", "--kubeconfig", kubeconfig, "-n", "hw-system", "--set", "crds.enabled=false", "--set", "image.registry="+testRegistry, "--set", on[0], "--set", on[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if want := "No " + kind + " rendered: the cluster has no monitoring.coreos.com/v1 " + kind; !strings.Contains(out, want) {
			t.Errorf("NOTES do not say %q:\n%s", want, out)
		}
	}
}
