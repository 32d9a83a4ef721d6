// Command image builds Hookwarden's container images without a container engine: each image is
// a base layer made here from files (an /etc/passwd and /etc/group with the non-root user, the
// CA bundle) plus one layer with one static binary, assembled with go-containerregistry.
//
//	go run ./hack/image -version v0.3.0 -out bin/images manager=bin/manager receiver=bin/receiver
//	go run ./hack/image -push ghcr.io/me -version v0.3.0 manager=bin/manager receiver=bin/receiver
//
// -out writes <name>.tar per image: a `docker save` tarball, loadable with `docker load -i` and
// `kind load image-archive`. -push writes each image to <registry>/<name>:<version> with the
// credentials of ~/.docker/config.json. The images are reproducible: same binaries, same digest.
package main

import (
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
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var spec Spec
	fs.StringVar(&spec.Version, "version", "dev", "image tag and org.opencontainers.image.version label")
	fs.StringVar(&spec.Revision, "revision", "", "org.opencontainers.image.revision label (the commit)")
	fs.StringVar(&spec.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates put at /etc/ssl/certs/ca-certificates.crt")
	fs.StringVar(&spec.Platform, "platform", "linux/amd64", "os/arch of the binaries (checked against their ELF header)")
	repo := fs.String("repository", "hookwarden", "repository prefix of the tags written into the tarballs")
	out := fs.String("out", "", "folder for the docker-save tarballs <name>.tar")
	push := fs.String("push", "", "registry/prefix to push <prefix>/<name>:<version> to")
	epoch := fs.Int64("source-date-epoch", 0, "timestamp of the image and its files, seconds (SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	spec.Created = time.Unix(*epoch, 0).UTC()
	if *out == "" && *push == "" {
		return fmt.Errorf("nothing to do: give -out, -push or both")
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("no images: give name=path/to/binary arguments")
	}
	for _, a := range fs.Args() {
		n, bin, ok := strings.Cut(a, "=")
		if !ok || n == "" || bin == "" {
			return fmt.Errorf("argument %q: want name=path/to/binary", a)
		}
		s := spec
		s.Name, s.Binary = n, bin
		img, err := Build(s)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		tag := Tag(s.Version)
		if *out != "" {
			ref, err := name.NewTag(*repo + "/" + n + ":" + tag)
			if err != nil {
				return err
			}
			path := filepath.Join(*out, n+".tar")
			if err := os.MkdirAll(*out, 0o755); err != nil {
				return err
			}
			if err := tarball.WriteToFile(path, ref, img); err != nil {
				return fmt.Errorf("writing %s: %w", path, err)
			}
			fmt.Fprintf(stdout, "%s %s %s\n", path, ref, digest)
		}
		if *push != "" {
			ref, err := name.NewTag(strings.TrimSuffix(*push, "/") + "/" + n + ":" + tag)
			if err != nil {
				return err
			}
			if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
				return fmt.Errorf("pushing %s: %w", ref, err)
			}
			fmt.Fprintf(stdout, "pushed %s@%s\n", ref, digest)
		}
	}
	return nil
}
