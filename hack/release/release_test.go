package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hookwarden/hookwarden/internal/testenv"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

const (
	testVersion = "v0.0.0-releasetest" // make drops the v
	testTag     = "0.0.0-releasetest"
	epoch       = "1700000000"
	password    = "release-test"
)

// startRegistry serves go-containerregistry's registry (with the OCI referrers API) on addr
// ("127.0.0.1:0" for any port) until the test ends or stop is called.
func startRegistry(t *testing.T, addr string) (host string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().String(), srv.Close
}

// released is what a run of the release printed: each line's first word and its fields.
type released [][]string

func parseReleased(out string) released {
	var r released
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && slices.Contains([]string{"image", "sbom", "signed", "chart"}, f[0]) {
			r = append(r, f)
		}
	}
	return r
}

// ref returns the reference of the line of kind whose reference starts with prefix.
func (r released) ref(t *testing.T, kind, prefix string) string {
	t.Helper()
	for _, f := range r {
		if f[0] == kind && strings.HasPrefix(f[1], prefix) {
			return f[1]
		}
	}
	t.Fatalf("the release printed no %s line for %s:\n%v", kind, prefix, r)
	return ""
}

func makeRelease(t *testing.T, target string, vars ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", target}, vars...)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s %v: %v\n%s", target, vars, err, out)
	}
	return string(out)
}

// verifier is what `cosign verify --key cosign.pub --insecure-ignore-tlog` checks with: the
// public key, the simple-signing claims, no transparency log (the release is signed with a
// key, not uploaded to Rekor).
func verifier(t *testing.T, pubPEM []byte) *cosign.CheckOpts {
	t.Helper()
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return &cosign.CheckOpts{SigVerifier: v, IgnoreTlog: true, IgnoreSCT: true, ClaimVerifier: cosign.SimpleClaimVerifier,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remote.WithContext(context.Background()))}}
}

func verify(ref string, co *cosign.CheckOpts) (int, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return 0, err
	}
	sigs, _, err := cosign.VerifyImageSignatures(context.Background(), r, co)
	return len(sigs), err
}

