package rest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/standardwebhooks"
)

// Verification schemes.
const (
	SchemeHMAC             = "hmac"
	SchemeStandardWebhooks = "standardWebhooks"
	SchemeToken            = "token"
	SchemeNone             = "none"
)

// VerifySpec is how the receiver verifies deliveries of one profile's registrations. The
// manager stores it (VerifierSpec, JSON) in the signing Secret beside the secrets, and the
// receiver builds the verifier from it with NewVerifierFromSpec, reading nothing else.
type VerifySpec struct {
	Scheme string `json:"scheme"`
	// HMAC is the scheme of SchemeHMAC.
	HMAC *Config `json:"hmac,omitempty"`
	// StandardWebhooks configures SchemeStandardWebhooks.
	StandardWebhooks *StandardWebhooksSpec `json:"standardWebhooks,omitempty"`
	// Token configures SchemeToken: the secret itself is sent in a header (GitLab
	// X-Gitlab-Token) and compared in constant time.
	Token *TokenSpec `json:"token,omitempty"`
	// NotIDHeaders are headers that look like ids but are not stable across retries or are
	// shared between events (GitLab X-Gitlab-Event-UUID, X-Gitlab-Webhook-UUID): a profile
	// naming one as its event id is refused.
	NotIDHeaders []string `json:"notIDHeaders,omitempty"`
}

// StandardWebhooksSpec configures the Standard Webhooks verifier.
type StandardWebhooksSpec struct {
	// HeaderPrefix replaces "webhook-" in the header names ("svix-").
	HeaderPrefix string `json:"headerPrefix,omitempty"`
	// Tolerance defaults to standardwebhooks.DefaultTolerance.
	Tolerance Duration `json:"tolerance,omitempty"`
}

// TokenSpec configures the shared-token verifier.
type TokenSpec struct {
	Header string `json:"header"`
	// EventIDHeader and EventIDField are read as in Config; without either the id is a body hash.
	EventIDHeader string `json:"eventIDHeader,omitempty"`
	EventIDField  string `json:"eventIDField,omitempty"`
}

// NewVerifierFromSpec builds the verifier a VerifierSpec describes. SchemeNone yields a nil
// Verifier and no error: deliveries are unsigned, which the receiver must decide to accept.
func NewVerifierFromSpec(spec []byte) (providers.Verifier, error) {
	var s VerifySpec
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("rest: verifier spec: %w", err)
	}
	return s.Verifier()
}

// Verifier builds the verifier s describes (nil for SchemeNone).
func (s VerifySpec) Verifier() (providers.Verifier, error) {
	for _, h := range s.NotIDHeaders {
		if !httpguts.ValidHeaderFieldName(h) {
			return nil, fmt.Errorf("rest: notIDHeaders: %q is not a valid HTTP header name", h)
		}
	}
	notID := func(h string) error {
		if h != "" && slices.ContainsFunc(s.NotIDHeaders, func(n string) bool { return strings.EqualFold(n, h) }) {
			return fmt.Errorf("rest: %s is listed in notIDHeaders: it is no stable event id", h)
		}
		return nil
	}
	set := 0
	for _, b := range []bool{s.HMAC != nil, s.StandardWebhooks != nil, s.Token != nil} {
		if b {
			set++
		}
	}
	want := map[string]bool{SchemeHMAC: s.HMAC != nil, SchemeStandardWebhooks: s.StandardWebhooks != nil, SchemeToken: s.Token != nil, SchemeNone: set == 0}
	ok, known := want[s.Scheme]
	if !known {
		return nil, fmt.Errorf("rest: unknown scheme %q (want %s, %s, %s or %s)", s.Scheme, SchemeHMAC, SchemeStandardWebhooks, SchemeToken, SchemeNone)
	}
	if !ok || set > 1 {
		return nil, fmt.Errorf("rest: scheme %s needs its own block (%s) and no other", s.Scheme, s.Scheme)
	}
	switch s.Scheme {
	case SchemeHMAC:
		if err := errors.Join(notID(s.HMAC.EventIDHeader), notID(s.HMAC.IDHeader)); err != nil {
			return nil, err
		}
		return NewVerifier(*s.HMAC)
	case SchemeStandardWebhooks:
		var opts []standardwebhooks.Option
		if p := s.StandardWebhooks.HeaderPrefix; p != "" {
			if !httpguts.ValidHeaderFieldName(p + "id") {
				return nil, fmt.Errorf("rest: header prefix %q does not make valid HTTP header names", p)
			}
			if err := notID(p + "id"); err != nil {
				return nil, err
			}
			opts = append(opts, standardwebhooks.WithHeaderPrefix(p))
		}
		if t := s.StandardWebhooks.Tolerance; t != 0 {
			if t < 0 {
				return nil, errors.New("rest: tolerance must not be negative")
			}
			opts = append(opts, standardwebhooks.WithTolerance(time.Duration(t)))
		}
		return standardwebhooks.NewVerifier(opts...), nil
	case SchemeToken:
		return newTokenVerifier(*s.Token, notID)
	}
	return nil, nil
}

