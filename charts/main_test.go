package charts_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hookwarden/hookwarden/internal/testenv"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

const chartDir = "hookwarden"

var (
	cfg        *rest.Config
	kube       *kubernetes.Clientset
	kubeconfig string // admin
	kubectlBin string
	helmBin    string
	binDir     string // make build output: manager, receiver
	tmpDir     string
	// kubeVersion is the API server's: helm template renders for it (the chart's kubeVersion
	// refuses older ones).
	kubeVersion string
)

// testRegistry stands for where a user pushed the images (image.registry is required).
const testRegistry = "registry.example.com/hookwarden"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testtier.Short() {
		testtier.SkippingSetup("charts", "helm, the image binaries and the control plane")
		return m.Run()
	}
	fail := func(format string, a ...any) int { fmt.Fprintf(os.Stderr, "charts: "+format+"\n", a...); return 1 }
	var err error
	if tmpDir, err = os.MkdirTemp("", "charts-test-"); err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmpDir)

	helmBin = os.Getenv("HELM")
	if helmBin == "" {
		helmBin, _ = filepath.Abs(filepath.Join("..", "bin", "helm"))
	}
	if _, err := os.Stat(helmBin); err != nil {
		return fail("helm not found at %s (make helm builds it): %v", helmBin, err)
	}
	// The binaries the images carry (make image-binaries: make build's static flags).
	build := exec.Command("make", "-s", "image-binaries", "BIN="+filepath.Join(tmpDir, "bin"), "VERSION=v0.0.0-charttest", "PLATFORMS=linux/"+runtime.GOARCH)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return fail("make image-binaries: %v\n%s", err, out)
	}
	binDir = filepath.Join(tmpDir, "bin", "images", "linux-"+runtime.GOARCH)

	assets, err := testenv.Assets("..")
	if err != nil {
		return fail("%v", err)
	}
	kubectlBin = filepath.Join(assets, "kubectl")
	env, err := testenv.StartWith(testenv.Options{Assets: assets, CRDs: filepath.Join("..", "config", "crd", "bases"), Dir: tmpDir, User: "chart-admin"})
	if err != nil {
		return fail("%v", err)
	}
	defer func() { _ = env.Stop() }()
	cfg, kubeconfig = env.Config, env.Kubeconfig
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail("%v", err)
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fail("%v", err)
	}
	kubeVersion = v.GitVersion
	return m.Run()
}

// runCmd runs name with args (stdin optional) and returns stdout; stderr joins the error.
func runCmd(t *testing.T, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := runCmd(t, stdin, kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmTemplate renders the chart as release in namespace with --set values, for the API
// server's Kubernetes version and the test registry (later values override both).
func helmTemplate(t *testing.T, release, namespace string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion, "--set", "image.registry=" + testRegistry}
	for _, s := range set {
		if strings.HasPrefix(s, "--") { // a flag, e.g. --include-crds
			args = append(args, s)
			continue
		}
		args = append(args, "--set", s)
	}
	out, err := runCmd(t, nil, helmBin, args...)
	return []byte(out), err
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// saToken asks the API server for a token of a ServiceAccount, as the kubelet does for a pod.
func saToken(t *testing.T, namespace, name string) string {
	t.Helper()
	return saTokenIn(t, kube, namespace, name)
}

// saTokenIn is saToken on the cluster of client k.
func saTokenIn(t *testing.T, k kubernetes.Interface, namespace, name string) string {
	t.Helper()
	tr, err := k.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

func ptr[T any](v T) *T { return &v }

// saKubeconfig writes a kubeconfig that authenticates as the ServiceAccount with its token:
// the binaries then run with exactly the RBAC the manifests give them.
func saKubeconfig(t *testing.T, namespace, name string) (path string, rc *rest.Config) {
	t.Helper()
	return saKubeconfigIn(t, cfg, namespace, name)
}

// saKubeconfigIn is saKubeconfig on the cluster that the admin config cfg reaches.
func saKubeconfigIn(t *testing.T, cfg *rest.Config, namespace, name string) (path string, rc *rest.Config) {
	t.Helper()
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	token := saTokenIn(t, k, namespace, name)
	c := clientcmdapi.NewConfig()
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["sa"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "sa", Namespace: namespace}
	c.CurrentContext = "sa"
	path = filepath.Join(t.TempDir(), namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	rc = &rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, Timeout: 10 * time.Second}
	return path, rc
}

// splitDocs splits a multi-document YAML stream.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(d), []byte("---")))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}
