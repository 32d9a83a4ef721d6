/*
Copyright 2026 The Hookwarden Authors.

Licensed under the Apache License, Version 2.0.
*/

package matching

import (
	"net/url"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, want, reason string
	}{
		{"https://example.com/hook", "https://example.com/hook", "already canonical"},
		{"HTTPS://Example.COM/hook", "https://example.com/hook", "scheme and host are case-insensitive"},
		{"https://example.com/Hook", "https://example.com/Hook", "path case is significant"},
		{"https://example.com:443/hook", "https://example.com/hook", "443 is the https default"},
		{"http://example.com:80/hook", "http://example.com/hook", "80 is the http default"},
		{"https://example.com:/hook", "https://example.com/hook", "an empty port means the default"},
		{"https://example.com:80/hook", "https://example.com:80/hook", "80 is not the https default"},
		{"http://example.com:443/hook", "http://example.com:443/hook", "443 is not the http default"},
		{"https://example.com:8443/hook", "https://example.com:8443/hook", "non-default port kept"},
		{"https://example.com:0443/hook", "https://example.com:0443/hook", "a leading zero changes the Host header; kept"},
		{"https://example.com", "https://example.com/", "empty path is /"},
		{"https://example.com?x=1", "https://example.com/?x=1", "empty path is / even with a query"},
		{"https://example.com:443", "https://example.com/", "default port and empty path together"},
		{"https://example.com/a%2fb", "https://example.com/a%2Fb", "hex digits uppercased; %2F stays escaped"},
		{"https://example.com/a%7Eb", "https://example.com/a~b", "%7E is unreserved ~"},
		{"https://example.com/%73tripe", "https://example.com/stripe", "%73 is unreserved s"},
		{"https://example.com/%41%5a%30%2D%2E%5F", "https://example.com/AZ0-._", "all unreserved classes decode"},
		{"https://example.com/a%c3%bcb", "https://example.com/a%C3%BCb", "non-ASCII stays escaped with uppercase hex"},
		{"https://example.com/a%20b", "https://example.com/a%20b", "space stays escaped"},
		{"https://example.com/a|b{c}^", "https://example.com/a|b{c}^", "net/url would escape these; we keep them as written"},
		{"https://example.com/a;b,c=d", "https://example.com/a;b,c=d", "sub-delimiters kept"},
		{"https://example.com/a/./b/../c", "https://example.com/a/./b/../c", "dot segments are not removed"},
		{"https://example.com/a/%2E/b", "https://example.com/a/./b", "%2E decodes like any unreserved escape, and the dot segment it makes is kept"},
		{"https://example.com/hook/", "https://example.com/hook/", "trailing slash kept"},
		{"https://example.com//hook", "https://example.com//hook", "double slash kept"},
		{"https://example.com/hook?", "https://example.com/hook?", "empty query kept"},
		{"https://example.com/hook?b=2&a=1", "https://example.com/hook?b=2&a=1", "query order kept"},
		{"https://example.com/hook?a=%7e&b=%2f&c=%2B&d=+&e=%20", "https://example.com/hook?a=~&b=%2F&c=%2B&d=+&e=%20", "query escapes normalized like the path; + and %20 untouched"},
		{"https://example.com/hook?x=a?b/c", "https://example.com/hook?x=a?b/c", "? and / inside the query kept"},
		{"https://example.com/hook#frag", "https://example.com/hook", "fragment never sent"},
		{"https://example.com/hook?#", "https://example.com/hook?", "fragment dropped, empty query kept"},
		{"https://example.com#%zz", "https://example.com/", "the dropped fragment is not validated"},
		{"https://example.com./hook", "https://example.com./hook", "trailing dot on host kept"},
		{"https://bücher.example/hook", "https://xn--bcher-kva.example/hook", "IDN to punycode"},
		{"https://BÜCHER.example/hook", "https://xn--bcher-kva.example/hook", "IDN case-mapped before punycode"},
		{"https://XN--BCHER-KVA.example/hook", "https://xn--bcher-kva.example/hook", "punycode lowercased"},
		{"https://bücher.example./hook", "https://xn--bcher-kva.example./hook", "trailing dot survives IDN"},
		{"https://exa\u00admple.com/hook", "https://example.com/hook", "UTS #46 maps a soft hyphen to nothing, as resolvers and browsers do"},
		{"https://ｅｘａｍｐｌｅ．ｃｏｍ/hook", "https://example.com/hook", "UTS #46 maps fullwidth letters and dots to ASCII"},
		{"https://my_service.internal/hook", "https://my_service.internal/hook", "underscore tolerated in ASCII hosts"},
		{"http://192.0.2.1:8080/hook", "http://192.0.2.1:8080/hook", "IPv4 host"},
		{"http://[2001:DB8::1]:8080/hook", "http://[2001:db8::1]:8080/hook", "IPv6 lowercased"},
		{"https://[::1]:443/", "https://[::1]/", "default port dropped after IPv6"},
		{"https://example.com/a@b:c", "https://example.com/a@b:c", "@ and : in the path are not userinfo"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if err != nil {
			t.Errorf("Canonical(%q) error %v; want %q (%s)", tt.in, err, tt.want, tt.reason)
			continue
		}
		if got != tt.want {
			t.Errorf("Canonical(%q) = %q; want %q (%s)", tt.in, got, tt.want, tt.reason)
		}
		if again, err := Canonical(got); err != nil || again != got {
			t.Errorf("Canonical(%q) = %q, %v; not idempotent (%s)", got, again, err, tt.reason)
		}
	}
}

