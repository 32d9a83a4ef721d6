package charts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/internal/testtier"
)

// umbrella writes a parent chart (a platform team's) that depends on ours from its folder, with
// values, and runs helm dependency build: the chart then sits in charts/ as a packaged
// subchart, exactly as an umbrella chart holds it. It returns the parent's folder.
func umbrella(t *testing.T, values string) string {
	t.Helper()
	abs, err := filepath.Abs(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var ours struct{ Version string }
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &ours); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "platform")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chart := "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n" +
		"- name: hookwarden\n  version: " + ours.Version + "\n  repository: file://" + abs + "\n"
	for name, content := range map[string]string{"Chart.yaml": chart, "values.yaml": values} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Helm's caches and repository list of its own: nothing of the machine's, nothing fetched.
	home := t.TempDir()
	t.Setenv("HELM_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("HELM_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("HELM_DATA_HOME", filepath.Join(home, "data"))
	if out, err := runCmd(t, nil, helmBin, "dependency", "build", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return dir
}

// Helm hands every subchart global: {} (and an umbrella's own global keys); the chart takes it,
// reads global.imageRegistry and global.imagePullSecrets, and the rest of the umbrella's
// values for it under hookwarden:.
func TestUmbrellaChart(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	ensureNamespace(t, "platform-system")
	cases := []struct {
		reason, values  string
		image           string
		pullSecrets     []any
		managerReplicas float64
	}{
		{"an umbrella that sets nothing global: Helm still passes global: {}",
			"hookwarden:\n  image: {registry: " + testRegistry + "}\n",
			testRegistry + "/manager:0.1.0", nil, 2},
		{"a mirror and pull secrets for every subchart, a global key of the umbrella's own, our values under hookwarden:", `
global:
  imageRegistry: mirror.corp/platform
  imagePullSecrets: [corp-pull, {name: hw-pull}]
  team: platform
hookwarden:
  image: {registry: ` + testRegistry + `}
  imagePullSecrets: [{name: hw-pull}]
  manager: {replicas: 1}
`, "mirror.corp/platform/manager:0.1.0", []any{map[string]any{"name": "hw-pull"}, map[string]any{"name": "corp-pull"}}, 1},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			dir := umbrella(t, c.values)
			out, err := runCmd(t, nil, helmBin, "template", "platform", dir, "--namespace", "platform-system", "--kube-version", kubeVersion)
			if err != nil {
				t.Fatalf("helm template of the umbrella chart: %v", err)
			}
			r := parseRendered(t, []byte(out))
			m := r.find("Deployment", "platform-hookwarden-manager")
			if m == nil {
				t.Fatalf("the umbrella rendered no manager Deployment: %v", r.kinds())
			}
			for _, w := range []struct {
				what      string
				got, want any
			}{
				{"manager image", podField(m, "containers", 0, "image"), c.image},
				{"manager replicas", m.Object["spec"].(map[string]any)["replicas"], c.managerReplicas},
				{"manager imagePullSecrets", podField(m, "imagePullSecrets"), anyOrNil(c.pullSecrets)},
				{"receiver imagePullSecrets", podField(r.find("Deployment", "platform-hookwarden-receiver"), "imagePullSecrets"), anyOrNil(c.pullSecrets)},
			} {
				if diff := cmp.Diff(w.want, w.got); diff != "" {
					t.Errorf("%s (-want +got)\n%s", w.what, diff)
				}
			}
			if p := r.find("Pod", "platform-hookwarden-test-receiver"); p == nil || !cmp.Equal(anyOrNil(c.pullSecrets), p.Object["spec"].(map[string]any)["imagePullSecrets"]) {
				t.Errorf("helm test pod %v: want imagePullSecrets %v", p, c.pullSecrets)
			}
			applied := kubectl(t, r.rest, "apply", "--dry-run=server", "-f", "-")
			if n := strings.Count(applied, "(server dry run)"); n != len(r.objs)-len(r.other) {
				t.Errorf("the API server accepted %d of the umbrella's %d objects:\n%s", n, len(r.objs)-len(r.other), applied)
			}
			t.Logf("REPORT umbrella chart (%s): %d objects, manager image %s, pull secrets %v", c.reason, len(r.objs), c.image, c.pullSecrets)
		})
	}
}

func anyOrNil(l []any) any {
	if l == nil {
		return nil
	}
	return l
}
