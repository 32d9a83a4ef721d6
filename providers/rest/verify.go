// Package rest is the provider for any webhook-management REST API that a declarative Profile
// describes (profile.go), and the verifiers its deliveries are checked with (verify.go,
// spec.go): HMAC schemes configured rather than coded, Standard Webhooks, shared tokens.
//
// HMAC schemes that sign no timestamp have no replay window: replay protection is the dedupe
// key alone. When the event id comes from a header that is not signed, a captured delivery
// could be resent under a fresh id, so such a scheme's deliveries carry the digest of their
// signed content as ReplayKey, which the receiver dedupes on too; an id read from the body is
// signed, and so is a body hash.
package rest

import (
	"crypto/hmac"
	"crypto/sha1" // HMAC-SHA1 is still sound, and some providers sign only with it.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/hookwarden/hookwarden/internal/jsonscan"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/standardwebhooks"
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
	Header string `json:"header"`
	// Algorithm is the HMAC hash: "sha256" (the default when empty), "sha1" or "sha512".
	Algorithm string `json:"algorithm,omitempty"`
	// Encoding is how the signature is written: "hex" (the default when empty; either case of
	// digits) or "base64" (standard alphabet, padding optional).
	Encoding string `json:"encoding,omitempty"`
	// Prefix precedes the header's value, e.g. "sha256="; it is matched exactly.
	Prefix string `json:"prefix,omitempty"`
	// Separator splits the value into several elements (PagerDuty "," for
	// "v1=<hex>,v1=<hex>"; Calendly "," for "t=<unix>,v1=<hex>"); empty: one signature.
	Separator string `json:"separator,omitempty"`
	// ElementPrefix marks the elements that are signatures ("v1="); others are ignored, and the
	// prefix is stripped. Only with Separator.
	ElementPrefix string `json:"elementPrefix,omitempty"`
	// Content is what is signed: "{body}" (the default), or a format of {timestamp}, {id} and
	// {body} with literal text between, e.g. "{timestamp}{body}" (Zendesk),
	// "{timestamp}.{body}" (Calendly, Stripe), "{id}.{timestamp}.{body}".
	Content string `json:"content,omitempty"`
	// KeyEncoding is how a secret becomes the HMAC key: "raw" (its bytes; the default) or
	// "base64" (after an optional "whsec_" prefix, as Standard Webhooks senders do).
	KeyEncoding string `json:"keyEncoding,omitempty"`
	// TimestampHeader carries the signed timestamp; TimestampElement instead names the
	// element prefix that carries it inside the signature header ("t=").
	TimestampHeader  string `json:"timestampHeader,omitempty"`
	TimestampElement string `json:"timestampElement,omitempty"`
	// TimestampFormat is "unix" (seconds; the default) or "rfc3339" (Zendesk).
	TimestampFormat string `json:"timestampFormat,omitempty"`
	// Tolerance is how far the signed timestamp may lie from the receiver's clock, either way;
	// zero checks no age (Zendesk documents no window).
	Tolerance Duration `json:"tolerance,omitempty"`
	// EventIDHeader names a header that carries the event id. Optional.
	EventIDHeader string `json:"eventIDHeader,omitempty"`
	// EventIDField is the body's JSON field that carries the event id: a top-level name ("id") or
	// a dotted path through nested objects ("data.id"); keys containing "." cannot be named. A
	// string or a number qualifies. Optional.
	EventIDField string `json:"eventIDField,omitempty"`
	// IDHeader is the header whose value is {id} in Content (Standard-Webhooks-like HMACs).
	IDHeader string `json:"idHeader,omitempty"`
}

// Verifier checks a Config's HMAC scheme. Build it with NewVerifier.
type Verifier struct {
	cfg     Config
	newHash func() hash.Hash
	size    int
	decode  func(string) ([]byte, error)
	encode  func([]byte) string
	path    []string
	content []contentPart
	key     func([]byte) ([]byte, bool)
}

var _ providers.Verifier = (*Verifier)(nil)

// Strict decoders, so each signature has one spelling in either alphabet variant.
var (
	base64Padded   = base64.StdEncoding.Strict()
	base64Unpadded = base64.RawStdEncoding.Strict()
)