func TestCanonicalEqualPairs(t *testing.T) {
	tests := []struct {
		a, b, reason string
	}{
		{"https://Example.COM/hook", "https://example.com/hook", "host case"},
		{"HTTPS://example.com/hook", "https://example.com/hook", "scheme case"},
		{"https://example.com:443/hook", "https://example.com/hook", "default https port"},
		{"http://example.com:80/hook", "http://example.com/hook", "default http port"},
		{"https://example.com:/", "https://example.com/", "empty port"},
		{"https://example.com", "https://example.com/", "empty path"},
		{"https://example.com/a%2fb", "https://example.com/a%2Fb", "hex case"},
		{"https://example.com/%7Euser", "https://example.com/~user", "escaped unreserved ~"},
		{"https://example.com/%73tripe", "https://example.com/stripe", "escaped unreserved letter"},
		{"https://example.com/hook#section", "https://example.com/hook", "fragment"},
		{"https://bücher.example/hook", "https://xn--bcher-kva.example/hook", "IDN vs punycode"},
		{"https://example.com/hook?q=%7e", "https://example.com/hook?q=~", "escaped unreserved in query"},
	}
	for _, tt := range tests {
		ca, errA := Canonical(tt.a)
		cb, errB := Canonical(tt.b)
		if errA != nil || errB != nil {
			t.Errorf("Canonical(%q), Canonical(%q): errors %v, %v (%s)", tt.a, tt.b, errA, errB, tt.reason)
			continue
		}
		if ca != cb {
			t.Errorf("Canonical(%q) = %q, Canonical(%q) = %q; want equal (%s)", tt.a, ca, tt.b, cb, tt.reason)
		}
	}
}