// One command publishes the release to a registry on loopback: both images as multi-arch
// indexes, an SBOM of each as an OCI referrer of its index, cosign signatures of every index,
// image and the chart that the public key verifies (and another key does not), the chart as an
// OCI artifact of the same version that helm installs from the registry into a real API server,
// whose image references resolve in the registry to the signed digests. Then the same inputs
// published into a new, empty registry at the same address give the same digests.
func TestRelease(t *testing.T) {
	testtier.RequiresServers(t, "the image binaries, a registry and a control plane (envtest)")
	dir := t.TempDir()
	host, stop := startRegistry(t, "127.0.0.1:0")
	reg := host + "/hookwarden"
	t.Setenv("COSIGN_PASSWORD", password)
	var keyOut bytes.Buffer
	if err := run(context.Background(), []string{"generate-key", filepath.Join(dir, "cosign")}, &keyOut); err != nil {
		t.Fatal(err)
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	vars := []string{"BIN=" + filepath.Join(dir, "bin"), "VERSION=" + testVersion, "REGISTRY=" + reg,
		"SIGNING_KEY=" + filepath.Join(dir, "cosign.key"), "SOURCE_DATE_EPOCH=" + epoch, "RELEASE_OUT=" + filepath.Join(dir, "out")}
	out := makeRelease(t, "release", vars...)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Logf("REPORT make release | %s", l)
	}
	r := parseReleased(out)
	co := verifier(t, pubPEM)

	for _, n := range []string{"manager", "receiver"} {
		t.Run(n, func(t *testing.T) {
			index := r.ref(t, "image", reg+"/"+n+":"+testTag+"@")
			desc, err := remote.Get(mustRef(t, reg+"/"+n+":"+testTag))
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.SplitN(index, "@", 2)[1]; desc.MediaType != types.OCIImageIndex || desc.Digest.String() != want {
				t.Fatalf("the registry serves %s %s for the tag, the release printed %s", desc.MediaType, desc.Digest, want)
			}
			idx, err := desc.ImageIndex()
			if err != nil {
				t.Fatal(err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var platforms []string
			targets := []string{index}
			for _, m := range im.Manifests {
				platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
				targets = append(targets, reg+"/"+n+"@"+m.Digest.String())
			}
			if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
				t.Errorf("index platforms %v", platforms)
			}
			for _, target := range targets {
				got, err := verify(target, co)
				if err != nil || got == 0 {
					t.Errorf("cosign verification of %s with the public key: %d signatures, %v", target, got, err)
				}
				t.Logf("REPORT cosign verify --key cosign.pub %s: %d verified signature(s)", target, got)
			}
			checkSBOM(t, reg+"/"+n+"@"+desc.Digest.String(), n, filepath.Join(dir, "out", n+".cdx.json"))
		})
	}

	// What verification refuses: another key, and a manifest nobody signed (the SBOM's).
	other := filepath.Join(dir, "other")
	if err := run(context.Background(), []string{"generate-key", other}, io.Discard); err != nil {
		t.Fatal(err)
	}
	otherPub, _ := os.ReadFile(other + ".pub")
	manager := r.ref(t, "image", reg+"/manager:")
	if n, err := verify(manager, verifier(t, otherPub)); err == nil {
		t.Errorf("%s verified with a key that did not sign it (%d signatures)", manager, n)
	} else {
		t.Logf("REPORT cosign verify with another key: %v", err)
	}
	if n, err := verify(r.ref(t, "sbom", reg+"/manager@"), co); err == nil {
		t.Errorf("an unsigned manifest verified (%d signatures)", n)
	}

	chart := strings.TrimPrefix(r.ref(t, "chart", "oci://"+reg+"/charts/hookwarden:"+testTag+"@"), "oci://")
	if n, err := verify(chart, co); err != nil || n == 0 {
		t.Errorf("cosign verification of the chart %s: %d, %v", chart, n, err)
	}
	installFromRegistry(t, reg, r)

	// The same inputs again, into a new and empty registry at the same address: the same
	// digests, line for line (images, SBOMs, signatures, chart).
	stop()
	startRegistry(t, host)
	again := parseReleased(makeRelease(t, "release-publish", vars...))
	if diff := fmt.Sprint(again); diff != fmt.Sprint(r) {
		t.Errorf("the same release published again differs:\nfirst  %v\nsecond %v", r, again)
	} else {
		t.Logf("REPORT reproducible: %d digests equal across two publications of the same inputs", len(r))
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkSBOM finds the SBOM among the index's referrers, checks it is the file the release wrote
// and that it names what the binary links, and reports its component count.
func checkSBOM(t *testing.T, index, n, file string) {
	t.Helper()
	d, err := name.NewDigest(index)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := remote.Referrers(d)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// The referrer's artifactType is read from its manifest: go-containerregistry's registry lists
	// config.mediaType in its referrers answer (the OCI empty type, for an artifact without a
	// config) where the distribution spec has the manifest's artifactType.
	var sboms []v1.Descriptor
	var m v1.Manifest
	for _, r := range rm.Manifests {
		desc, err := remote.Get(d.Context().Digest(r.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		var rm v1.Manifest
		if err := json.Unmarshal(desc.Manifest, &rm); err != nil {
			t.Fatal(err)
		}
		if rm.ArtifactType == sbomMediaType {
			sboms, m = append(sboms, r), rm
		}
	}
	if len(sboms) != 1 {
		t.Fatalf("%d CycloneDX referrers of %s (%v), want 1", len(sboms), index, rm.Manifests)
	}
	if m.Subject == nil || m.Subject.Digest.String() != d.DigestStr() || len(m.Layers) != 1 {
		t.Fatalf("SBOM manifest %s: subject %v, layers %v", sboms[0].Digest, m.Subject, m.Layers)
	}
	l, err := remote.Layer(d.Context().Digest(m.Layers[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if written, _ := os.ReadFile(file); !bytes.Equal(written, body) {
		t.Errorf("the SBOM in the registry is not the one written to %s", file)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(body), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.Metadata.Component.Version != testVersion {
		t.Errorf("the SBOM's main component is %s %s, want version %s", bom.Metadata.Component.Name, bom.Metadata.Component.Version, testVersion)
	}
	var names []string
	for _, c := range *bom.Components {
		names = append(names, c.Name)
	}
	for _, want := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "std", "/etc/ssl/certs/ca-certificates.crt"} {
		if !slices.Contains(names, want) {
			t.Errorf("the %s SBOM has no component %s", n, want)
		}
	}
	t.Logf("REPORT SBOM %s: CycloneDX %s, %d components (%s %s), referrer %s of %s", n, bom.SpecVersion, len(names), bom.Metadata.Component.Name, bom.Metadata.Component.Version, sboms[0].Digest, d.DigestStr())
}

// installFromRegistry installs the released chart from the registry, as a user would, into a
// real API server, and resolves every image the Deployments name in the registry: each is the
// index the release signed.
func installFromRegistry(t *testing.T, reg string, r released) {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		helm, _ = filepath.Abs(filepath.Join("..", "..", "bin", "helm"))
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm not found at %s (make helm builds it): %v", helm, err)
	}
	dir := t.TempDir()
	noCRDs := filepath.Join(dir, "no-crds")
	if err := os.Mkdir(noCRDs, 0o755); err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.Assets(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.StartWith(testenv.Options{Assets: assets, CRDs: noCRDs, Dir: dir, User: "release"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	helmCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, append(args, "--kubeconfig", env.Kubeconfig)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	chart := "oci://" + reg + "/charts/hookwarden"
	shown := helmCmd("show", "chart", chart, "--version", testTag, "--plain-http")
	for _, want := range []string{"\nversion: " + testTag + "\n", "\nappVersion: " + testTag + "\n"} {
		if !strings.Contains(shown, want) {
			t.Errorf("helm show chart %s: no %q in\n%s", chart, want, shown)
		}
	}
	// No image value set: the released chart names the release's registry itself.
	out := helmCmd("install", "hookwarden", chart, "--version", testTag, "--plain-http", "-n", "hookwarden-system", "--create-namespace")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install %s: %s", chart, out)
	}
	t.Logf("REPORT helm install %s --version %s --plain-http: STATUS: deployed", chart, testTag)

	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := kube.AppsV1().Deployments("hookwarden-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Items) != 2 {
		t.Fatalf("%d Deployments installed, want the manager and the receiver", len(ds.Items))
	}
	for _, d := range ds.Items {
		for _, c := range containers(d) {
			ref, err := name.ParseReference(c)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Get(ref)
			if err != nil {
				t.Errorf("%s runs %s, which the registry does not resolve: %v", d.Name, c, err)
				continue
			}
			n := strings.TrimPrefix(ref.Context().RepositoryStr(), "hookwarden/")
			if want := r.ref(t, "image", reg+"/"+n+":"); want != c+"@"+desc.Digest.String() {
				t.Errorf("%s runs %s = %s, the release signed %s", d.Name, c, desc.Digest, want)
			}
			t.Logf("REPORT installed from the registry: %s runs %s -> %s", d.Name, c, desc.Digest)
		}
	}
}

func containers(d appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}