// Key encodings and timestamp formats.
const (
	KeyRaw           = "raw"
	KeyBase64        = "base64"
	TimestampUnix    = "unix"
	TimestampRFC3339 = "rfc3339"
)

// contentPart is one piece of the signed content: literal text or a placeholder.
type contentPart struct {
	lit   string
	field string // "", "body", "timestamp" or "id"
}

// parseContent splits a Content format into parts; only {body}, {timestamp} and {id} exist.
func parseContent(format string) ([]contentPart, error) {
	if format == "" {
		format = "{body}"
	}
	var parts []contentPart
	rest := format
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			parts = append(parts, contentPart{lit: rest})
			break
		}
		if i > 0 {
			parts = append(parts, contentPart{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("rest: content %q has an unclosed {", format)
		}
		name := rest[i+1 : i+j]
		switch name {
		case "body", "timestamp", "id":
		default:
			return nil, fmt.Errorf("rest: content %q names {%s}; only {body}, {timestamp} and {id} exist", format, name)
		}
		parts = append(parts, contentPart{field: name})
		rest = rest[i+j+1:]
	}
	return parts, nil
}

func (v *Verifier) uses(field string) bool {
	for _, p := range v.content {
		if p.field == field {
			return true
		}
	}
	return false
}

// NewVerifier validates cfg, fills in the default algorithm and encoding, and returns its
// Verifier. The error names the offending field; cfg holds no secret.
//
//nolint:funlen // one check per configuration field, in the schema's order
func NewVerifier(cfg Config) (*Verifier, error) {
	v := &Verifier{cfg: cfg}
	for name, h := range map[string]string{"header": cfg.Header, "event id header": cfg.EventIDHeader, "timestamp header": cfg.TimestampHeader, "id header": cfg.IDHeader} {
		if (h != "" || name == "header") && !httpguts.ValidHeaderFieldName(h) {
			return nil, fmt.Errorf("rest: %s %q is not a valid HTTP header name", name, h)
		}
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

	switch cfg.KeyEncoding {
	case KeyRaw, "":
		v.key = func(s []byte) ([]byte, bool) { return s, true }
	case KeyBase64:
		v.key = func(s []byte) ([]byte, bool) {
			k, err := standardwebhooks.DecodeSecret(s)
			return k, err == nil
		}
	default:
		return nil, fmt.Errorf("rest: unknown key encoding %q (want %s or %s)", cfg.KeyEncoding, KeyRaw, KeyBase64)
	}

	if cfg.ElementPrefix != "" && cfg.Separator == "" {
		return nil, errors.New("rest: elementPrefix needs a separator")
	}
	if cfg.TimestampElement != "" && cfg.Separator == "" {
		return nil, errors.New("rest: timestampElement needs a separator")
	}
	if cfg.TimestampElement != "" && cfg.TimestampHeader != "" {
		return nil, errors.New("rest: set timestampHeader or timestampElement, not both")
	}
	switch cfg.TimestampFormat {
	case "", TimestampUnix, TimestampRFC3339:
	default:
		return nil, fmt.Errorf("rest: unknown timestamp format %q (want %s or %s)", cfg.TimestampFormat, TimestampUnix, TimestampRFC3339)
	}
	if cfg.Tolerance < 0 {
		return nil, errors.New("rest: tolerance must not be negative")
	}
	var err error
	if v.content, err = parseContent(cfg.Content); err != nil {
		return nil, err
	}
	hasTS := cfg.TimestampHeader != "" || cfg.TimestampElement != ""
	if v.uses("timestamp") != hasTS {
		return nil, errors.New("rest: content names {timestamp} exactly when timestampHeader or timestampElement is set")
	}
	if cfg.Tolerance > 0 && !hasTS {
		return nil, errors.New("rest: a tolerance needs a signed timestamp")
	}
	if v.uses("id") != (cfg.IDHeader != "") {
		return nil, errors.New("rest: content names {id} exactly when idHeader is set")
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
// prefix and the encoded HMAC (lower-case hex, or padded base64). It signs the body alone;
// SignAt signs a Content with a timestamp or id.
func (v *Verifier) Sign(secret, body []byte) string {
	return v.SignAt(secret, "", "", body)
}

// SignAt is Sign for a Content that names {id} or {timestamp}: both as sent in their headers.
// With a separator the value is one element (the element prefix and the signature), and with a
// timestamp element that element comes first.
func (v *Verifier) SignAt(secret []byte, id, timestamp string, body []byte) string {
	key, _ := v.key(secret)
	sig := v.cfg.ElementPrefix + v.encode(v.mac(key, id, timestamp, body))
	if v.cfg.TimestampElement != "" {
		sig = v.cfg.TimestampElement + timestamp + v.cfg.Separator + sig
	}
	return v.cfg.Prefix + sig
}

// Verify accepts the delivery if the signature header matches any of the secrets. The event id
// is, in order: the EventIDHeader value, the EventIDField value, or else the hex SHA-256 of the
// raw body with IDFallback set. A body hash deduplicates only when the provider re-sends
// byte-identical bodies; one that embeds a per-attempt field (a timestamp, an attempt counter)
// gets a new key on every retry. d.Now is used only when a Tolerance is set.
//
// Errors wrap a providers sentinel and never contain a secret or a signature:
//   - ErrNoSignature: the header is missing or empty;
//   - ErrNoEventID: the content names {id} and its header is missing;
//   - ErrMalformed: the header appears more than once, lacks the prefix, holds no signature
//     element, or a signature that is not an encoded digest of the algorithm's size; the signed
//     timestamp is missing or not in its format;
//   - ErrBadSignature: nothing matches (wrong secret, tampered body, no usable secret);
//   - ErrTooOld / ErrTooNew: authentic, but outside the tolerance.
//
// Empty secrets are skipped: an empty HMAC key is not a secret.
//
//nolint:funlen // the verification steps in the order a signature scheme defines them
func (v *Verifier) Verify(d providers.Delivery, secrets [][]byte) (providers.Verified, error) {
	values := d.Header.Values(v.cfg.Header)
	if len(values) == 0 || values[0] == "" {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrNoSignature, "the %s header is missing", v.cfg.Header)
	}
	if len(values) > 1 {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "%d %s headers, want one", len(values), v.cfg.Header)
	}
	value, ok := strings.CutPrefix(values[0], v.cfg.Prefix)
	if !ok {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "the %s value does not start with %q", v.cfg.Header, v.cfg.Prefix)
	}
	elements := []string{value}
	if v.cfg.Separator != "" {
		elements = strings.Split(value, v.cfg.Separator)
	}
	var sigs [][]byte
	timestamp := ""
	for _, e := range elements {
		e = strings.TrimSpace(e)
		if v.cfg.TimestampElement != "" {
			if ts, ok := strings.CutPrefix(e, v.cfg.TimestampElement); ok {
				timestamp = ts
				continue
			}
		}
		sig, ok := strings.CutPrefix(e, v.cfg.ElementPrefix)
		if !ok {
			continue // another scheme's element (v0=, v1a,)
		}
		got, err := v.decode(sig)
		if err != nil || len(got) != v.size {
			if v.cfg.Separator != "" {
				continue // one bad element among several does not hide a good one
			}
			return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "the %s value is not a %s %s digest", v.cfg.Header, v.cfg.Encoding, v.cfg.Algorithm)
		}
		sigs = append(sigs, got)
	}
	if len(sigs) == 0 {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "the %s value holds no %s %s digest after %q", v.cfg.Header, v.cfg.Encoding, v.cfg.Algorithm, v.cfg.ElementPrefix)
	}
	id := ""
	if v.cfg.IDHeader != "" {
		if id = d.Header.Get(v.cfg.IDHeader); id == "" {
			return providers.Verified{}, providers.VerifyError("rest", providers.ErrNoEventID, "the %s header is missing", v.cfg.IDHeader)
		}
	}
	var signedAt int64
	if v.uses("timestamp") {
		if v.cfg.TimestampHeader != "" {
			timestamp = d.Header.Get(v.cfg.TimestampHeader)
		}
		var err error
		if signedAt, err = v.parseTimestamp(timestamp); err != nil {
			return providers.Verified{}, err
		}
	}

	matched, usable := providers.MatchAny(secrets, func(secret []byte) []byte {
		key, ok := v.key(secret)
		if !ok || len(key) == 0 {
			return nil // never equal to a digest of the algorithm's size
		}
		return v.mac(key, id, timestamp, d.Body)
	}, sigs...)
	if !matched {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrBadSignature, "none of %d signatures matches any of %d secrets", len(sigs), usable)
	}
	if v.cfg.Tolerance > 0 {
		tol := time.Duration(v.cfg.Tolerance)
		if err := providers.CheckAge("rest", d.Now, signedAt, tol, tol); err != nil {
			return providers.Verified{}, err
		}
	}

	if v.cfg.IDHeader != "" {
		if n := len(d.Header.Values(v.cfg.IDHeader)); n > 1 {
			// Only the first is signed; another reader may take another.
			return providers.Verified{}, providers.VerifyError("rest", providers.ErrAmbiguous, "%d %s headers, want one", n, v.cfg.IDHeader)
		}
	}
	got, err := eventID(d, v.cfg.EventIDHeader, v.path)
	if err == nil && v.unsignedID() {
		// Set whichever source gave the id this time: a capture resent with the header added,
		// changed or left out must still find its signed bytes recorded.
		got.ReplayKey = v.signedDigest(id, timestamp, d.Body)
	}
	return got, err
}

// unsignedID reports whether the event id may come from a header the signature does not
// cover: an EventIDHeader other than the signed IDHeader.
func (v *Verifier) unsignedID() bool {
	return v.cfg.EventIDHeader != "" && http.CanonicalHeaderKey(v.cfg.EventIDHeader) != http.CanonicalHeaderKey(v.cfg.IDHeader)
}

// signedDigest is the SHA-256 of exactly the content the HMAC covers.
func (v *Verifier) signedDigest(id, timestamp string, body []byte) string {
	parts := make([][]byte, 0, len(v.content))
	for _, p := range v.content {
		switch p.field {
		case "":
			parts = append(parts, []byte(p.lit))
		case "body":
			parts = append(parts, body)
		case "timestamp":
			parts = append(parts, []byte(timestamp))
		case "id":
			parts = append(parts, []byte(id))
		}
	}
	return providers.Digest(parts...)
}

// parseTimestamp reads the signed timestamp as unix seconds.
func (v *Verifier) parseTimestamp(ts string) (int64, error) {
	where := v.cfg.TimestampHeader
	if where == "" {
		where = v.cfg.Header + " " + v.cfg.TimestampElement
	}
	if ts == "" {
		return 0, providers.VerifyError("rest", providers.ErrMalformed, "the timestamp (%s) is missing", where)
	}
	if v.cfg.TimestampFormat == TimestampRFC3339 {
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return 0, providers.VerifyError("rest", providers.ErrMalformed, "the timestamp (%s) is not RFC 3339", where)
		}
		return t.Unix(), nil
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != ts {
		return 0, providers.VerifyError("rest", providers.ErrMalformed, "the timestamp (%s) is not unix seconds", where)
	}
	return unix, nil
}