func TestCanonicalDifferentPairs(t *testing.T) {
	tests := []struct {
		a, b, reason string
	}{
		{"https://example.com/hook", "https://example.com/hook/", "trailing slash is a different path"},
		{"http://example.com/hook", "https://example.com/hook", "http vs https is a different endpoint"},
		{"https://example.com/a/./b", "https://example.com/a/b", "dot segments are sent verbatim"},
		{"https://example.com/a/../b", "https://example.com/b", "dot-dot segments are sent verbatim"},
		{"https://example.com/hook?", "https://example.com/hook", "empty query vs none"},
		{"https://example.com/hook?a=1&b=2", "https://example.com/hook?b=2&a=1", "query order"},
		{"https://example.com/hook?a=%20", "https://example.com/hook?a=+", "%20 vs + in a query"},
		{"https://example.com/Hook", "https://example.com/hook", "path case"},
		{"https://example.com/a%2Fb", "https://example.com/a/b", "%2F is not /"},
		{"https://example.com/a%3Fb", "https://example.com/a?b", "%3F is not ?"},
		{"https://example.com./hook", "https://example.com/hook", "trailing dot on host"},
		{"https://example.com:8443/hook", "https://example.com/hook", "non-default port"},
		{"https://example.com:0443/hook", "https://example.com/hook", "port spelled with a leading zero"},
		{"https://example.com/a|b", "https://example.com/a%7Cb", "not unreserved, so not decoded or encoded"},
		{"http://[::1]/", "http://[0::1]/", "IPv6 spelling is not rewritten"},
	}
	for _, tt := range tests {
		ca, errA := Canonical(tt.a)
		cb, errB := Canonical(tt.b)
		if errA != nil || errB != nil {
			t.Errorf("Canonical(%q), Canonical(%q): errors %v, %v (%s)", tt.a, tt.b, errA, errB, tt.reason)
			continue
		}
		if ca == cb {
			t.Errorf("Canonical(%q) == Canonical(%q) == %q; want different (%s)", tt.a, tt.b, ca, tt.reason)
		}
	}
}

func TestCanonicalRejects(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string // substring of the error
		reason  string
	}{
		{"https://user:pw@example.com/hook", "credentials", "userinfo carries a secret"},
		{"https://user@example.com/hook", "credentials", "a user name alone is still userinfo"},
		{"https://:@example.com/hook", "credentials", "empty userinfo"},
		{"https://a@b@example.com/hook", "credentials", "several @"},
		{"https://evil.example\\@good.example/", "credentials", "WHATWG would read evil.example as the host"},
		{"ftp://example.com/hook", `url "ftp://example.com/hook": scheme must be http or https`, "only http(s) deliveries"},
		{"ws://example.com/hook", "scheme must be http or https", "websocket is not a webhook"},
		{"javascript:alert(1)", "scheme must be http or https", "not a network URL"},
		{"example.com/hook", "missing scheme", "no scheme"},
		{"//example.com/hook", "missing scheme", "scheme-relative"},
		{"", "missing scheme", "empty"},
		{"https:", "host required", "scheme only"},
		{"https://", "host required", "empty authority"},
		{"https:///hook", "host required", "empty host"},
		{"https://:8443/hook", "host required", "port without host"},
		{"https:/example.com/hook", "host required", "one slash"},
		{"https:example.com", "host required", "no slashes"},
		{"https://example.com?", "", "control: this one is accepted"},
		{"::::", "missing scheme", "garbage"},
		{"https://exa mple.com/", "invalid space in host", "space in host"},
		{"https://example.com/a b", "space in path must be percent-encoded", "space in path"},
		{"https://example.com/?a=b c", "space in query must be percent-encoded", "space in query"},
		{"https://example.com/café", "non-ASCII byte 0xC3 in path must be percent-encoded", "raw UTF-8 in path"},
		{"https://example.com/\x00", "control character", "NUL"},
		{"https://example.com/a\tb", "control character", "WHATWG strips tabs, net/url refuses"},
		{"https://example.com/\nhook", "control character", "newline"},
		{"https://example.com/%", "invalid percent-encoding", "truncated escape"},
		{"https://example.com/%4", "invalid percent-encoding", "truncated escape"},
		{"https://example.com/%zz", "invalid percent-encoding", "non-hex escape"},
		{"https://example.com/?q=%G0", "invalid percent-encoding", "non-hex escape in query"},
		{"https://example.com:https/", "invalid port", "named port"},
		{"https://example.com:99999/", "out of range", "port too large"},
		{"https://example.com:443:443/", "invalid port", "two ports"},
		{"https://ex%61mple.com/", "invalid character '%' in host", "escapes in host are refused, parsers disagree on them"},
		{"https://example.com\\evil/", "invalid character '\\\\' in host", "WHATWG reads \\ as /"},
		{"https://a..b/", "empty label", "empty label"},
		{"https://./", "host required", "root only"},
		{"https://[::1/", "missing ']'", "unterminated IPv6"},
		{"https://[::1]x/", "after IPv6", "junk after IPv6"},
		{"https://[1.2.3.4]/", "invalid IPv6", "IPv4 in brackets"},
		{"https://[fe80::1%25en0]/", "invalid IPv6", "zones are meaningless to a provider"},
		{"https://[v1.x]/", "invalid IPv6", "IPvFuture"},
		{"https://a℀c.example/", "invalid internationalized host", "U+2100 would map to a/c"},
		{"https://evil.example\uff0fgood.example/", "invalid internationalized host", "fullwidth solidus must not become a path"},
		{"https://user\uff20good.example/", "invalid internationalized host", "fullwidth @ must not become userinfo"},
		{"https://good.example\uff1a8443/", "invalid internationalized host", "fullwidth colon must not become a port"},
		{"https://exa\xffmple.com/", "not valid UTF-8", "idna would punycode U+FFFD in its place"},
		{"https://exa\ufffdmple.com/", "invalid internationalized host", "U+FFFD itself is disallowed"},
		{"https://a\u200db.example/", "invalid internationalized host", "a joiner outside its allowed context"},
		{"https://bücher.xn--zz.example/", "invalid internationalized host", "bad punycode next to an IDN label"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("Canonical(%q) error %v; want success (%s)", tt.in, err, tt.reason)
			}
			continue
		}
		if err == nil {
			t.Errorf("Canonical(%q) = %q; want error containing %q (%s)", tt.in, got, tt.wantErr, tt.reason)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Canonical(%q) error %q; want it to contain %q (%s)", tt.in, err, tt.wantErr, tt.reason)
		}
		if !strings.HasPrefix(err.Error(), "url ") {
			t.Errorf("Canonical(%q) error %q; want it to name the URL (%s)", tt.in, err, tt.reason)
		}
		if _, lerr := LooseKey(tt.in); lerr == nil || lerr.Error() != err.Error() {
			t.Errorf("LooseKey(%q) error %v; want the Canonical error %v (%s)", tt.in, lerr, err, tt.reason)
		}
	}
}

