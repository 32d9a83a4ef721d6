// Command image builds Hookwarden's container images without a container engine: each image is
// a base layer made here from files (an /etc/passwd and /etc/group with the non-root user, the
// CA bundle) plus one layer with one static binary, assembled with go-containerregistry, for
// every platform given, into an OCI image index.
//
//	go run ./hack/image -version 0.3.0 -platforms linux/amd64,linux/arm64 -binaries bin/images -out bin/images manager receiver
//	go run ./hack/image -version 0.3.0 -platforms linux/amd64,linux/arm64 -binaries bin/images -push ghcr.io/me manager receiver
//
// The binary of <name> for os/arch is <binaries>/<os>-<arch>/<name> (make image-binaries).
// -out writes <out>/oci, an OCI image layout holding one index per image (tagged
// <repository>/<name>:<version> in org.opencontainers.image.ref.name), and <out>/<name>.tar, a
// `docker save` tarball of this machine's platform for `docker load -i` and `kind load
// image-archive`. -push writes each index to <registry>/<name>:<version> with the credentials of
// ~/.docker/config.json. The images are reproducible: same binaries, same digests.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hookwarden/hookwarden/hack/internal/imagebuild"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

//nolint:funlen // flag parsing and the build in order
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var spec imagebuild.Spec
	fs.StringVar(&spec.Version, "version", "dev", "image tag and org.opencontainers.image.version label")
	fs.StringVar(&spec.Revision, "revision", "", "org.opencontainers.image.revision label (the commit)")
	fs.StringVar(&spec.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates put at /etc/ssl/certs/ca-certificates.crt")
	platformList := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch of the index (each binary is checked against its ELF header)")
	binaries := fs.String("binaries", "bin/images", "folder holding <os>-<arch>/<name> for each platform")
	repo := fs.String("repository", "hookwarden", "repository prefix of the tags written into the tarballs and the OCI layout")
	out := fs.String("out", "", "folder for the OCI layout (<out>/oci) and the docker-save tarballs <name>.tar")
	push := fs.String("push", "", "registry/prefix to push <prefix>/<name>:<version> (an OCI index) to")
	epoch := fs.Int64("source-date-epoch", 0, "timestamp of the images and their files, seconds (SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	spec.Created = time.Unix(*epoch, 0).UTC()
	if *out == "" && *push == "" {
		return fmt.Errorf("nothing to do: give -out, -push or both")
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("no images: give their names (manager receiver)")
	}
	var platforms []string
	for _, p := range strings.Split(*platformList, ",") {
		if p = strings.TrimSpace(p); p != "" {
			platforms = append(platforms, p)
		}
	}
	if len(platforms) == 0 {
		return fmt.Errorf("-platforms is empty")
	}
	binary := func(n string) func(string) string {
		return func(p string) string { return filepath.Join(*binaries, strings.ReplaceAll(p, "/", "-"), n) }
	}
	var oci layout.Path
	if *out != "" {
		dir := filepath.Join(*out, "oci")
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		var err error
		if oci, err = layout.Write(dir, empty.Index); err != nil {
			return err
		}
	}
	// The tarball is for this machine's container engine: its own platform.
	local := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(platforms, local) {
		local = platforms[0]
	}
	tag := imagebuild.Tag(spec.Version)
	for _, n := range fs.Args() {
		s := spec
		s.Name = n
		idx, err := imagebuild.Index(s, platforms, binary(n))
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		if *out != "" {
			ref, err := name.NewTag(*repo + "/" + n + ":" + tag)
			if err != nil {
				return err
			}
			if err := oci.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
				return fmt.Errorf("writing the OCI layout: %w", err)
			}
			fmt.Fprintf(stdout, "%s %s %s index %s\n", oci, ref, digest, strings.Join(platforms, ","))
			ls := s
			ls.Platform, ls.Binary = local, binary(n)(local)
			img, err := imagebuild.Build(ls)
			if err != nil {
				return err
			}
			imgDigest, err := img.Digest()
			if err != nil {
				return err
			}
			path := filepath.Join(*out, n+".tar")
			if err := tarball.WriteToFile(path, ref, img); err != nil {
				return fmt.Errorf("writing %s: %w", path, err)
			}
			fmt.Fprintf(stdout, "%s %s %s image %s\n", path, ref, imgDigest, local)
		}
		if *push != "" {
			ref, err := name.NewTag(strings.TrimSuffix(*push, "/") + "/" + n + ":" + tag)
			if err != nil {
				return err
			}
			if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
				return fmt.Errorf("pushing %s: %w", ref, err)
			}
			fmt.Fprintf(stdout, "pushed %s@%s\n", ref, digest)
		}
	}
	return nil
}
