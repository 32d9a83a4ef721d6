// Command release publishes a Hookwarden release to a registry, reproducibly (the same binaries,
// chart and key give the same digests, signatures included):
//
//   - the manager and receiver images: an OCI image index each, one image per platform
//     (hack/internal/imagebuild), tagged with the version;
//
//   - a CycloneDX SBOM of each image (cyclonedx-gomod: the Go modules linked into its binary,
//     the standard library, the CA bundle), attached to its index as an OCI referrer;
//
//   - a cosign signature of each index and of each platform's image, made with the given key:
//     a simple-signing payload under the tag sha256-<digest>.sig, what `cosign verify --key`
//     checks;
//
//   - the Helm chart as an OCI artifact, <registry>/charts/hookwarden:<version> (its version and
//     appVersion the release's, its image.registry the registry), signed the same way.
//
//     make release VERSION=0.2.0 REGISTRY=ghcr.io/hookwarden SIGNING_KEY=cosign.key
//     go run ./hack/release -version 0.2.0 -registry ghcr.io/hookwarden -key cosign.key -binaries bin/images manager receiver
//     go run ./hack/release generate-key cosign    # cosign.key and cosign.pub, as cosign generate-key-pair writes them
//
// The key is cosign's encrypted private key; its password comes from COSIGN_PASSWORD, as for
// cosign. Registry credentials come from ~/.docker/config.json. The SBOMs, the packaged chart
// and the list of what was pushed are also written to -out.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hookwarden/hookwarden/hack/internal/imagebuild"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// release is one run's settings.
type release struct {
	spec      imagebuild.Spec
	platforms []string
	binaries  string // <binaries>/<os>-<arch>/<name>
	registry  string // registry/prefix
	chart     string
	out       string
	signer    *signer
	remote    []remote.Option
	log       io.Writer
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "generate-key" {
		if len(args) != 2 {
			return fmt.Errorf("usage: release generate-key <prefix> (writes <prefix>.key and <prefix>.pub; password from COSIGN_PASSWORD)")
		}
		return generateKey(args[1], []byte(os.Getenv("COSIGN_PASSWORD")), stdout)
	}
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	var r release
	fs.StringVar(&r.spec.Version, "version", "", "the release's version: image tags, labels, the chart's version and appVersion")
	fs.StringVar(&r.spec.Revision, "revision", "", "the commit (org.opencontainers.image.revision)")
	fs.StringVar(&r.spec.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates put in the images")
	platformList := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch of each image index")
	fs.StringVar(&r.binaries, "binaries", "bin/images", "folder holding <os>-<arch>/<name> for each platform (make image-binaries)")
	fs.StringVar(&r.registry, "registry", "", "registry/prefix the release goes to: <registry>/<name>:<version>, <registry>/charts/hookwarden:<version>")
	key := fs.String("key", "", "cosign private key (cosign generate-key-pair, or release generate-key); its password in COSIGN_PASSWORD")
	fs.StringVar(&r.chart, "chart", "charts/hookwarden", "the Helm chart's folder")
	fs.StringVar(&r.out, "out", "bin/release", "folder for the SBOMs, the packaged chart and release.txt")
	epoch := fs.Int64("source-date-epoch", 0, "time of the images, SBOMs and chart, seconds (SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case r.spec.Version == "":
		return fmt.Errorf("-version is required")
	case r.registry == "":
		return fmt.Errorf("-registry is required (e.g. ghcr.io/hookwarden)")
	case *key == "":
		return fmt.Errorf("-key is required: a cosign private key (cosign generate-key-pair, or go run ./hack/release generate-key cosign)")
	case fs.NArg() == 0:
		return fmt.Errorf("no images: give their names (manager receiver)")
	}
	r.registry = strings.TrimSuffix(r.registry, "/")
	r.spec.Created = time.Unix(*epoch, 0).UTC()
	for _, p := range strings.Split(*platformList, ",") {
		if p = strings.TrimSpace(p); p != "" {
			r.platforms = append(r.platforms, p)
		}
	}
	var err error
	if r.signer, err = loadSigner(*key, []byte(os.Getenv("COSIGN_PASSWORD"))); err != nil {
		return err
	}
	r.remote = []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		// Registries without the referrers API (GHCR among them) get the SBOMs through the
		// OCI 1.1 fallback tag sha256-<digest>.
		remote.WithReferrersTagFallback(true)}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return err
	}
	var log strings.Builder
	r.log = io.MultiWriter(stdout, &log)
	for _, n := range fs.Args() {
		if err := r.image(n); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	if err := r.publishChart(); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return os.WriteFile(filepath.Join(r.out, "release.txt"), []byte(log.String()), 0o644)
}

// image builds, pushes, describes and signs one image.
func (r *release) image(n string) error {
	s := r.spec
	s.Name = n
	binary := func(p string) string { return filepath.Join(r.binaries, strings.ReplaceAll(p, "/", "-"), n) }
	idx, err := imagebuild.Index(s, r.platforms, binary)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(r.registry + "/" + n + ":" + imagebuild.Tag(s.Version))
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, r.remote...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(r.log, "image  %s@%s %s\n", ref, digest, strings.Join(r.platforms, ","))
	at := ref.Context().Digest(digest.String())

	bom, components, err := sbom(s, at, r.platforms, binary)
	if err != nil {
		return fmt.Errorf("SBOM: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.out, n+".cdx.json"), bom, 0o644); err != nil {
		return err
	}
	sbomDigest, err := r.attachSBOM(at, idx, n, bom)
	if err != nil {
		return fmt.Errorf("attaching the SBOM: %w", err)
	}
	fmt.Fprintf(r.log, "sbom   %s@%s CycloneDX %d components, referrer of %s\n", ref.Context(), sbomDigest, components, digest)

	// The index and each platform's image, as cosign sign --recursive does: a policy that
	// checks the digest a node pulls finds a signature either way.
	targets := []name.Digest{at}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		targets = append(targets, ref.Context().Digest(d.Digest.String()))
	}
	for _, d := range targets {
		sig, err := r.signer.sign(d, r.remote)
		if err != nil {
			return fmt.Errorf("signing %s: %w", d, err)
		}
		fmt.Fprintf(r.log, "signed %s %s\n", d, sig)
	}
	return nil
}
