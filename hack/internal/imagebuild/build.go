// Package imagebuild assembles Hookwarden's container images without a container engine: a
// base layer made from files (an /etc/passwd and /etc/group with the non-root user, the CA
// bundle) plus one layer with one static binary, per platform, into an OCI image index. The
// images are reproducible: same binaries, same digests. hack/image and hack/release use it.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the binaries run as: numeric, so that Pod Security "restricted" (runAsNonRoot) can
// verify it without a passwd lookup; 65532 is distroless's "nonroot".
const (
	UID      = 65532
	UserName = "nonroot"
	caPath   = "etc/ssl/certs/ca-certificates.crt"
)

// Spec describes one image.
type Spec struct {
	Name     string // manager, receiver: the entrypoint is /<Name>
	Binary   string // path of the static binary
	Version  string
	Revision string
	CABundle string // file with PEM CA certificates
	Platform string // os/arch
	Created  time.Time
}

// Build assembles the image: a base layer (passwd, group, CA bundle, an empty /tmp) and the
// binary's layer. No shell, no libc, nothing else.
func Build(s Spec) (v1.Image, error) {
	osName, arch, ok := strings.Cut(s.Platform, "/")
	if !ok {
		return nil, fmt.Errorf("platform %q: want os/arch", s.Platform)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	if err := CheckStatic(bin, arch); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Binary, err)
	}
	ca, err := os.ReadFile(s.CABundle)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	base, err := layer(s.Created, baseFiles(ca))
	if err != nil {
		return nil, err
	}
	app, err := layer(s.Created, []file{{name: s.Name, mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}
	// OCI media types throughout: the images go into an OCI image index (one per platform).
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), base, app)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: s.Created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint: []string{"/" + s.Name},
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=/" + caPath},
		Labels:     Labels(s),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}

// Descriptions says what each image is, for its org.opencontainers.image.description label.
var Descriptions = map[string]string{
	"manager":  "Hookwarden manager: declarative, duplicate-proof webhook registration for Kubernetes",
	"receiver": "Hookwarden receiver: verifies each webhook delivery, acknowledges it once stored and delivers it once to its sinks",
}

// Labels are the OCI annotations the images carry (and their index: see Index).
func Labels(s Spec) map[string]string {
	description, ok := Descriptions[s.Name]
	if !ok {
		description = "Hookwarden " + s.Name
	}
	l := map[string]string{
		"org.opencontainers.image.title":       "hookwarden-" + s.Name,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.source":      "https://github.com/hookwarden/hookwarden",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		// SOURCE_DATE_EPOCH (the commit time): reproducible, unlike the time of the build.
		"org.opencontainers.image.created": s.Created.UTC().Format(time.RFC3339),
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	return l
}

// Index builds the image of s for each platform (s.Platform and s.Binary set per platform by
// binary) into an OCI image index, annotated like the images.
func Index(s Spec, platforms []string, binary func(platform string) string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		ps := s
		ps.Platform, ps.Binary = p, binary(p)
		img, err := Build(ps)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		osName, arch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: osName, Architecture: arch}}})
	}
	annotated, ok := mutate.Annotations(idx, Labels(s)).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index")
	}
	return annotated, nil
}

// tagChars is what a tag may hold; a git describe "v1.2.3+dirty" would not be one.
var tagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tag turns a version into an image tag.
func Tag(version string) string {
	t := tagChars.ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	return t[:min(len(t), 128)]
}

type file struct {
	name string // relative to /
	mode int64
	uid  int
	dir  bool
	data []byte
}

func baseFiles(ca []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", UserName, UID, UID, UserName, UserName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, UID)
	return []file{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl", dir: true, mode: 0o755},
		{name: "etc/ssl/certs", dir: true, mode: 0o755},
		{name: caPath, mode: 0o644, data: ca},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/" + UserName, dir: true, mode: 0o700, uid: UID},
		{name: "tmp", dir: true, mode: 0o1777},
	}
}

// layer writes files into a reproducible tar layer: fixed times and owners, given order.
func layer(mtime time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

var goarchMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// CheckStatic refuses a binary that needs a dynamic loader or shared libraries (the image has
// neither) or that is built for another architecture.
func CheckStatic(bin []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	if want, ok := goarchMachine[arch]; !ok || f.Machine != want {
		return fmt.Errorf("built for %s, want %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (has an ELF interpreter); build with CGO_ENABLED=0 (make build)")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v; build with CGO_ENABLED=0 (make build)", libs)
	}
	return nil
}
