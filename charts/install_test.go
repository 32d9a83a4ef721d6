package charts_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/testenv"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// The documents whose commands this test runs: the install in the README, the upgrade,
// uninstall and the ways out in the operations guide.
const (
	readme     = "README.md"
	operations = "docs/operations.md"
)

// docBlock returns the shell block that follows the comment "<!-- test: <name> -->" in doc (a
// path from the repository root): the commands a user types, run here exactly as written.
func docBlock(t *testing.T, doc, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- test: " + regexp.QuoteMeta(name) + " -->\\s*```sh\\n(.*?)```")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no ```sh block after <!-- test: %s -->", doc, name)
	}
	return string(m[1])
}

// nextChart is a copy of the chart as version 0.2.0, whose CRD has one more printer column
// (Generation): an upgrade that changes the CRD.
func nextChart(t *testing.T) string {
	t.Helper()
	next := filepath.Join(t.TempDir(), "hookwarden")
	if out, err := exec.Command("cp", "-r", chartDir, next).CombinedOutput(); err != nil {
		t.Fatalf("copying the chart: %v\n%s", err, out)
	}
	chartYAML := filepath.Join(next, "Chart.yaml")
	b, _ := os.ReadFile(chartYAML)
	if err := os.WriteFile(chartYAML, bytes.Replace(b, []byte("\nversion: 0.1.0\n"), []byte("\nversion: 0.2.0\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	crdFile := filepath.Join(next, "files", "crds", "hookwarden.io_webhooksubscriptions.yaml")
	b, _ = os.ReadFile(crdFile)
	column := "    - jsonPath: .metadata.generation\n      name: Generation\n      priority: 1\n      type: integer\n"
	changed := bytes.Replace(b, []byte("  - additionalPrinterColumns:\n"), []byte("  - additionalPrinterColumns:\n"+column), 1)
	if bytes.Equal(changed, b) {
		t.Fatal("could not add a printer column to the chart's CRD")
	}
	if err := os.WriteFile(crdFile, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	return next
}

// crdColumns prints the printer columns of the cluster's CRD.
const crdColumns = "kubectl get crd/webhooksubscriptions.hookwarden.io -o jsonpath='{.spec.versions[0].additionalPrinterColumns[*].name}'"

// installCluster is a control plane of its own, without the CRD: the install, upgrade and
// uninstall tests own its cluster-wide objects.
type installCluster struct {
	kubeconfig string
	path       string // PATH with helm and kubectl first
	cfg        *rest.Config
	kube       *kubernetes.Clientset
}

func newInstallCluster(t *testing.T) *installCluster {
	t.Helper()
	dir := t.TempDir()
	noCRDs := filepath.Join(dir, "no-crds")
	if err := os.Mkdir(noCRDs, 0o755); err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.Assets("..")
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.StartWith(testenv.Options{Assets: assets, CRDs: noCRDs, Dir: dir, User: "installer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	tools := filepath.Join(dir, "tools")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, bin := range map[string]string{"helm": helmBin, "kubectl": kubectlBin} {
		if err := os.Symlink(bin, filepath.Join(tools, name)); err != nil {
			t.Fatal(err)
		}
	}
	k, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &installCluster{kubeconfig: env.Kubeconfig, path: tools + string(os.PathListSeparator) + os.Getenv("PATH"), cfg: env.Config, kube: k}
}

// sh runs script with bash -euo pipefail from the repository root, as a user would paste it.
func (c *installCluster) sh(t *testing.T, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "PATH="+c.path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (c *installCluster) must(t *testing.T, what, script string) string {
	t.Helper()
	out, err := c.sh(t, script)
	if err != nil {
		t.Fatalf("%s: %v\n$ %s\n%s", what, err, strings.TrimSpace(script), out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Logf("REPORT %s | %s", what, l)
	}
	return out
}

// The README's install commands, as written, on a cluster of their own; then (docs/operations.md)
// an upgrade to a chart whose CRD changed (applied: the CRD is a template), an uninstall that keeps
// the CRD, and the way out for subscriptions whose manager was uninstalled first. Last, the step
// for a cluster that has the CRD from a release that shipped it in crds/ (not owned by Helm).
func TestREADMEInstallUpgradeUninstall(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	c := newInstallCluster(t)
	out := c.must(t, "README install", docBlock(t, readme, "install"))
	for _, want := range []string{"STATUS: deployed", "orders", "refunds"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's install commands printed no %q:\n%s", want, out)
		}
	}
	// The ClusterRole the README tells you to bind your scraper to exists under that name.
	role := regexp.MustCompile(`--clusterrole=(\S+)`).FindStringSubmatch(docBlock(t, readme, "install"))
	if role == nil {
		t.Fatal("the README's install commands bind no scraper (--clusterrole=...)")
	}
	c.must(t, "the metrics reader role the README names", "kubectl get clusterrole "+role[1]+" -o name")
	crd := "crd/webhooksubscriptions.hookwarden.io"
	if got := c.must(t, "CRD resource policy", "kubectl get "+crd+" -o jsonpath='{.metadata.annotations.helm\\.sh/resource-policy}'"); got != "keep" {
		t.Errorf("the installed CRD's helm.sh/resource-policy: %q, want keep", got)
	}

	// Chart 0.2.0 whose CRD has one more printer column: helm upgrade changes the cluster's CRD.
	next := nextChart(t)
	before := c.must(t, "CRD printer columns before the upgrade", crdColumns)
	upgrade := strings.Replace(docBlock(t, operations, "upgrade"), "charts/hookwarden", next, 1)
	c.must(t, "docs/operations.md: upgrade to chart 0.2.0", upgrade)
	after := c.must(t, "CRD printer columns after the upgrade", crdColumns)
	if strings.Contains(before, "Generation") || !strings.Contains(after, "Generation") {
		t.Errorf("helm upgrade to a chart with a changed CRD: columns %q before, %q after; want Generation added", before, after)
	}
	if got := c.must(t, "chart version after the upgrade", "helm list -n hookwarden-system -o json"); !strings.Contains(got, `"chart":"hookwarden-0.2.0"`) {
		t.Errorf("helm list after the upgrade: %s", got)
	}

	// No manager runs here, so the subscriptions have no finalizer and go at once.
	c.must(t, "docs/operations.md: uninstall", docBlock(t, operations, "uninstall"))
	if _, err := c.sh(t, "kubectl get "+crd); err != nil {
		t.Errorf("helm uninstall deleted the CRD (and with it every subscription): %v", err)
	}
	// The manager was uninstalled before the subscriptions: they keep its finalizer (set here
	// as the manager sets it).
	c.must(t, "subscriptions left behind by an uninstalled manager", "kubectl apply -k config/samples/ && "+
		`kubectl patch whsub orders --type=merge -p '{"metadata":{"finalizers":["hookwarden.io/finalizer"]}}'`)
	c.must(t, "deleting the subscriptions without a manager", "kubectl delete whsub --all -A --wait=false")
	if got := c.must(t, "subscriptions left", "kubectl get whsub -A -o name"); !strings.Contains(got, "orders") {
		t.Fatalf("without a manager the finalizer should hold orders: %q", got)
	}
	// The route Secret the manager had written for orders, left behind with it.
	route := routesecret.New("hookwarden-system", routesecret.Source{Namespace: "default", Name: "orders", UID: "uid"}, map[string][]byte{hookv1.SecretKeyCurrent: []byte("whsec_left")})
	if _, err := c.kube.CoreV1().Secrets("hookwarden-system").Create(context.Background(), route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.must(t, "docs/operations.md: releasing the finalizers", docBlock(t, operations, "release-finalizers"))
	if got := c.must(t, "route Secrets left", "kubectl get secret -n hookwarden-system -l hookwarden.io/route-secret=true -o name"); strings.TrimSpace(got) != "" {
		t.Errorf("route Secrets left after the operations guide's commands: %q", got)
	}
	if got := c.must(t, "subscriptions left after releasing", "kubectl get whsub -A -o name"); strings.TrimSpace(got) != "" {
		t.Errorf("subscriptions left after the operations guide's commands: %q", got)
	}

	// A CRD that Helm does not own (a release that shipped it in crds/) blocks a templated one:
	// the operations guide's adoption step makes it the release's.
	c.must(t, "CRD as a crds/ release left it", "kubectl annotate "+crd+" meta.helm.sh/release-name- meta.helm.sh/release-namespace- && kubectl label "+crd+" app.kubernetes.io/managed-by-")
	install := docBlock(t, readme, "install")
	helmInstall := install[strings.Index(install, "helm install"):]
	helmInstall = helmInstall[:strings.Index(helmInstall, "\nkubectl")]
	if out, err := c.sh(t, helmInstall); err == nil || !strings.Contains(out, "cannot be imported") {
		t.Fatalf("helm install over an unowned CRD: %v\n%s\nwant Helm's refusal, which the operations guide's adoption step answers", err, out)
	}
	c.must(t, "docs/operations.md: adopting the CRD", docBlock(t, operations, "adopt-crd"))
	c.must(t, "helm install after adopting the CRD", helmInstall)
}
