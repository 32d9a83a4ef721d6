package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/generate/bin"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/rs/zerolog"

	"github.com/hookwarden/hookwarden/hack/internal/imagebuild"
)

// sbomMediaType is CycloneDX JSON's media type, the SBOM referrer's artifactType.
const sbomMediaType = "application/vnd.cyclonedx+json"

// generator is the module that writes the SBOMs, named with its version in each.
const generator = "github.com/CycloneDX/cyclonedx-gomod"

// sbom is the CycloneDX SBOM of image at (its index): cyclonedx-gomod's reading of the modules
// linked into each platform's binary (the same modules on every platform, or it fails), the Go
// standard library, and the image's other file, the CA bundle. Binary hashes and GOARCH, which
// differ by platform, become one property per platform. Timestamp and serial number follow from
// the release (SOURCE_DATE_EPOCH, the index digest), so the same release gives the same bytes.
// It returns the JSON and the number of components.
func sbom(s imagebuild.Spec, at name.Digest, platforms []string, binary func(string) string) ([]byte, int, error) {
	var bom *cdx.BOM
	var modules []string
	var props []cdx.Property
	for _, p := range platforms {
		g, err := bin.NewGenerator(binary(p), bin.WithIncludeStdlib(true), bin.WithLogger(zerolog.Nop()),
			bin.WithVersionOverride("v"+strings.TrimPrefix(s.Version, "v")))
		if err != nil {
			return nil, 0, err
		}
		b, err := g.Generate()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", p, err)
		}
		var purls []string
		for _, c := range *b.Components {
			purls = append(purls, strings.SplitN(c.PackageURL, "?", 2)[0])
		}
		slices.Sort(purls)
		if bom == nil {
			bom, modules = b, purls
		} else if !slices.Equal(modules, purls) {
			return nil, 0, fmt.Errorf("the %s binary links other modules than the %s one", p, platforms[0])
		}
		for _, prop := range *b.Metadata.Properties {
			if prop.Name == "cdx:gomod:binary:hash:SHA-256" {
				props = append(props, cdx.Property{Name: "hookwarden:binary:" + p + ":sha256", Value: prop.Value})
			}
		}
	}
	for _, prop := range *bom.Metadata.Properties {
		if !strings.Contains(prop.Name, ":binary:hash:") && !strings.HasSuffix(prop.Name, ":GOARCH") {
			props = append(props, prop)
		}
	}
	props = append(props, cdx.Property{Name: "hookwarden:image", Value: at.String()}, cdx.Property{Name: "hookwarden:platforms", Value: strings.Join(platforms, ",")})
	bom.Metadata.Properties = &props

	ca, err := os.ReadFile(s.CABundle)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the CA bundle: %w", err)
	}
	caSum := sha256.Sum256(ca)
	components := append(*bom.Components, cdx.Component{Type: cdx.ComponentTypeFile, BOMRef: "file:/etc/ssl/certs/ca-certificates.crt",
		Name: "/etc/ssl/certs/ca-certificates.crt", Description: "CA certificates the binary trusts (SSL_CERT_FILE)",
		Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(caSum[:])}}})
	bom.Components = &components

	bom.Metadata.Timestamp = s.Created.UTC().Format(time.RFC3339)
	bom.Metadata.Tools = &cdx.ToolsChoice{Components: &[]cdx.Component{{Type: cdx.ComponentTypeApplication, Name: generator, Version: moduleVersion(generator)}}}
	bom.SerialNumber = serialNumber(at.DigestStr())

	var out bytes.Buffer
	enc := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, 0, err
	}
	return out.Bytes(), len(components), nil
}

// serialNumber is a version 5 style UUID URN named by the image's digest.
func serialNumber(digest string) string {
	h := sha256.Sum256([]byte("hookwarden sbom " + digest))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	x := hex.EncodeToString(h[:16])
	return "urn:uuid:" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// moduleVersion is the version of module path linked into this program.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// attachSBOM pushes the SBOM as an OCI referrer of the index at, returning its digest.
func (r *release) attachSBOM(at name.Digest, idx v1.ImageIndex, n string, bom []byte) (v1.Hash, error) {
	raw, err := idx.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return v1.Hash{}, err
	}
	subject := blob{mediaType: mt, data: raw}
	sd, err := subject.descriptor()
	if err != nil {
		return v1.Hash{}, err
	}
	a := artifact{artifactType: sbomMediaType, config: emptyConfig, subject: &sd,
		layers:      []blob{{mediaType: sbomMediaType, data: bom, annotations: map[string]string{"org.opencontainers.image.title": n + ".cdx.json"}}},
		annotations: map[string]string{"org.opencontainers.image.created": r.spec.Created.UTC().Format(time.RFC3339)}}
	return a.push(func(h v1.Hash) name.Reference { return at.Context().Digest(h.String()) }, r.remote)
}
