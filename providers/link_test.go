package providers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLinks(t *testing.T) {
	cases := []struct {
		name, reason string
		in           []string
		want         map[string]string
	}{
		{"github", "GitHub's documented shape", []string{`<https://api.github.com/repositories/1/hooks?page=2>; rel="next", <https://api.github.com/repositories/1/hooks?page=5>; rel="last"`},
			map[string]string{"next": "https://api.github.com/repositories/1/hooks?page=2", "last": "https://api.github.com/repositories/1/hooks?page=5"}},
		{"all four", "prev, next, last, first on a middle page", []string{`<u?page=1>; rel="prev", <u?page=3>; rel="next", <u?page=5>; rel="last", <u?page=1>; rel="first"`},
			map[string]string{"prev": "u?page=1", "next": "u?page=3", "last": "u?page=5", "first": "u?page=1"}},
		{"several headers", "Link may be sent more than once", []string{`<a>; rel="prev"`, `<b>; rel="next"`}, map[string]string{"prev": "a", "next": "b"}},
		{"unquoted, upper case, extra params", "rel is a token list, case-insensitive", []string{`<x>; title="a, b; c"; REL=Next ; type="text/html"`}, map[string]string{"next": "x"}},
		{"several rels", "one link may carry several relation types", []string{`<x>; rel="next last"`}, map[string]string{"next": "x", "last": "x"}},
		{"comma in URL", "the URL is delimited by <>", []string{`<https://h/p?a=1,2>; rel="next"`}, map[string]string{"next": "https://h/p?a=1,2"}},
		{"first wins", "a repeated rel keeps the first", []string{`<a>; rel="next", <b>; rel="next"`}, map[string]string{"next": "a"}},
		{"garbage before", "an unreadable value is skipped", []string{`junk; rel="x", <b>; rel="next"`}, map[string]string{"next": "b"}},
		{"no rel", "a link without rel names nothing", []string{`<a>`}, map[string]string{}},
		{"unterminated", "no closing > ends the header", []string{`<a; rel="next"`}, map[string]string{}},
		{"empty", "no header", nil, map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ParseLinks(tc.in)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

// FuzzLinks: ParseLinks never panics, every URL it returns was written between < and >
// in the input, and a header written from its own output parses to the same map.
func FuzzLinks(f *testing.F) {
	for _, s := range []string{
		`<https://api.github.com/repos/o/r/hooks?per_page=100&page=2>; rel="next", <https://api.github.com/repos/o/r/hooks?per_page=100&page=3>; rel="last"`,
		`<a>; rel=next`, `<a>; rel="next last"; title="x,y"`, `,,<>; rel="next"`, `<a>; rel="`, `"<a>"; rel=next`, `<a>; title="\"", <b>; rel=next`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ParseLinks([]string{s})
		var b strings.Builder
		for rel, u := range got {
			if !strings.Contains(s, "<"+u) || strings.ContainsAny(u, "<>") || strings.ContainsAny(rel, " \t") {
				t.Fatalf("ParseLinks(%q) = %v: %q/%q was not a link in the input", s, got, rel, u)
			}
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString("<" + u + `>; rel="` + rel + `"`)
		}
		if strings.ContainsAny(b.String(), `"\`) && strings.Count(b.String(), `"`) != 2*len(got) {
			return // a URL with quotes cannot be written back unambiguously
		}
		if again := ParseLinks([]string{b.String()}); !cmp.Equal(again, got) {
			t.Fatalf("round trip of %q: %v, then %v", s, got, again)
		}
	})
}
