package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const testVersion = "v0.0.0-imagetest"

// builtBinaries runs `make image-binaries` (what `make images` packs, built with the same
// static flags as `make build`) once for the package's tests: compiles are cached, linking is
// the cost left.
var builtBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "image-test-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("make", "-s", "image-binaries", "BIN="+dir, "VERSION="+testVersion, "PLATFORM=linux/"+runtime.GOARCH)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image-binaries: %v\n%s", err, out)
	}
	// The builder itself runs as a separate, uninstrumented program: compressing two 20 MB
	// layers under the race detector takes minutes, natively a second.
	tool := exec.Command("go", "build", "-o", filepath.Join(dir, "image"), ".")
	if out, err := tool.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./hack/image: %v\n%s", err, out)
	}
	return filepath.Join(dir, "images", "linux-"+runtime.GOARCH), nil
})

// imageTool runs the builder program with args and returns what it printed.
func imageTool(t *testing.T, args ...string) string {
	t.Helper()
	bin := binaries(t)
	out, err := exec.Command(filepath.Join(filepath.Dir(filepath.Dir(bin)), "image"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hack/image %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// digests maps each image written or pushed to its digest, from the builder's output lines
// "<tarball> <tag> <digest>" and "pushed <tag>@<digest>".
func digests(out string) map[string]string {
	d := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3:
			d[f[1]] = f[2]
		case len(f) == 2 && f[0] == "pushed":
			if ref, dg, ok := strings.Cut(f[1], "@"); ok {
				d[ref] = dg
			}
		}
	}
	return d
}

func binaries(t *testing.T) string {
	t.Helper()
	dir, err := builtBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := builtBinaries(); err == nil {
		_ = os.RemoveAll(filepath.Dir(filepath.Dir(dir)))
	}
	os.Exit(code)
}

func TestImages(t *testing.T) {
	bin := binaries(t)
	platform := "linux/" + runtime.GOARCH
	out := t.TempDir()
	args := []string{"-version", testVersion, "-revision", "0123abcd", "-platform", platform, "-out", out}
	for _, n := range []string{"manager", "receiver"} {
		args = append(args, n+"="+filepath.Join(bin, n))
	}
	imageTool(t, args...)
	for _, n := range []string{"manager", "receiver"} {
		t.Run(n, func(t *testing.T) {
			archive := filepath.Join(out, n+".tar")
			checkDockerArchive(t, archive, "hookwarden/"+n+":"+testVersion)
			img, err := tarball.ImageFromPath(archive, nil)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cfgJSON, _ := json.Marshal(cf.Config)
			t.Logf("REPORT image %s %s/%s config: %s", n, cf.OS, cf.Architecture, cfgJSON)
			want := v1.Config{
				User: "65532:65532", Entrypoint: []string{"/" + n}, WorkingDir: "/",
				Env: []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
				Labels: map[string]string{
					"org.opencontainers.image.title":       "hookwarden-" + n,
					"org.opencontainers.image.description": "Hookwarden " + n + ": declarative, duplicate-proof webhook registration for Kubernetes",
					"org.opencontainers.image.version":     testVersion,
					"org.opencontainers.image.revision":    "0123abcd",
					"org.opencontainers.image.source":      "https://github.com/hookwarden/hookwarden",
					"org.opencontainers.image.licenses":    "Apache-2.0",
				},
			}
			if diff := cmp.Diff(want, cf.Config); diff != "" {
				t.Errorf("image config (-want +got)\n%s", diff)
			}
			if cf.OS+"/"+cf.Architecture != platform {
				t.Errorf("platform %s/%s, want %s", cf.OS, cf.Architecture, platform)
			}
			root := extract(t, img)
			checkFiles(t, root, n)
			// Run it as Kubernetes would: the image's own root, the image's numeric user, no
			// shell to start it. A binary needing libc or a loader fails here.
			got := runInImage(t, root, "/"+n, "--version")
			if wantPrefix := n + " " + testVersion + " "; !strings.HasPrefix(got, wantPrefix) {
				t.Errorf("/%s --version in the image printed %q, want it to start with %q", n, got, wantPrefix)
			}
		})
	}
}

// checkDockerArchive checks the layout `docker load` and `kind load image-archive` read.
func checkDockerArchive(t *testing.T, path, wantTag string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no manifest.json: not a docker-save archive", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != wantTag || len(m[0].Layers) != 2 {
			t.Errorf("manifest.json %+v, want one image tagged %s with two layers", m, wantTag)
		}
		return
	}
}

func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode).Perm()|0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
	}
}

func checkFiles(t *testing.T, root, binary string) {
	t.Helper()
	var files []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if isShell(rel) {
			t.Errorf("the image has a shell: /%s", rel)
		}
		if !info.IsDir() {
			files = append(files, "/"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	want := []string{"/" + binary, "/etc/group", "/etc/passwd", "/etc/ssl/certs/ca-certificates.crt"}
	sort.Strings(want)
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files in the image (-want +got)\n%s", diff)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), fmt.Sprintf("\n%s:x:%d:%d:", UserName, UID, UID)) {
		t.Errorf("/etc/passwd has no entry for uid %d:\n%s", UID, passwd)
	}
	bin, _ := os.ReadFile(filepath.Join(root, binary))
	if err := checkStatic(bin, runtime.GOARCH); err != nil {
		t.Errorf("/%s: %v", binary, err)
	}
}

// runInImage runs argv chrooted into root as the image's user: as root directly, otherwise
// in a user namespace that maps the caller to that uid.
func runInImage(t *testing.T, root string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Path = argv[0]
	cmd.Env = []string{}
	cmd.Dir = "/"
	attr := &syscall.SysProcAttr{Chroot: root}
	if os.Geteuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: UID, Gid: UID}
	} else {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: UID, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: UID, HostID: os.Getgid(), Size: 1}}
		attr.Credential = &syscall.Credential{Uid: UID, Gid: UID}
	}
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("running %v in the image: %v\n%s", argv, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// The same binaries give the same image, byte for byte; and a push reaches a real registry
// (go-containerregistry's in-memory one, the same protocol) with that digest.
func TestImageReproducibleAndPushable(t *testing.T) {
	bin := binaries(t)
	platform := "linux/" + runtime.GOARCH
	build := func(extra ...string) map[string]string {
		return digests(imageTool(t, append([]string{"-version", testVersion, "-platform", platform}, append(extra, "receiver="+filepath.Join(bin, "receiver"))...)...))
	}
	a := build("-out", t.TempDir())["hookwarden/receiver:"+testVersion]
	b := build("-out", t.TempDir())["hookwarden/receiver:"+testVersion]
	if a == "" || a != b {
		t.Errorf("two builds of the same binary: digests %q and %q", a, b)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	pushed := build("-push", reg+"/hookwarden")[reg+"/hookwarden/receiver:"+testVersion]
	if pushed != a {
		t.Errorf("pushed digest %q, built %q", pushed, a)
	}
	ref, err := name.NewTag(reg+"/hookwarden/receiver:"+testVersion, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	if dp, _ := img.Digest(); dp.String() != a {
		t.Errorf("pulled %s, built %s", dp, a)
	}
}

func TestBuildRefusesDynamicBinaries(t *testing.T) {
	// /bin/ls on any distribution is dynamically linked.
	_, err := Build(Spec{Name: "ls", Binary: "/bin/ls", CABundle: "/etc/ssl/certs/ca-certificates.crt", Platform: "linux/" + runtime.GOARCH})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("building from /bin/ls: %v, want a refusal naming CGO_ENABLED=0", err)
	}
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		t.Errorf("expected a static-check refusal, got a file error: %v", err)
	}
}
