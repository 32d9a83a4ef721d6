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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/hack/internal/imagebuild"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// testVersion is given to make with a leading v, which make drops (as the chart's appVersion
// has none): the images are tagged and labelled testTag, --version prints it.
const (
	testVersion = "v0.0.0-imagetest"
	testTag     = "0.0.0-imagetest"
)

var platforms = []string{"linux/amd64", "linux/arm64"}

// builtBinaries runs `make image-binaries` (what `make images` packs, cross-built with the same
// static flags as `make build`) for both platforms once for the package's tests: compiles are
// cached, linking is the cost left.
var builtBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "image-test-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("make", "-s", "image-binaries", "BIN="+dir, "VERSION="+testVersion, "PLATFORMS="+strings.Join(platforms, " "))
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image-binaries: %v\n%s", err, out)
	}
	// The builder itself runs as a separate, uninstrumented program: compressing 20 MB layers
	// under the race detector takes minutes, natively a second.
	tool := exec.Command("go", "build", "-o", filepath.Join(dir, "image"), ".")
	if out, err := tool.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./hack/image: %v\n%s", err, out)
	}
	return filepath.Join(dir, "images"), nil
})

// imageTool runs the builder program with args and returns what it printed.
func imageTool(t *testing.T, args ...string) string {
	t.Helper()
	bin := binaries(t)
	out, err := exec.Command(filepath.Join(filepath.Dir(bin), "image"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hack/image %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// digests maps each index or image written or pushed to its digest, from the builder's output
// lines "<path> <tag> <digest> index|image <platforms>" and "pushed <tag>@<digest>".
func digests(out string) map[string]string {
	d := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 5:
			d[f[3]+" "+f[1]] = f[2]
		case len(f) == 2 && f[0] == "pushed":
			if ref, dg, ok := strings.Cut(f[1], "@"); ok {
				d["pushed "+ref] = dg
			}
		}
	}
	return d
}

// binaries is the folder holding <os>-<arch>/{manager,receiver}.
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
	if testtier.Short() {
		os.Exit(code) // builtBinaries would build them only to remove them
	}
	if dir, err := builtBinaries(); err == nil {
		_ = os.RemoveAll(filepath.Dir(dir))
	}
	os.Exit(code)
}

func gitRevision(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// The chart's appVersion is the one version: make prints it, tags the images with it and links
// it into --version; VERSION=v1.2.3 gives 1.2.3, the form appVersion and the chart's default
// image tag have.
func TestOneVersion(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join("..", "..", "charts", "hookwarden", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %q, %v", c.AppVersion, err)
	}
	for _, tc := range []struct{ args []string }{{nil}, {[]string{"VERSION=v" + c.AppVersion}}, {[]string{"VERSION=" + c.AppVersion}}} {
		cmd := exec.Command("make", append([]string{"-s", "version"}, tc.args...)...)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make version %v: %v", tc.args, err)
		}
		if got := strings.TrimSpace(string(out)); got != c.AppVersion || imagebuild.Tag(got) != c.AppVersion {
			t.Errorf("make version %v = %q (tag %q), want the chart's appVersion %q", tc.args, got, imagebuild.Tag(got), c.AppVersion)
		}
	}
}

func TestImages(t *testing.T) {
	testtier.RequiresServers(t, "the image binaries (make image-binaries)")
	bin := binaries(t)
	out := t.TempDir()
	revision := gitRevision(t)
	const epoch = 1_700_000_000
	created := time.Unix(epoch, 0).UTC().Format(time.RFC3339)
	imageTool(t, "-version", testTag, "-revision", revision, "-platforms", strings.Join(platforms, ","), "-binaries", bin,
		"-source-date-epoch", strconv.Itoa(epoch), "-out", out, "manager", "receiver")

	top, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]v1.Hash{}
	for _, d := range topManifest.Manifests {
		refs[d.Annotations["org.opencontainers.image.ref.name"]] = d.Digest
		if d.MediaType != types.OCIImageIndex {
			t.Errorf("%s in the OCI layout is a %s, want an OCI image index", d.Annotations["org.opencontainers.image.ref.name"], d.MediaType)
		}
	}
	local := "linux/" + runtime.GOARCH
	for _, n := range []string{"manager", "receiver"} {
		t.Run(n, func(t *testing.T) {
			ref := "hookwarden/" + n + ":" + testTag
			h, ok := refs[ref]
			if !ok {
				t.Fatalf("no index tagged %s in the OCI layout (%v)", ref, refs)
			}
			idx, err := top.ImageIndex(h)
			if err != nil {
				t.Fatal(err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if im.MediaType != types.OCIImageIndex || im.Annotations["org.opencontainers.image.created"] != created || im.Annotations["org.opencontainers.image.revision"] != revision {
				t.Errorf("index %s: media type %s, annotations %v", n, im.MediaType, im.Annotations)
			}
			var got []string
			for _, d := range im.Manifests {
				got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
				img, err := idx.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, n, d, img, revision, created)
			}
			t.Logf("REPORT image %s index %s (%s): %s", n, h, im.MediaType, strings.Join(got, ", "))
			if diff := cmp.Diff(platforms, got); diff != "" {
				t.Errorf("platforms of the %s index (-want +got)\n%s", n, diff)
			}

			archive := filepath.Join(out, n+".tar")
			checkDockerArchive(t, archive, "hookwarden/"+n+":"+testTag)
			img, err := tarball.ImageFromPath(archive, nil)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS+"/"+cf.Architecture != local {
				t.Errorf("the docker-save tarball is %s/%s, want this machine's %s", cf.OS, cf.Architecture, local)
			}
			root := extract(t, img)
			checkFiles(t, root, n, runtime.GOARCH)
			// Run it as Kubernetes would: the image's own root, the image's numeric user, no
			// shell to start it. A binary needing libc or a loader fails here. It names the
			// version the image is tagged with and the commit its label names.
			version := runInImage(t, root, "/"+n, "--version")
			if want := n + " " + testTag + " (commit " + revision[:12]; !strings.HasPrefix(version, want) {
				t.Errorf("/%s --version in the image printed %q, want it to start with %q", n, version, want)
			}
		})
	}
}