// TestCanonicalErrorRedactsCredentials checks that refusing a URL for its credentials does not
// put them into the error, which ends up in events and status conditions.
func TestCanonicalErrorRedactsCredentials(t *testing.T) {
	tests := []struct {
		in, want, reason string
	}{
		{"https://alice:s3cret@example.com/hook", `url "https://REDACTED@example.com/hook": credentials`, "userinfo error"},
		{"ftp://alice:s3cret@example.com/hook", `url "ftp://REDACTED@example.com/hook": scheme must be http or https`, "an earlier error redacts too"},
		{"alice:s3cret@example.com/hook", `url "REDACTED@example.com/hook": `, "no slashes"},
		{"https://a:b@c:s3cret@example.com/", `url "https://REDACTED@example.com/"`, "last @ ends the userinfo"},
	}
	for _, tt := range tests {
		_, err := Canonical(tt.in)
		if err == nil {
			t.Errorf("Canonical(%q) accepted; want error (%s)", tt.in, tt.reason)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Canonical(%q) error %q; want prefix %q and no secret (%s)", tt.in, err, tt.want, tt.reason)
		}
	}
}

// TestCanonicalKeepsRawEscapes pins down the difference from net/url, which decodes %2F into
// Path and re-escapes characters like | when it rebuilds a URL. A Canonical result must survive
// net/url parsing with the same host and raw query, but its path is ours, byte for byte.
func TestCanonicalKeepsRawEscapes(t *testing.T) {
	tests := []struct {
		in, wantPath, wantQuery, reason string
	}{
		{"https://x.example/a%2fb", "/a%2Fb", "", "net/url Path would be /a/b"},
		{"https://x.example/a|b", "/a|b", "", "net/url EscapedPath would be /a%7Cb"},
		{"https://x.example/a%7cb", "/a%7Cb", "", "only hex case changes"},
		{"https://x.example/a%41b", "/aAb", "", "unreserved decoded"},
		{"https://x.example/p?a=%2f&b=%41&c=%7c|", "/p", "a=%2F&b=A&c=%7C|", "net/url keeps RawQuery raw; so do we"},
		{"https://x.example/%2e%2E/", "/../", "", "decoded dots are not then removed"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if err != nil {
			t.Errorf("Canonical(%q) error %v (%s)", tt.in, err, tt.reason)
			continue
		}
		rest := strings.TrimPrefix(got, "https://x.example")
		path, query, _ := strings.Cut(rest, "?")
		if path != tt.wantPath || query != tt.wantQuery {
			t.Errorf("Canonical(%q) = %q; want path %q query %q (%s)", tt.in, got, tt.wantPath, tt.wantQuery, tt.reason)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Errorf("url.Parse(%q) error %v (%s)", got, err, tt.reason)
			continue
		}
		if u.Host != "x.example" || u.RawQuery != tt.wantQuery {
			t.Errorf("url.Parse(%q): host %q query %q; want x.example, %q (%s)", got, u.Host, u.RawQuery, tt.wantQuery, tt.reason)
		}
	}
}

func TestLooseKey(t *testing.T) {
	tests := []struct {
		in, want, reason string
	}{
		{"https://a.example/x", "//a.example/x", "scheme dropped"},
		{"http://a.example/x/", "//a.example/x", "trailing slash dropped"},
		{"HTTP://A.example:80/x/", "//a.example/x", "canonicalized first"},
		{"https://a.example", "//a.example/", "root stays /"},
		{"https://a.example/", "//a.example/", "root stays /"},
		{"https://a.example/x//", "//a.example/x/", "only one slash removed"},
		{"https://a.example/x/?q=1", "//a.example/x?q=1", "slash before the query"},
		{"https://a.example/x?q=1/", "//a.example/x?q=1/", "a slash in the query is not the path's"},
		{"https://a.example:8443/x/", "//a.example:8443/x", "port kept"},
		{"http://a.example:443/x", "//a.example:443/x", "443 is only default for https"},
		{"https://a.example/x#f", "//a.example/x", "fragment dropped"},
		{"https://a.example/x?", "//a.example/x?", "empty query still kept"},
	}
	for _, tt := range tests {
		got, err := LooseKey(tt.in)
		if err != nil {
			t.Errorf("LooseKey(%q) error %v; want %q (%s)", tt.in, err, tt.want, tt.reason)
			continue
		}
		if got != tt.want {
			t.Errorf("LooseKey(%q) = %q; want %q (%s)", tt.in, got, tt.want, tt.reason)
		}
	}
}

func TestLooseKeyPairs(t *testing.T) {
	tests := []struct {
		a, b   string
		same   bool
		reason string
	}{
		{"http://a.example/x/", "https://a.example/x", true, "the documented near-twin"},
		{"https://a.example/x/", "https://a.example/x", true, "trailing slash"},
		{"http://a.example/x", "https://a.example/x", true, "scheme"},
		{"https://a.example/x", "https://a.example/y", false, "different path"},
		{"https://a.example/x", "https://b.example/x", false, "different host"},
		{"https://a.example/x", "https://a.example/X", false, "path case still matters"},
		{"https://a.example/x?", "https://a.example/x", false, "empty query still matters"},
		{"https://a.example/a/./b", "https://a.example/a/b", false, "dot segments still matter"},
		{"https://a.example:8443/x", "https://a.example/x", false, "port still matters"},
	}
	for _, tt := range tests {
		ka, errA := LooseKey(tt.a)
		kb, errB := LooseKey(tt.b)
		if errA != nil || errB != nil {
			t.Errorf("LooseKey(%q), LooseKey(%q): errors %v, %v (%s)", tt.a, tt.b, errA, errB, tt.reason)
			continue
		}
		if (ka == kb) != tt.same {
			t.Errorf("LooseKey(%q) = %q, LooseKey(%q) = %q; same = %v, want %v (%s)", tt.a, ka, tt.b, kb, ka == kb, tt.same, tt.reason)
		}
	}
}