func (v *Verifier) mac(key []byte, id, timestamp string, body []byte) []byte {
	m := hmac.New(v.newHash, key)
	for _, p := range v.content {
		switch p.field {
		case "":
			m.Write([]byte(p.lit))
		case "body":
			m.Write(body)
		case "timestamp":
			m.Write([]byte(timestamp))
		case "id":
			m.Write([]byte(id))
		}
	}
	return m.Sum(nil)
}

// field follows path through nested JSON objects (keys matched exactly) and returns a non-empty
// string, or a number as written. A key that more than one member of its object names, in any
// spelling encoding/json would match, is ErrAmbiguous.
func field(body []byte, path []string) (string, bool, error) {
	raw := body
	for depth, key := range path {
		value, named, ok := jsonscan.TopLevelMember(raw, key)
		if named > 1 {
			return "", false, providers.VerifyError("rest", providers.ErrAmbiguous, "%d members name %q of the event id field %q (keys compared as encoding/json does, ignoring case)",
				named, key, strings.Join(path[:depth+1], "."))
		}
		if !ok || value == nil {
			return "", false, nil
		}
		raw = value
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false, nil
		}
		return s, s != "", nil
	case c == '-' || '0' <= c && c <= '9':
		return string(raw), true, nil
	}
	return "", false, nil
}
