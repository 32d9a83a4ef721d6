package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// blob is a config or a layer of an artifact.
type blob struct {
	mediaType   types.MediaType
	data        []byte
	annotations map[string]string
}

func (b blob) descriptor() (v1.Descriptor, error) {
	h, n, err := v1.SHA256(bytes.NewReader(b.data))
	return v1.Descriptor{MediaType: b.mediaType, Digest: h, Size: n, Annotations: b.annotations}, err
}

// emptyConfig is OCI 1.1's config of an artifact that has none.
var emptyConfig = blob{mediaType: "application/vnd.oci.empty.v1+json", data: []byte("{}")}

// artifact is an OCI image manifest that carries something other than an image (an SBOM, a
// chart), optionally referring to a subject.
type artifact struct {
	artifactType string
	config       blob
	layers       []blob
	subject      *v1.Descriptor
	annotations  map[string]string
}

// push uploads the artifact's blobs to ref's repository and puts its manifest at ref (a tag, or
// the repository's digest of the manifest); it returns the manifest's digest.
func (a artifact) push(ref func(v1.Hash) name.Reference, opts []remote.Option) (v1.Hash, error) {
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: a.artifactType,
		Subject: a.subject, Annotations: a.annotations}
	var err error
	if m.Config, err = a.config.descriptor(); err != nil {
		return v1.Hash{}, err
	}
	for _, b := range a.layers {
		d, err := b.descriptor()
		if err != nil {
			return v1.Hash{}, err
		}
		m.Layers = append(m.Layers, d)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Hash{}, err
	}
	target := ref(digest)
	for _, b := range append([]blob{a.config}, a.layers...) {
		if err := remote.WriteLayer(target.Context(), static.NewLayer(b.data, b.mediaType), opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("uploading a %s blob: %w", b.mediaType, err)
		}
	}
	if err := remote.Put(target, rawManifest{raw, types.OCIManifestSchema1}, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("putting %s: %w", target, err)
	}
	return digest, nil
}

type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }
