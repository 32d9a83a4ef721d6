// Package standardwebhooks verifies deliveries signed per the Standard Webhooks spec v1.0.0.
//
// The sender signs "{webhook-id}.{webhook-timestamp}.{raw body}" with HMAC-SHA256 keyed with the
// base64-decoded secret and sends "v1,<base64>" entries in webhook-signature. The message id is
// signed, so it is a trustworthy dedupe key; the timestamp is the attempt's and changes on every
// retry.
package standardwebhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/jsonscan"
	"github.com/hookwarden/hookwarden/providers"
)

// Headers of a Standard Webhooks delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far webhook-timestamp may lie from the receiver's clock, in either
// direction. The spec gives no number; this is the reference library's.
const DefaultTolerance = 5 * time.Minute

// SecretPrefix marks a symmetric Standard Webhooks secret.
const SecretPrefix = "whsec_"

// Verifier checks v1 (HMAC-SHA256) signatures. Other versions, such as v1a (ed25519), are
// ignored.
type Verifier struct {
	tolerance time.Duration
	// Header names: the spec's webhook-*, or another prefix's (Svix sends svix-id,
	// svix-timestamp, svix-signature unless white-labelled).
	idHeader, tsHeader, sigHeader string
}

var _ providers.Verifier = (*Verifier)(nil)

// Option configures a Verifier.
type Option func(*Verifier)

// WithTolerance sets how far webhook-timestamp may lie from the receiver's clock in either
// direction (default DefaultTolerance); a negative duration counts as zero.
func WithTolerance(d time.Duration) Option {
	return func(v *Verifier) { v.tolerance = max(d, 0) }
}

// DefaultHeaderPrefix is the spec's header prefix.
const DefaultHeaderPrefix = "webhook-"

// WithHeaderPrefix reads <prefix>id, <prefix>timestamp and <prefix>signature instead of the
// spec's webhook-* headers ("svix-" for Svix and the senders built on it).
func WithHeaderPrefix(prefix string) Option {
	return func(v *Verifier) {
		v.idHeader, v.tsHeader, v.sigHeader = prefix+"id", prefix+"timestamp", prefix+"signature"
	}
}

// NewVerifier returns a Verifier with the default tolerance unless options say otherwise.
func NewVerifier(opts ...Option) *Verifier {
	v := &Verifier{tolerance: DefaultTolerance, idHeader: HeaderID, tsHeader: HeaderTimestamp, sigHeader: HeaderSignature}
	for _, o := range opts {
		o(v)
	}
	return v
}

// DecodeSecret returns the HMAC key of a secret: the base64 after the "whsec_" prefix, or the
// whole secret as base64 when it has no prefix. Padding is optional. The error never contains
// the secret.
func DecodeSecret(secret []byte) ([]byte, error) {
	s := strings.TrimPrefix(string(secret), SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, errors.New("standardwebhooks: the secret is not base64 after the whsec_ prefix")
	}
	return key, nil
}

// Sign returns the webhook-signature entry ("v1,<base64>") for a message. key is the decoded
// secret (see DecodeSecret); ts is truncated to unix seconds, as sent in webhook-timestamp.
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, strconv.FormatInt(ts.Unix(), 10), body))
}

// Verify accepts the delivery if any v1 entry of webhook-signature matches any of the secrets
// ("whsec_" + base64, or bare base64) and webhook-timestamp is within the tolerance of d.Now
// (time.Now when zero). The dedupe key is webhook-id; the event type is the body's top-level
// "type" when the body is a JSON object that has one.
//
// Signatures are compared as canonical base64 text, as the reference library does.
//
// Errors wrap a providers sentinel and never contain a secret or a signature:
//   - ErrNoSignature: no webhook-signature header, or an empty one;
//   - ErrNoEventID: no webhook-id header (it is part of the signed content, so it is checked first);
//   - ErrMalformed: no webhook-timestamp, one that is not canonical decimal unix seconds, or no
//     v1 entry at all (for example only v1a);
//   - ErrBadSignature: nothing matches (wrong secret, tampered body or id or timestamp, or no
//     secret that decodes; the message counts the secrets that did not);
//   - ErrTooOld / ErrTooNew: authentic, but the timestamp is outside the tolerance;
//   - ErrAmbiguous: authentic, but webhook-id is sent more than once (only the first is
//     signed) or the body has more than one top-level "type" member.
//
// Secrets that decode to no bytes are skipped: an empty HMAC key is not a secret.
func (v *Verifier) Verify(d providers.Delivery, secrets [][]byte) (providers.Verified, error) {
	sigHeader := d.Header.Get(v.sigHeader)
	if sigHeader == "" {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrNoSignature, "the %s header is missing", v.sigHeader)
	}
	id := d.Header.Get(v.idHeader)
	if id == "" {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrNoEventID, "the %s header is missing", v.idHeader)
	}
	ts := d.Header.Get(v.tsHeader)
	if ts == "" {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrMalformed, "the %s header is missing", v.tsHeader)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != ts {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrMalformed, "%s is not unix seconds", v.tsHeader)
	}

	var sigs [][]byte
	for entry := range strings.SplitSeq(sigHeader, " ") {
		if version, sig, ok := strings.Cut(entry, ","); ok && version == "v1" {
			sigs = append(sigs, []byte(sig))
		}
	}
	if len(sigs) == 0 {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrMalformed, "%s has no v1 entry", v.sigHeader)
	}

	// The HMAC key is the base64-decoded secret; a secret that does not decode is skipped.
	keys := make([][]byte, 0, len(secrets))
	undecodable := 0
	for _, secret := range secrets {
		key, err := DecodeSecret(secret)
		if err != nil {
			undecodable++
			continue
		}
		keys = append(keys, key)
	}
	matched, usable := providers.MatchAny(keys, func(key []byte) []byte {
		return []byte(base64.StdEncoding.EncodeToString(mac(key, id, ts, d.Body)))
	}, sigs...)
	if !matched {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrBadSignature,
			"none of %d v1 signatures matches any of %d secrets (%d more secrets are not base64)", len(sigs), usable, undecodable)
	}

	if err := providers.CheckAge("standardwebhooks", d.Now, unix, v.tolerance, v.tolerance); err != nil {
		return providers.Verified{}, err
	}
	if n := len(d.Header.Values(v.idHeader)); n > 1 {
		return providers.Verified{}, providers.VerifyError("standardwebhooks", providers.ErrAmbiguous, "%d %s headers, want one", n, v.idHeader)
	}
	typ, err := eventType(d.Body)
	if err != nil {
		return providers.Verified{}, err
	}
	return providers.Verified{EventID: id, EventType: typ}, nil
}

// mac is HMAC-SHA256 over "{id}.{timestamp}.{body}", timestamp exactly as sent.
func mac(key []byte, id, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// eventType reads the spec's recommended top-level "type"; it is informational, so anything
// else yields "", but a JSON object with two members that name it (in any spelling
// encoding/json would match) is ErrAmbiguous: the sink might read the other.
func eventType(body []byte) (string, error) {
	var typ [1]string
	if ok, ambiguous := jsonscan.UniqueTopLevelStrings(body, typ[:], "type"); ok && ambiguous >= 0 {
		return "", providers.VerifyError("standardwebhooks", providers.ErrAmbiguous, `the body has more than one top-level "type" member (keys compared as encoding/json does, ignoring case)`)
	}
	return typ[0], nil
}
