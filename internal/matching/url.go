/*
Copyright 2026 The Hookwarden Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package matching decides when a registration found at a provider is the one a
// WebhookSubscription asks for.
//
// Adopting a registration that only looks like ours would send deliveries to the wrong place, so
// the comparison is deliberately narrow: two URLs are the same only when every difference between
// them is one that cannot change the request the provider makes. Providers POST to the path and
// query verbatim, which is why things a browser would happily "clean up" (dot segments, a trailing
// slash, %2F vs /) are kept. Looser resemblance is available through LooseKey, but only to report
// near-twins to a human, never to adopt.
package matching

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// idnaProfile maps an internationalized host to its ASCII (punycode) form the way a resolver
// would (UTS #46 lookup, non-transitional). STD3 rules stay on: they reject compatibility
// characters that map to '/', ':', '@' and the like, which could otherwise smuggle a different
// host past a reviewer.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
)

// Canonical returns the RFC 3986 safe normalization of a webhook URL, or an error for a URL that
// must be refused.
//
// Only differences that cannot change the request are removed: scheme and host case, a default
// or empty port, an empty path, the case of percent-encoding hex digits, percent-encoded
// unreserved characters, the fragment (never sent), and the Unicode vs punycode spelling of a
// host. Everything else, including a trailing slash, dot segments, an empty "?", query order and
// path case, is kept exactly, because the provider POSTs the path and query as written.
//
// The path and query are processed as raw text rather than through net/url, which unescapes and
// re-escapes by its own rules and would blur %2F and /.
//
// Refused: schemes other than http and https, a missing host, credentials in the authority,
// malformed percent-encoding, control characters, spaces or non-ASCII bytes in the path or query
// (they must be percent-encoded), and hosts or ports that are not well formed.
// Canonical(Canonical(x)) == Canonical(x) for every accepted x.
func Canonical(raw string) (string, error) {
	u, err := parse(raw)
	if err != nil {
		return "", &urlError{url: redact(raw), err: err}
	}
	return u.String(), nil
}

// LooseKey returns a key that additionally ignores a trailing slash on the path and http vs
// https. It exists to report near-twins ("you have a hook for http://x/y/ too"); it is never a
// reason to adopt, since those differences do change where deliveries go.
//
// The key is the canonical URL without its scheme ("//host/path?query") and with one trailing
// slash removed from a path other than "/". It returns the same errors as Canonical.
func LooseKey(raw string) (string, error) {
	u, err := parse(raw)
	if err != nil {
		return "", &urlError{url: redact(raw), err: err}
	}
	if len(u.path) > 1 && strings.HasSuffix(u.path, "/") {
		u.path = u.path[:len(u.path)-1]
	}
	u.scheme = ""
	return u.String(), nil
}

// parsed holds a URL split into canonical parts.
type parsed struct {
	scheme   string // "http" or "https"; empty in a loose key
	host     string // lowercase ASCII, IPv6 in brackets
	port     string // empty when default or absent
	path     string // escaped, never empty
	query    string // escaped, without the '?'
	hasQuery bool   // a '?' was present, even with an empty query
}

func (u *parsed) String() string {
	var b strings.Builder
	b.Grow(len(u.scheme) + len(u.host) + len(u.port) + len(u.path) + len(u.query) + 6)
	if u.scheme != "" {
		b.WriteString(u.scheme)
		b.WriteByte(':')
	}
	b.WriteString("//")
	b.WriteString(u.host)
	if u.port != "" {
		b.WriteByte(':')
		b.WriteString(u.port)
	}
	b.WriteString(u.path)
	if u.hasQuery {
		b.WriteByte('?')
		b.WriteString(u.query)
	}
	return b.String()
}

// urlError names the (redacted) URL and the problem, so a status condition can show both.
type urlError struct {
	url string
	err error
}

func (e *urlError) Error() string { return fmt.Sprintf("url %q: %v", e.url, e.err) }
func (e *urlError) Unwrap() error { return e.err }

var errCredentials = errors.New("credentials (user:password@) must not be in the URL")

func parse(raw string) (*parsed, error) {
	// Control characters are refused anywhere: net/url refuses them too, and WHATWG parsers
	// (which some providers use) silently strip tabs and newlines, so the two would disagree.
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f {
			return nil, fmt.Errorf("control character %s at offset %d", describeByte(c), i)
		}
	}

	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || !validScheme(raw[:colon]) {
		return nil, errors.New("missing scheme: must start with https:// or http://")
	}
	u := &parsed{scheme: strings.ToLower(raw[:colon])}
	if u.scheme != "http" && u.scheme != "https" {
		return nil, errors.New("scheme must be http or https")
	}
	rest := raw[colon+1:]
	if !strings.HasPrefix(rest, "//") {
		return nil, errors.New("host required: expected // after the scheme")
	}
	rest = rest[2:]

	// The fragment is never sent to the server, so it cannot matter; it is dropped unread.
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]

	if strings.IndexByte(authority, '@') >= 0 {
		return nil, errCredentials
	}
	host, port, err := splitHostPort(authority)
	if err != nil {
		return nil, err
	}
	if u.host, err = canonicalHost(host); err != nil {
		return nil, err
	}
	if u.port, err = canonicalPort(u.scheme, port); err != nil {
		return nil, err
	}

	path, query, hasQuery := strings.Cut(rest, "?")
	if u.path, err = normalizeEscapes(path, "path"); err != nil {
		return nil, err
	}
	if u.path == "" {
		u.path = "/"
	}
	if u.query, err = normalizeEscapes(query, "query"); err != nil {
		return nil, err
	}
	u.hasQuery = hasQuery
	return u, nil
}

// validScheme reports whether s matches RFC 3986 scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlpha(c):
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// splitHostPort splits an authority without userinfo. An IPv6 literal keeps its brackets.
func splitHostPort(authority string) (host, port string, err error) {
	if strings.HasPrefix(authority, "[") {
		j := strings.IndexByte(authority, ']')
		if j < 0 {
			return "", "", errors.New("invalid host: missing ']' after IPv6 address")
		}
		host, after := authority[:j+1], authority[j+1:]
		if after == "" {
			return host, "", nil
		}
		if after[0] != ':' {
			return "", "", fmt.Errorf("invalid host: unexpected %q after IPv6 address", after)
		}
		return host, after[1:], nil
	}
	host, port, _ = strings.Cut(authority, ":")
	return host, port, nil
}

// canonicalHost lowercases the host and converts an internationalized name to punycode, so that
// the Unicode and the ASCII spelling of the same name compare equal. A trailing dot is kept: it
// is a different (fully qualified) name to TLS and to virtual hosting.
func canonicalHost(host string) (string, error) {
	if host == "" {
		return "", errors.New("host required")
	}
	if host[0] == '[' {
		return canonicalIPv6(host)
	}
	ascii := true
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		host = strings.ToLower(host)
	} else {
		// idna would quietly turn invalid UTF-8 into U+FFFD and punycode that.
		if !utf8.ValidString(host) {
			return "", errors.New("invalid internationalized host: not valid UTF-8")
		}
		a, err := idnaProfile.ToASCII(host)
		if err != nil {
			return "", fmt.Errorf("invalid internationalized host: %v", err)
		}
		host = a
	}
	if err := validHostname(host); err != nil {
		return "", err
	}
	return host, nil
}

// validHostname accepts a lowercase ASCII registered name or IPv4 address: labels of letters,
// digits, '-' and '_' (which some internal names use), and at most one trailing dot.
// Anything else, such as '%', '\' or a sub-delimiter, is refused rather than interpreted,
// because parsers disagree about where such a host ends.
func validHostname(host string) error {
	name := strings.TrimSuffix(host, ".")
	if name == "" {
		return errors.New("host required")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return fmt.Errorf("invalid host %q: empty label", host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !isLowerAlpha(c) && !isDigit(c) && c != '-' && c != '_' {
				return fmt.Errorf("invalid %s in host", describeByte(c))
			}
		}
	}
	return nil
}

// canonicalIPv6 accepts a bracketed IPv6 literal without a zone and lowercases it. The textual
// form is otherwise kept ([::1] and [0::1] stay different); the list of safe normalizations does
// not include rewriting addresses.
func canonicalIPv6(host string) (string, error) {
	inner := host[1 : len(host)-1]
	addr, err := netip.ParseAddr(inner)
	if err != nil || !addr.Is6() || addr.Zone() != "" || strings.IndexByte(inner, '%') >= 0 {
		return "", fmt.Errorf("invalid IPv6 host %q", host)
	}
	return strings.ToLower(host), nil
}

// canonicalPort drops an empty port and the scheme's default port; any other port is kept as
// written (":0443" too, since it changes the Host header).
func canonicalPort(scheme, port string) (string, error) {
	if port == "" {
		return "", nil
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if !isDigit(c) {
			return "", fmt.Errorf("invalid port %q: must be digits", port)
		}
		n = n*10 + int(c-'0')
		if n > 65535 {
			return "", fmt.Errorf("invalid port %q: out of range", port)
		}
	}
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		return "", nil
	}
	return port, nil
}

// normalizeEscapes rewrites the escaped path or query: a percent-encoded unreserved character
// is decoded (RFC 3986 section 6.2.2.2) and other escapes get uppercase hex (section 6.2.2.1).
// Every other byte is kept as written. Reserved escapes such as %2F stay escaped, since a server
// may treat "a%2Fb" as one segment and "a/b" as two.
func normalizeEscapes(s, part string) (string, error) {
	const upperhex = "0123456789ABCDEF"
	var b []byte // allocated on the first change
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("invalid percent-encoding %q in %s", s[i:], part)
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("invalid percent-encoding %q in %s", s[i:i+3], part)
			}
			v := hi<<4 | lo
			var out []byte
			if isUnreserved(v) {
				out = []byte{v}
			} else {
				out = []byte{'%', upperhex[hi], upperhex[lo]}
			}
			if b == nil && string(out) != s[i:i+3] {
				b = append(make([]byte, 0, len(s)), s[:i]...)
			}
			if b != nil {
				b = append(b, out...)
			}
			i += 2
			continue
		case c <= ' ' || c >= 0x7f:
			return "", fmt.Errorf("%s in %s must be percent-encoded", describeByte(c), part)
		}
		if b != nil {
			b = append(b, c)
		}
	}
	if b == nil {
		return s, nil
	}
	return string(b), nil
}

// redact hides userinfo so that an error about credentials does not itself leak them into
// events, logs or status.
func redact(raw string) string {
	prefix, s := "", raw
	if i := strings.Index(s, "//"); i >= 0 && !strings.ContainsAny(s[:i], "/?#") {
		prefix, s = s[:i+2], s[i+2:]
	}
	end := strings.IndexAny(s, "/?#")
	if end < 0 {
		end = len(s)
	}
	if at := strings.LastIndexByte(s[:end], '@'); at >= 0 {
		s = "REDACTED" + s[at:]
	}
	return prefix + s
}

// describeByte names a byte readably: a printable character is quoted, anything else (a
// control character or one byte of a UTF-8 sequence) is shown in hex.
func describeByte(c byte) string {
	if c > ' ' && c < 0x7f {
		return fmt.Sprintf("character %q", rune(c))
	}
	if c == ' ' {
		return "space"
	}
	if c >= 0x80 {
		return fmt.Sprintf("non-ASCII byte 0x%02X", c)
	}
	return fmt.Sprintf("byte 0x%02X", c)
}

func unhex(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isUnreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func isAlpha(c byte) bool      { return isLowerAlpha(c) || ('A' <= c && c <= 'Z') }
func isLowerAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