// TokenVerifier accepts a delivery whose header carries one of the secrets verbatim (GitLab's
// X-Gitlab-Token). Nothing is signed: a captured delivery can be replayed, and dedupe is the
// only replay protection. With an EventIDHeader the id could be swapped for a fresh one, so
// the body's digest is the ReplayKey (the one thing a replay under a fresh id keeps); whoever
// holds the token can forge new bodies anyway, which no receiver can tell from real ones.
type TokenVerifier struct {
	spec TokenSpec
	path []string
}

var _ providers.Verifier = (*TokenVerifier)(nil)

func newTokenVerifier(s TokenSpec, notID func(string) error) (*TokenVerifier, error) {
	if !httpguts.ValidHeaderFieldName(s.Header) {
		return nil, fmt.Errorf("rest: token header %q is not a valid HTTP header name", s.Header)
	}
	if s.EventIDHeader != "" && !httpguts.ValidHeaderFieldName(s.EventIDHeader) {
		return nil, fmt.Errorf("rest: event id header %q is not a valid HTTP header name", s.EventIDHeader)
	}
	if err := notID(s.EventIDHeader); err != nil {
		return nil, err
	}
	v := &TokenVerifier{spec: s}
	if s.EventIDField != "" {
		v.path = strings.Split(s.EventIDField, ".")
		if slices.Contains(v.path, "") {
			return nil, fmt.Errorf("rest: event id field %q has an empty path element", s.EventIDField)
		}
	}
	return v, nil
}

// Verify compares the token header with every secret in constant time (as SHA-256 digests, so
// neither the length nor the content of a secret leaks through timing). Errors wrap
// ErrNoSignature (no header), ErrMalformed (more than one), ErrBadSignature (no match) or
// ErrAmbiguous (the id header twice, or an id field named twice).
func (v *TokenVerifier) Verify(d providers.Delivery, secrets [][]byte) (providers.Verified, error) {
	values := d.Header.Values(v.spec.Header)
	if len(values) == 0 || values[0] == "" {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrNoSignature, "the %s header is missing", v.spec.Header)
	}
	if len(values) > 1 {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrMalformed, "%d %s headers, want one", len(values), v.spec.Header)
	}
	got := sha256.Sum256([]byte(values[0]))
	matched, usable := providers.MatchAny(secrets, func(secret []byte) []byte {
		sum := sha256.Sum256(secret)
		return sum[:]
	}, got[:])
	if !matched {
		return providers.Verified{}, providers.VerifyError("rest", providers.ErrBadSignature, "the %s value matches none of %d secrets", v.spec.Header, usable)
	}
	verified, err := eventID(d, v.spec.EventIDHeader, v.path)
	if err == nil && v.spec.EventIDHeader != "" {
		verified.ReplayKey = providers.Digest(d.Body)
	}
	return verified, err
}

// eventID is the id of an authentic delivery: the header, the body field, or a body hash. A
// header sent more than once, or a field that more than one member names at some level of its
// path, is ErrAmbiguous: deduping on one of them would be a guess.
func eventID(d providers.Delivery, header string, path []string) (providers.Verified, error) {
	if header != "" {
		values := d.Header.Values(header)
		if len(values) > 1 {
			return providers.Verified{}, providers.VerifyError("rest", providers.ErrAmbiguous, "%d %s headers, want one", len(values), header)
		}
		if len(values) == 1 && values[0] != "" {
			return providers.Verified{EventID: values[0]}, nil
		}
	}
	if path != nil {
		id, ok, err := field(d.Body, path)
		if err != nil {
			return providers.Verified{}, err
		}
		if ok {
			return providers.Verified{EventID: id}, nil
		}
	}
	sum := sha256.Sum256(d.Body)
	return providers.Verified{EventID: hex.EncodeToString(sum[:]), IDFallback: true}, nil
}
