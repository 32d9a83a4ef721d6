/*
Copyright 2026 The Hookwarden Authors.

Licensed under the Apache License, Version 2.0.
*/

package matching

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCanonical checks the properties the reconciler relies on: Canonical never panics, an
// accepted result is a fixed point that net/url reads the same way, LooseKey agrees with it, and
// the safe spellings of a URL (scheme/host case, default port, hex case, fragment) canonicalize
// to the same string while the unsafe ones (trailing slash, other scheme) do not.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hook",
		"HTTPS://Example.COM:443/a%2fb%7E%73?x=%7e&y=%2F#frag",
		"http://example.com:80",
		"https://example.com:/",
		"https://example.com:8443/hook/?",
		"https://bücher.example./x",
		"https://xn--bcher-kva.example/x",
		"https://ｅｘａｍｐｌｅ．ｃｏｍ/",
		"http://[2001:DB8::1]:8080/a/./b/../c",
		"https://example.com/a|b{c}^?q=a?b/c",
		"https://user:pw@example.com/",
		"ftp://example.com/",
		"https:///x",
		"https://example.com/%",
		"https://example.com/%zz",
		"https://exa mple.com/",
		"https://[fe80::1%25en0]/",
		"https://a℀c.example/",
		"https://example.com\\@evil/",
		"http://192.0.2.1:65535/",
		"https://my_service.internal/hook",
		"https://exa\xffmple.com/", // idna used to punycode this as U+FFFD
		"https://exa\u00admple.com/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Canonical(raw)
		loose, lerr := LooseKey(raw)
		if (err == nil) != (lerr == nil) {
			t.Fatalf("Canonical(%q) error %v but LooseKey error %v", raw, err, lerr)
		}
		// net/url splits the authority the same way; where it sees credentials we must refuse.
		std, stdErr := url.Parse(raw)
		if stdErr == nil && std.User != nil && err == nil {
			t.Fatalf("Canonical(%q) = %q accepted a URL that net/url reads with userinfo %q", raw, c, std.User.Username())
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "url ") {
				t.Fatalf("Canonical(%q) error %q does not name the URL", raw, err)
			}
			return
		}
		if beforeFragment, _, _ := strings.Cut(raw, "#"); !utf8.ValidString(beforeFragment) {
			t.Fatalf("Canonical(%q) = %q accepted invalid UTF-8", raw, c)
		}

		again, err := Canonical(c)
		if err != nil || again != c {
			t.Fatalf("not idempotent: Canonical(%q) = %q, Canonical(%q) = %q, %v", raw, c, c, again, err)
		}
		if l2, err := LooseKey(c); err != nil || l2 != loose {
			t.Fatalf("LooseKey(Canonical(%q)) = %q, %v; LooseKey(%q) = %q", raw, l2, err, raw, loose)
		}
		for i := 0; i < len(c); i++ {
			if c[i] <= ' ' || c[i] >= 0x7f || c[i] == '#' {
				t.Fatalf("Canonical(%q) = %q contains byte %#x", raw, c, c[i])
			}
		}

		scheme, rest, _ := strings.Cut(c, "://")
		if scheme != "http" && scheme != "https" {
			t.Fatalf("Canonical(%q) = %q: scheme %q", raw, c, scheme)
		}
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			t.Fatalf("Canonical(%q) = %q: no path", raw, c)
		}
		authority, pathQuery := rest[:slash], rest[slash:]
		path, query, hasQuery := strings.Cut(pathQuery, "?")

		u, err := url.Parse(c)
		if err != nil {
			t.Fatalf("url.Parse(Canonical(%q) = %q) error %v", raw, c, err)
		}
		if u.Scheme != scheme || u.Host != authority || u.User != nil || u.Fragment != "" ||
			u.RawQuery != query || u.ForceQuery != (hasQuery && query == "") {
			t.Fatalf("url.Parse(%q) reads it differently: %#v", c, u)
		}
		if stdErr == nil && isASCII(std.Host) {
			wantPort := std.Port()
			if (scheme == "https" && wantPort == "443") || (scheme == "http" && wantPort == "80") {
				wantPort = ""
			}
			if u.Hostname() != strings.ToLower(std.Hostname()) || u.Port() != wantPort {
				t.Fatalf("Canonical(%q) = %q, but net/url reads host %q port %q from the input", raw, c, std.Hostname(), std.Port())
			}
		}
		if p, err := url.PathUnescape(path); err != nil || p != u.Path {
			t.Fatalf("url.Parse(%q).Path = %q; our path %q unescapes to %q, %v", c, u.Path, path, p, err)
		}

		// Safe spellings must collapse back to c.
		variants := []string{
			strings.ToUpper(scheme) + "://" + strings.ToUpper(authority) + pathQuery,
			scheme + "://" + authority + lowerHex(pathQuery),
			scheme + "://" + authority + escapeUnreserved(pathQuery),
			c + "#fragment",
		}
		if !hasPort(authority) {
			def := ":80"
			if scheme == "https" {
				def = ":443"
			}
			variants = append(variants,
				scheme+"://"+authority+def+pathQuery,
				scheme+"://"+authority+":"+pathQuery,
			)
		}
		if path == "/" {
			variants = append(variants, scheme+"://"+authority+strings.TrimPrefix(pathQuery, "/"))
		}
		for _, v := range variants {
			if got, err := Canonical(v); err != nil || got != c {
				t.Fatalf("safe variant %q of %q canonicalizes to %q, %v", v, c, got, err)
			}
		}
		// Unsafe ones must not.
		other := "http"
		if scheme == "http" {
			other = "https"
		}
		for _, v := range []string{
			scheme + "://" + authority + path + "/" + strings.TrimPrefix(pathQuery, path),
			other + "://" + rest,
		} {
			if got, err := Canonical(v); err == nil && got == c {
				t.Fatalf("unsafe variant %q of %q canonicalizes to the same URL", v, c)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// hasPort reports whether a canonical authority carries a port.
func hasPort(authority string) bool {
	if i := strings.LastIndexByte(authority, ']'); i >= 0 {
		authority = authority[i+1:]
	}
	return strings.Contains(authority, ":")
}

// lowerHex lowercases the hex digits of every percent-escape.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLowerASCII(b[i+1])
			b[i+2] = toLowerASCII(b[i+2])
			i += 2
		}
	}
	return string(b)
}

// escapeUnreserved percent-encodes every unreserved character, which Canonical must undo.
func escapeUnreserved(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' && i+2 < len(s) {
			b.WriteString(s[i : i+3])
			i += 2
		} else if isUnreserved(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// FuzzSameEvents checks that SameEvents is a set comparison: a list equals any reordering of
// itself with duplicates added, and NormalizeEvents is idempotent.
func FuzzSameEvents(f *testing.F) {
	f.Add("a,b,c", uint8(1))
	f.Add("*,charge.succeeded,*", uint8(7))
	f.Add("", uint8(0))
	f.Fuzz(func(t *testing.T, joined string, seed uint8) {
		a := strings.Split(joined, ",")
		b := slices.Clone(a)
		slices.Reverse(b)
		if len(a) > 0 {
			b = append(b, a[int(seed)%len(a)])
		}
		if !SameEvents(a, b) {
			t.Fatalf("SameEvents(%q, %q) = false", a, b)
		}
		n := NormalizeEvents(a)
		if !slices.Equal(NormalizeEvents(n), n) || !slices.IsSorted(n) {
			t.Fatalf("NormalizeEvents(%q) = %q is not a sorted fixed point", a, n)
		}
		if !SameEvents(a, n) {
			t.Fatalf("SameEvents(%q, NormalizeEvents = %q) = false", a, n)
		}
		extra := append(slices.Clone(a), joined+"\x00extra")
		if SameEvents(a, extra) {
			t.Fatalf("SameEvents(%q, %q) = true; a new event must make them differ", a, extra)
		}
	})
}
