package charts_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// countingSink is a subscription's sink that can be down (503) or up, and counts by event id
// (ce-id) every attempt and every delivery it accepted.
type countingSink struct {
	*httptest.Server
	mu        sync.Mutex
	up        bool
	attempts  map[string]int
	delivered map[string]int
}

func newCountingSink(t *testing.T) *countingSink {
	t.Helper()
	s := &countingSink{attempts: map[string]int{}, delivered: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("ce-id")
		s.mu.Lock()
		defer s.mu.Unlock()
		s.attempts[id]++
		if !s.up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		s.delivered[id]++
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingSink) setUp(up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = up
}

// counts returns how many of ids were attempted and delivered at least once.
func (s *countingSink) counts(ids []string) (attempted, delivered int, perID map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	perID = map[string]int{}
	for _, id := range ids {
		if s.attempts[id] > 0 {
			attempted++
		}
		if s.delivered[id] > 0 {
			delivered++
		}
		perID[id] = s.delivered[id]
	}
	return attempted, delivered, perID
}

// volumes stands for a storage provisioner: each claim (by UID) is bound to a folder of its
// own, so a claim deleted and made again is an empty volume, as with a real provisioner's
// reclaim policy Delete.
type volumes string

func (v volumes) of(t *testing.T, c *installCluster, ns, claim string) (uid types.UID, dir string) {
	t.Helper()
	pvc, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the receiver's volume claim %s/%s: %v", ns, claim, err)
	}
	dir = filepath.Join(string(v), string(pvc.UID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return pvc.UID, dir
}

// installedReceiverArgs reads the release's receiver Deployment from the cluster (helm get
// manifest) and returns its arguments, where its data volume is mounted and the claim that
// volume is.
func installedReceiverArgs(t *testing.T, c *installCluster, release, ns string) (args []string, mountPath, claim string) {
	t.Helper()
	manifest, err := c.sh(t, "helm get manifest "+release+" -n "+ns)
	if err != nil {
		t.Fatalf("helm get manifest: %v\n%s", err, manifest)
	}
	r := parseRendered(t, []byte(manifest))
	d := r.find("Deployment", release+"-receiver")
	if d == nil {
		t.Fatalf("release %s has no receiver Deployment", release)
	}
	mount, _ := podField(d, "containers", 0, "volumeMounts", 0).(map[string]any)
	vol, _ := podField(d, "volumes", 0).(map[string]any)
	pvc, _, _ := unstructured.NestedString(vol, "persistentVolumeClaim", "claimName")
	if mount == nil || pvc == "" || mount["name"] != vol["name"] {
		t.Fatalf("receiver volume %v mounted as %v: want the data claim", vol, mount)
	}
	mountPath, _ = mount["mountPath"].(string)
	return containerArgs(t, d), mountPath, pvc
}

// Events the receiver acknowledged to the provider and could not yet deliver live in its
// SQLite ledger on the release's volume claim. helm uninstall keeps the claim, a reinstall under
// the same name takes it over, and the receiver started on it delivers each event once.
func TestUninstallKeepsReceiverLedger(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	c := newInstallCluster(t)
	ctx := context.Background()
	const release, ns = "hookwarden", "hookwarden-system"
	installCmd := "helm install " + release + " charts/hookwarden -n " + ns + " --create-namespace --set image.registry=" + testRegistry
	out := c.must(t, "helm install", installCmd)
	if claim := release + "-receiver-data"; !strings.Contains(out, "kubectl delete pvc "+claim) {
		t.Errorf("helm install's notes do not say that the claim %s stays on uninstall:\n%s", claim, out)
	}
	vols := volumes(t.TempDir())

	sink := newCountingSink(t)
	c.must(t, "a namespace for the subscription", "kubectl create namespace shop")
	if out, err := runCmd(t, subscriptionWithSink("shop", "orders", "http://127.0.0.1:9", sink.URL), kubectlBin, "--kubeconfig", c.kubeconfig, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The manager's copy of the signing material, as it writes it (no manager runs here).
	uid := strings.TrimSpace(c.must(t, "subscription UID", "kubectl get whsub -n shop orders -o jsonpath='{.metadata.uid}'"))
	const secret = "whsec_ledger_test"
	route := routesecret.New(ns, routesecret.Source{Namespace: "shop", Name: "orders", UID: uid}, map[string][]byte{hookv1.SecretKeyCurrent: []byte(secret)})
	if _, err := c.kube.CoreV1().Secrets(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, _ := saKubeconfigIn(t, c.cfg, ns, release+"-receiver")

	// startReceiver runs the receiver as the release's Deployment runs it, on the volume its
	// claim is bound to now; the retry delays are shortened to keep the test short.
	startReceiver := func() (*proc, string, types.UID) {
		args, mountPath, claim := installedReceiverArgs(t, c, release, ns)
		pvcUID, dir := vols.of(t, c, ns, claim)
		for i, a := range args {
			args[i] = strings.Replace(a, mountPath, dir, 1)
		}
		bind, probe := freeAddr(t), freeAddr(t)
		p := start(t, "receiver", []string{"KUBECONFIG=" + kc}, append(args, "--bind-address="+bind, "--metrics-bind-address=0",
			"--health-probe-bind-address="+probe, "--retry-base=50ms", "--retry-max=500ms")...)
		eventually(t, 60*time.Second, "receiver /readyz", wantStatus("http://"+probe+"/readyz", "", http.StatusOK))
		return p, bind, pvcUID
	}

	recv, bind, before := startReceiver()
	ids := []string{"evt_ledger_1", "evt_ledger_2", "evt_ledger_3"}
	for _, id := range ids {
		if code := stripeDelivery(t, bind, "shop", "orders", secret, id); code != http.StatusAccepted {
			t.Fatalf("delivery %s: %d, want 202 (acknowledged to the provider)", id, code)
		}
	}
	eventually(t, 30*time.Second, "every event tried against the sink, which is down", func() error {
		if attempted, _, _ := sink.counts(ids); attempted != len(ids) {
			return fmt.Errorf("%d of %d events tried", attempted, len(ids))
		}
		return nil
	})
	recv.stop()

	c.must(t, "helm uninstall", "helm uninstall "+release+" -n "+ns)
	pvc, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, release+"-receiver-data", metav1.GetOptions{})
	// A deleted claim stays Terminating here: its kubernetes.io/pvc-protection finalizer is
	// released by the controller manager (once no pod uses it), which envtest does not run.
	if apierrors.IsNotFound(err) || err == nil && pvc.DeletionTimestamp != nil {
		t.Fatalf("helm uninstall deleted the receiver's volume claim: %d acknowledged, undelivered events go with it", len(ids))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("REPORT after helm uninstall: claim %s (uid %s) kept, %s", pvc.Name, pvc.UID, pvc.Annotations["helm.sh/resource-policy"])

	c.must(t, "helm install again, same release name", installCmd)
	sink.setUp(true)
	recv, _, after := startReceiver()
	if after != before {
		t.Errorf("the reinstalled release's claim is %s, the first one's %s: a new, empty volume", after, before)
	}
	eventually(t, 60*time.Second, "the queued events delivered after the reinstall", func() error {
		if _, delivered, _ := sink.counts(ids); delivered != len(ids) {
			return fmt.Errorf("%d of %d delivered", delivered, len(ids))
		}
		return nil
	})
	recv.stop()
	_, _, perID := sink.counts(ids)
	for _, id := range ids {
		if perID[id] != 1 {
			t.Errorf("event %s delivered %d times, want once", id, perID[id])
		}
	}
	t.Logf("REPORT reinstall on the kept claim (uid %s): deliveries per event %v", after, perID)
}

// What a platform team does after the first install, on a cluster of its own: an upgrade that
// changes the CRD and a rollback (the CRD is a template: the rollback puts the earlier one
// back), a second release beside the first (crds.enabled=false; with the CRD it is refused,
// naming the owner), and a namespaced release whose watched namespace does not exist yet
// (refused at install, naming it, rather than a manager that cannot start).
func TestRollbackAndSecondRelease(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	c := newInstallCluster(t)
	base := " --set image.registry=" + testRegistry
	c.must(t, "helm install 0.1.0", "helm install hookwarden charts/hookwarden -n hookwarden-system --create-namespace"+base)
	first := c.must(t, "CRD printer columns of 0.1.0", crdColumns)
	c.must(t, "helm upgrade to 0.2.0 (one more printer column)", "helm upgrade hookwarden "+nextChart(t)+" -n hookwarden-system --reset-then-reuse-values")
	if upgraded := c.must(t, "CRD printer columns of 0.2.0", crdColumns); !strings.Contains(upgraded, "Generation") {
		t.Fatalf("the upgrade did not change the CRD: %q", upgraded)
	}
	c.must(t, "helm rollback to revision 1", "helm rollback hookwarden 1 -n hookwarden-system")
	if back := c.must(t, "CRD printer columns after the rollback", crdColumns); back != first {
		t.Errorf("after helm rollback the CRD's columns are %q, want 0.1.0's %q", back, first)
	}
	if got := c.must(t, "CRD resource policy after the rollback", "kubectl get crd webhooksubscriptions.hookwarden.io -o jsonpath='{.metadata.annotations.helm\\.sh/resource-policy}'"); got != "keep" {
		t.Errorf("after the rollback the CRD's resource policy is %q, want keep", got)
	}

	second := "helm install team charts/hookwarden -n team-system --create-namespace" + base + " --set watchNamespaces={team-x} --set clusterName=team"
	out, err := c.sh(t, second)
	if want := `watchNamespaces: namespace "team-x" does not exist. Create it first (kubectl create namespace team-x)`; err == nil || !strings.Contains(out, want) {
		t.Errorf("a namespaced release watching a namespace that does not exist: %v\n%s\nwant the refusal %q", err, out, want)
	}
	c.must(t, "the watched namespace", "kubectl create namespace team-x")
	if out, err := c.sh(t, second); err == nil || !strings.Contains(out, `CustomResourceDefinition "webhooksubscriptions.hookwarden.io" in namespace "" exists and cannot be imported into the current release`) {
		t.Errorf("a second release that also ships the CRD: %v\n%s\nwant Helm's refusal naming the CRD", err, out)
	}
	c.must(t, "a second release without the CRD", second+" --set crds.enabled=false")
	if got := c.must(t, "releases", "helm list -A -o json"); !strings.Contains(got, `"name":"team"`) || !strings.Contains(got, `"name":"hookwarden"`) {
		t.Errorf("helm list: %s", got)
	}
	c.must(t, "the second release's Role in its watched namespace", "kubectl get role -n team-x team-hookwarden-manager -o name")
	c.must(t, "uninstalling the second release leaves the first's CRD", "helm uninstall team -n team-system && kubectl get crd webhooksubscriptions.hookwarden.io -o name")
}
