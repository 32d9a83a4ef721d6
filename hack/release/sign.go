package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cmutate "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// signer signs OCI manifests as cosign does with a key: a simple-signing payload naming the
// digest, its ECDSA signature in the layer's annotation, under the tag sha256-<hex>.sig.
type signer struct {
	key *ecdsa.PrivateKey
}

// loadSigner reads a cosign private key (PEM "ENCRYPTED SIGSTORE PRIVATE KEY", or the older
// "ENCRYPTED COSIGN PRIVATE KEY") encrypted with password. Only ECDSA keys, what cosign
// generate-key-pair makes: their signatures are made deterministic (RFC 6979), so a release
// signed twice is the same release.
func loadSigner(path string, password []byte) (*signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _ := pem.Decode(b)
	if p == nil || (p.Type != cosign.SigstorePrivateKeyPemType && p.Type != cosign.CosignPrivateKeyPemType) {
		return nil, fmt.Errorf("%s is not a cosign private key (want PEM %q)", path, cosign.SigstorePrivateKeyPemType)
	}
	der, err := encrypted.Decrypt(p.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("decrypting %s (password from COSIGN_PASSWORD): %w", path, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T key; the release signs with ECDSA (cosign generate-key-pair's default)", path, k)
	}
	return &signer{key: ec}, nil
}

// sign signs the manifest d and writes the signature next to it (kept with any it already has;
// an identical one is not added twice), returning the signature's tag@digest.
func (s *signer) sign(d name.Digest, opts []remote.Option) (string, error) {
	msg, err := payload.Cosign{Image: d}.MarshalJSON()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(msg)
	// A nil random source: RFC 6979 deterministic ECDSA.
	der, err := s.key.Sign(nil, sum[:], crypto.SHA256)
	if err != nil {
		return "", err
	}
	sig, err := static.NewSignature(msg, base64.StdEncoding.EncodeToString(der))
	if err != nil {
		return "", err
	}
	ro := ociremote.WithRemoteOptions(opts...)
	se, err := ociremote.SignedEntity(d, ro)
	if err != nil {
		return "", err
	}
	if se, err = cmutate.AttachSignatureToEntity(se, sig); err != nil {
		return "", err
	}
	if err := ociremote.WriteSignatures(d.Context(), se, ro); err != nil {
		return "", err
	}
	tag, err := ociremote.SignatureTag(d, ro)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return "", err
	}
	return tag.String() + "@" + desc.Digest.String(), nil
}

// generateKey writes <prefix>.key (encrypted with password) and <prefix>.pub, as cosign
// generate-key-pair does.
func generateKey(prefix string, password []byte, stdout io.Writer) error {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{prefix + ".key", keys.PrivateBytes, 0o600}, {prefix + ".pub", keys.PublicBytes, 0o644}} {
		if _, err := os.Stat(f.path); err == nil {
			return fmt.Errorf("%s exists; not overwriting it", f.path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", f.path)
	}
	return nil
}
