// Package testenv starts a local control plane (envtest: kube-apiserver and etcd, the CRDs
// installed, an administrator's client and kubeconfig) for the tests and tools (the demo,
// bench-reconcile, the chart and chaos tests) that run the product's binaries against it.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// Assets is the folder with kube-apiserver, etcd and kubectl: KUBEBUILDER_ASSETS, or what
// hack/control-plane.sh prints (it builds them on a cold cache, its progress on stderr). root is
// the repository's root.
func Assets(root string) (string, error) {
	if a := os.Getenv("KUBEBUILDER_ASSETS"); a != "" {
		return a, nil
	}
	cp := exec.Command(filepath.Join(root, "hack", "control-plane.sh"), "--print-dir")
	cp.Stderr = os.Stderr
	out, err := cp.Output()
	if err != nil {
		return "", fmt.Errorf("hack/control-plane.sh --print-dir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Env is a running control plane.
type Env struct {
	env *envtest.Environment
	// Config reaches the API server as its administrator.
	Config *rest.Config
	// Scheme holds the Kubernetes types and the product's.
	Scheme *runtime.Scheme
	// Client reads and writes with Scheme.
	Client client.Client
	// Kubeconfig is a kubeconfig file for a system:masters user, for the processes under test.
	Kubeconfig string
}

// Options say where a control plane's pieces are.
type Options struct {
	Assets string // kube-apiserver, etcd and kubectl (see Assets)
	CRDs   string // the CRD manifests to install
	Dir    string // where the kubeconfig is written
	User   string // the system:masters user the kubeconfig names
}

// Start starts a control plane with the CRDs of root/config/crd/bases and writes the
// kubeconfig of user into dir.
func Start(root, dir, user string) (*Env, error) {
	assets, err := Assets(root)
	if err != nil {
		return nil, err
	}
	return StartWith(Options{Assets: assets, CRDs: filepath.Join(root, "config", "crd", "bases"), Dir: dir, User: user})
}

// StartWith starts a control plane as o says.
func StartWith(o Options) (*Env, error) {
	e := &Env{env: &envtest.Environment{
		CRDDirectoryPaths:     []string{o.CRDs},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: o.Assets,
	}}
	cfg, err := e.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	if err := e.connect(cfg, o.Dir, o.User); err != nil {
		_ = e.env.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) connect(cfg *rest.Config, dir, user string) error {
	e.Config, e.Scheme = cfg, runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(e.Scheme); err != nil {
		return err
	}
	if err := hookv1.AddToScheme(e.Scheme); err != nil {
		return err
	}
	var err error
	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		return err
	}
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding user %s: %w", user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, kc, 0o600)
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }
