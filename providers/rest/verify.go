// Package rest verifies webhooks from providers that sign the raw body with a plain HMAC sent in
// one header, configured per provider rather than coded.
//
// Such schemes sign no timestamp, so there is no replay window: replay protection is the dedupe
// key alone. When the event id comes from a header, that header is not signed either, and a
// captured body can be replayed under a fresh id; an id read from the body is signed.
package rest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" // HMAC-SHA1 is still sound, and some providers sign only with it.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/hookwarden/hookwarden/providers"
)

// Algorithms.
const (
	SHA256 = "sha256"
	SHA1   = "sha1"
	SHA512 = "sha512"
)

// Encodings.
const (
	Hex    = "hex"
	Base64 = "base64"
)

// Config describes one provider's HMAC scheme.
type Config struct {
	// Header carries the signature. Required.
	Header string
	// Algorithm is the HMAC hash: "sha256" (the default when empty), "sha1" or "sha512".
	Algorithm string
	// Encoding is how the signature is written: "hex" (the default when empty; either case of
	// digits) or "base64" (standard alphabet, padding optional).
	Encoding string
	// Prefix precedes the encoded signature, e.g. "sha256="; it is matched exactly.
	Prefix string
	// EventIDHeader names a header that carries the event id. Optional.
	EventIDHeader string
	// EventIDField is the body's JSON field that carries the event id: a top-level name ("id") or
	// a dotted path through nested objects ("data.id"); keys containing "." cannot be named. A
	// string or a number qualifies. Optional.
	EventIDField string
}

// Verifier checks a Config's HMAC scheme. Build it with NewVerifier.
type Verifier struct {
	cfg     Config
	newHash func() hash.Hash
	size    int
	decode  func(string) ([]byte, error)
	encode  func([]byte) string
	path    []string
}

var _ providers.Verifier = (*Verifier)(nil)

// Strict decoders, so each signature has one spelling in either alphabet variant.
var (
	base64Padded   = base64.StdEncoding.Strict()
	base64Unpadded = base64.RawStdEncoding.Strict()
)

// NewVerifier validates cfg, fills in the default algorithm and encoding, and returns its
// Verifier. The error names the offending field; cfg holds no secret.
func NewVerifier(cfg Config) (*Verifier, error) {
	v := &Verifier{cfg: cfg}
	if !httpguts.ValidHeaderFieldName(cfg.Header) {
		return nil, fmt.Errorf("rest: header %q is not a valid HTTP header name", cfg.Header)
	}
	if cfg.EventIDHeader != "" && !httpguts.ValidHeaderFieldName(cfg.EventIDHeader) {
		return nil, fmt.Errorf("rest: event id header %q is not a valid HTTP header name", cfg.EventIDHeader)
	}

	switch cfg.Algorithm {
	case SHA256, "":
		v.cfg.Algorithm, v.newHash = SHA256, sha256.New
	case SHA1:
		v.newHash = sha1.New
	case SHA512:
		v.newHash = sha512.New
	default:
		return nil, fmt.Errorf("rest: unknown algorithm %q (want %s, %s or %s)", cfg.Algorithm, SHA256, SHA1, SHA512)
	}
	v.size = v.newHash().Size()

	switch cfg.Encoding {
	case Hex, "":
		v.cfg.Encoding, v.decode, v.encode = Hex, hex.DecodeString, hex.EncodeToString
	case Base64:
		v.decode = func(s string) ([]byte, error) {
			b, err := base64Padded.DecodeString(s)
			if err != nil {
				b, err = base64Unpadded.DecodeString(s)
			}
			return b, err
		}
		v.encode = base64.StdEncoding.EncodeToString
	default:
		return nil, fmt.Errorf("rest: unknown encoding %q (want %s or %s)", cfg.Encoding, Hex, Base64)
	}

	if cfg.EventIDField != "" {
		v.path = strings.Split(cfg.EventIDField, ".")
		for _, key := range v.path {
			if key == "" {
				return nil, fmt.Errorf("rest: event id field %q has an empty path element", cfg.EventIDField)
			}
		}
	}
	return v, nil
}

// Sign returns the header value the provider would send for body signed with secret: the
// prefix and the encoded HMAC (lower-case hex, or padded base64).
func (v *Verifier) Sign(secret, body []byte) string {
	return v.cfg.Prefix + v.encode(v.mac(secret, body))
}

// Verify accepts the delivery if the signature header matches any of the secrets. The event id
// is, in order: the EventIDHeader value, the EventIDField value, or else the hex SHA-256 of the
// raw body with IDFallback set. A body hash deduplicates only when the provider re-sends
// byte-identical bodies; one that embeds a per-attempt field (a timestamp, an attempt counter)
// gets a new key on every retry. d.Now is not used: nothing signed carries a time.
//
// Errors wrap a providers sentinel and never contain a secret or a signature:
//   - ErrNoSignature: the header is missing or empty;
//   - ErrMalformed: the header appears more than once, lacks the prefix, or is not an encoded
//     digest of the algorithm's size;
//   - ErrBadSignature: nothing matches (wrong secret, tampered body, no usable secret).
//
// Empty secrets are skipped: an empty HMAC key is not a secret.
func (v *Verifier) Verify(d providers.Delivery, secrets [][]byte) (providers.Verified, error) {
	values := d.Header.Values(v.cfg.Header)
	if len(values) == 0 || values[0] == "" {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrNoSignature, "the %s header is missing", v.cfg.Header)
	}
	if len(values) > 1 {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "%d %s headers, want one", len(values), v.cfg.Header)
	}
	encoded, ok := strings.CutPrefix(values[0], v.cfg.Prefix)
	if !ok {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "the %s value does not start with %q", v.cfg.Header, v.cfg.Prefix)
	}
	got, err := v.decode(encoded)
	if err != nil || len(got) != v.size {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "the %s value is not a %s %s digest", v.cfg.Header, v.cfg.Encoding, v.cfg.Algorithm)
	}

	matched, usable := providers.MatchAny(secrets, func(secret []byte) []byte { return v.mac(secret, d.Body) }, got)
	if !matched {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrBadSignature, "the signature matches none of %d secrets", usable)
	}

	if v.cfg.EventIDHeader != "" {
		if id := d.Header.Get(v.cfg.EventIDHeader); id != "" {
			return providers.Verified{EventID: id}, nil
		}
	}
	if v.path != nil {
		if id, ok := field(d.Body, v.path); ok {
			return providers.Verified{EventID: id}, nil
		}
	}
	sum := sha256.Sum256(d.Body)
	return providers.Verified{EventID: hex.EncodeToString(sum[:]), IDFallback: true}, nil
}

func (v *Verifier) mac(secret, body []byte) []byte {
	m := hmac.New(v.newHash, secret)
	m.Write(body)
	return m.Sum(nil)
}

// field follows path through nested JSON objects (keys matched exactly) and returns a non-empty
// string, or a number as written.
func field(body []byte, path []string) (string, bool) {
	raw := json.RawMessage(body)
	for _, key := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", false
		}
		var ok bool
		if raw, ok = obj[key]; !ok {
			return "", false
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var val any
	if dec.Decode(&val) != nil {
		return "", false
	}
	switch x := val.(type) {
	case string:
		return x, x != ""
	case json.Number:
		return x.String(), true
	}
	return "", false
}
