// Package github verifies incoming GitHub webhook deliveries.
//
// GitHub signs the raw body with HMAC-SHA256 and sends it as X-Hub-Signature-256. Nothing else is
// signed: there is no timestamp, so there is no replay window, and the X-GitHub-Delivery GUID
// that serves as the dedupe key is an unsigned header. Someone who captured one authentic
// delivery can therefore resend its body under a new GUID, so every verified delivery carries
// the body's digest as its ReplayKey: the receiver dedupes on it too.
package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/hookwarden/hookwarden/providers"
)

// Headers of a GitHub delivery.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the raw body.
	SignatureHeader = "X-Hub-Signature-256"
	// DeliveryHeader carries the delivery GUID. It stays the same on redelivery and is shared by
	// every hook that subscribes to the event.
	DeliveryHeader = "X-GitHub-Delivery"
	// EventHeader names the event ("push", "ping", ...).
	EventHeader = "X-GitHub-Event"
	// PingEvent is the X-GitHub-Event of the test delivery GitHub sends when a hook is created
	// (and on POST …/pings).
	PingEvent = "ping"
	// HookIDHeader carries the id of the hook that sent the delivery.
	HookIDHeader = "X-GitHub-Hook-ID"
	// legacySignatureHeader is the SHA-1 signature, which is never accepted.
	legacySignatureHeader = "X-Hub-Signature"
)

const signaturePrefix = "sha256="

// Verifier checks X-Hub-Signature-256 and takes the dedupe key from X-GitHub-Delivery. Unlike
// go-github's ValidatePayload it never falls back to the SHA-1 X-Hub-Signature.
type Verifier struct {
	perHook bool
}

var _ providers.Verifier = (*Verifier)(nil)

// Option configures a Verifier.
type Option func(*Verifier)

// WithPerHookEventID makes the dedupe key "<X-GitHub-Hook-ID>/<X-GitHub-Delivery>". GitHub
// shares one delivery GUID between every hook subscribed to the event, so with a repository
// hook and an organization hook pointing at the same receiver URL the default key processes
// the event once; this option keys each hook's delivery apart. Both headers are then required.
// The hook id is unsigned, so the ReplayKey stays the body's digest: two hooks' deliveries of
// one event to one route carry the same body and the second is a duplicate all the same. The
// bundled receiver gives every subscription (every hook) a route of its own instead.
func WithPerHookEventID() Option {
	return func(v *Verifier) { v.perHook = true }
}

// NewVerifier returns a Verifier keyed on the delivery GUID unless options say otherwise.
func NewVerifier(opts ...Option) *Verifier {
	v := &Verifier{}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Sign returns the X-Hub-Signature-256 value GitHub would send for body signed with secret.
func Sign(secret, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, body))
}

// Verify accepts the delivery if its X-Hub-Signature-256 matches any of the secrets and it
// carries a delivery GUID. d.Now is not used: GitHub signs no timestamp.
//
// Errors wrap a providers sentinel and never contain a secret or a signature:
//   - ErrNoSignature: no X-Hub-Signature-256, including a request that carries only the SHA-1
//     X-Hub-Signature;
//   - ErrMalformed: several X-Hub-Signature-256 headers, or a value that is not "sha256=" and 64
//     hex digits;
//   - ErrBadSignature: nothing matches (wrong secret, tampered body, no usable secret);
//   - ErrNoEventID: authentic, but X-GitHub-Delivery (or, per hook, X-GitHub-Hook-ID) is missing;
//   - ErrAmbiguous: authentic, but X-GitHub-Delivery, X-GitHub-Event (or, per hook,
//     X-GitHub-Hook-ID) is sent more than once.
//
// Empty secrets are skipped: an empty HMAC key is not a secret.
func (v *Verifier) Verify(d providers.Delivery, secrets [][]byte) (providers.Verified, error) {
	values := d.Header.Values(SignatureHeader)
	if len(values) == 0 || values[0] == "" {
		if d.Header.Get(legacySignatureHeader) != "" {
			return providers.Verified{}, providers.VerifyError("github", providers.ErrNoSignature,
				"only the SHA-1 %s header is present; %s is required", legacySignatureHeader, SignatureHeader)
		}
		return providers.Verified{}, providers.VerifyError("github", providers.ErrNoSignature, "the %s header is missing", SignatureHeader)
	}
	if len(values) > 1 {
		return providers.Verified{}, providers.VerifyError("github", providers.ErrMalformed, "%d %s headers, want one", len(values), SignatureHeader)
	}
	hexSig, ok := strings.CutPrefix(values[0], signaturePrefix)
	if !ok {
		return providers.Verified{}, providers.VerifyError("github", providers.ErrMalformed, "the %s value does not start with %q", SignatureHeader, signaturePrefix)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return providers.Verified{}, providers.VerifyError("github", providers.ErrMalformed, "the %s value is not %q and 64 hex digits", SignatureHeader, signaturePrefix)
	}

	matched, usable := providers.MatchAny(secrets, func(secret []byte) []byte { return mac(secret, d.Body) }, got)
	if !matched {
		return providers.Verified{}, providers.VerifyError("github", providers.ErrBadSignature, "the signature matches none of %d secrets", usable)
	}

	id, err := single(d, DeliveryHeader)
	if err != nil {
		return providers.Verified{}, err
	}
	if id == "" {
		return providers.Verified{}, providers.VerifyError("github", providers.ErrNoEventID, "the %s header is missing", DeliveryHeader)
	}
	if v.perHook {
		hook, err := single(d, HookIDHeader)
		if err != nil {
			return providers.Verified{}, err
		}
		if hook == "" {
			return providers.Verified{}, providers.VerifyError("github", providers.ErrNoEventID, "the %s header is missing", HookIDHeader)
		}
		id = hook + "/" + id
	}
	event, err := single(d, EventHeader)
	if err != nil {
		return providers.Verified{}, err
	}
	// The GUID, the hook id and the event name are unsigned; the body is all that is.
	return providers.Verified{EventID: id, EventType: event, Ping: event == PingEvent, ReplayKey: providers.Digest(d.Body)}, nil
}

// single returns the value of a header that must be sent at most once ("" when it is not):
// several values are ErrAmbiguous, since the dedupe key or type would be a guess among them.
func single(d providers.Delivery, name string) (string, error) {
	values := d.Header.Values(name)
	if len(values) > 1 {
		return "", providers.VerifyError("github", providers.ErrAmbiguous, "%d %s headers, want one", len(values), name)
	}
	if len(values) == 0 {
		return "", nil
	}
	return values[0], nil
}

func mac(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return m.Sum(nil)
}