// checkImage checks one platform's image of an index: OCI media types, the platform in its
// config and descriptor, the config, the labels, the files (with the binary built for it).
func checkImage(t *testing.T, n string, d v1.Descriptor, img v1.Image, revision, created string) {
	t.Helper()
	platform := d.Platform.OS + "/" + d.Platform.Architecture
	if d.MediaType != types.OCIManifestSchema1 {
		t.Errorf("%s %s: manifest media type %s, want %s", n, platform, d.MediaType, types.OCIManifestSchema1)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("%s %s: config media type %s", n, platform, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("%s %s: layer media type %s, want %s", n, platform, l.MediaType, types.OCILayer)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS+"/"+cf.Architecture != platform {
		t.Errorf("%s: config says %s/%s, the index %s", n, cf.OS, cf.Architecture, platform)
	}
	want := v1.Config{
		User: "65532:65532", Entrypoint: []string{"/" + n}, WorkingDir: "/",
		Env: []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels: map[string]string{
			"org.opencontainers.image.title": "hookwarden-" + n,
			"org.opencontainers.image.description": map[string]string{
				"manager":  "Hookwarden manager: declarative, duplicate-proof webhook registration for Kubernetes",
				"receiver": "Hookwarden receiver: verifies each webhook delivery, acknowledges it once stored and delivers it once to its sinks",
			}[n],
			"org.opencontainers.image.version":  testTag,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.created":  created,
			"org.opencontainers.image.source":   "https://github.com/hookwarden/hookwarden",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	if diff := cmp.Diff(want, cf.Config); diff != "" {
		t.Errorf("%s %s image config (-want +got)\n%s", n, platform, diff)
	}
	cfgJSON, _ := json.Marshal(cf.Config)
	t.Logf("REPORT image %s %s manifest %s, config %s: %s", n, platform, d.MediaType, m.Config.MediaType, cfgJSON)
	checkFiles(t, extract(t, img), n, d.Platform.Architecture)
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

func checkFiles(t *testing.T, root, binary, arch string) {
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
	if !strings.Contains(string(passwd), fmt.Sprintf("\n%s:x:%d:%d:", imagebuild.UserName, imagebuild.UID, imagebuild.UID)) {
		t.Errorf("/etc/passwd has no entry for uid %d:\n%s", imagebuild.UID, passwd)
	}
	bin, _ := os.ReadFile(filepath.Join(root, binary))
	if err := imagebuild.CheckStatic(bin, arch); err != nil {
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
		attr.Credential = &syscall.Credential{Uid: imagebuild.UID, Gid: imagebuild.UID}
	} else {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: imagebuild.UID, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: imagebuild.UID, HostID: os.Getgid(), Size: 1}}
		attr.Credential = &syscall.Credential{Uid: imagebuild.UID, Gid: imagebuild.UID}
	}
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("running %v in the image: %v\n%s", argv, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// The same binaries give the same index, byte for byte; and a push reaches a real registry
// (go-containerregistry's in-memory one, the same protocol) as that index, from which each
// platform's image can be pulled.
func TestImageReproducibleAndPushable(t *testing.T) {
	testtier.RequiresServers(t, "the image binaries (make image-binaries)")
	bin := binaries(t)
	build := func(extra ...string) map[string]string {
		return digests(imageTool(t, append([]string{"-version", testTag, "-platforms", strings.Join(platforms, ","), "-binaries", bin}, append(extra, "receiver")...)...))
	}
	key := "index hookwarden/receiver:" + testTag
	a := build("-out", t.TempDir())[key]
	b := build("-out", t.TempDir())[key]
	if a == "" || a != b {
		t.Errorf("two builds of the same binaries: index digests %q and %q", a, b)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	pushed := build("-push", reg+"/hookwarden")["pushed "+reg+"/hookwarden/receiver:"+testTag]
	if pushed != a {
		t.Errorf("pushed digest %q, built %q", pushed, a)
	}
	ref, err := name.NewTag(reg+"/hookwarden/receiver:"+testTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.MediaType != types.OCIImageIndex || desc.Digest.String() != a {
		t.Errorf("the registry serves %s %s, built the OCI index %s", desc.MediaType, desc.Digest, a)
	}
	for _, p := range platforms {
		osName, arch, _ := strings.Cut(p, "/")
		img, err := remote.Image(ref, remote.WithPlatform(v1.Platform{OS: osName, Architecture: arch}))
		if err != nil {
			t.Fatalf("pulling %s for %s: %v", ref, p, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != p {
			t.Errorf("pulled for %s, got %s/%s", p, cf.OS, cf.Architecture)
		}
	}
}

func TestBuildRefusesDynamicBinaries(t *testing.T) {
	// /bin/ls on any distribution is dynamically linked.
	_, err := imagebuild.Build(imagebuild.Spec{Name: "ls", Binary: "/bin/ls", CABundle: "/etc/ssl/certs/ca-certificates.crt", Platform: "linux/" + runtime.GOARCH})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("building from /bin/ls: %v, want a refusal naming CGO_ENABLED=0", err)
	}
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		t.Errorf("expected a static-check refusal, got a file error: %v", err)
	}
}

// isShell tells whether a path in the image would be a shell; the test asserts there is none.
func isShell(p string) bool {
	switch filepath.Base(p) {
	case "sh", "bash", "ash", "dash", "busybox", "zsh":
		return true
	}
	return false
}
