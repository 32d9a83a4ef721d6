package mdlinks

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSlug(t *testing.T) {
	cases := []struct{ reason, heading, want string }{
		{"words joined by '-', lower case", "The API by example", "the-api-by-example"},
		{"punctuation dropped, '-' kept", "Any REST API: writing a provider profile", "any-rest-api-writing-a-provider-profile"},
		{"code spans and parentheses dropped", "How cost grows (`make bench-reconcile`)", "how-cost-grows-make-bench-reconcile"},
		{"each space a '-', so '&' leaves two", "Logs & traces", "logs--traces"},
		{"'_' kept", "a_b", "a_b"},
		{"a link is its text", "See [Redis](receiver.md#redis) now", "see-redis-now"},
		{"letters of any script kept", "Größe", "größe"},
	}
	for _, c := range cases {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("%s: Slug(%q) = %q, want %q", c.reason, c.heading, got, c.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	doc := "# Title\n## Usage\ntext\n### Usage\n```sh\n# not a heading\n```\n## Usage ##\n<a id=\"custom\"></a>\n####### seven is text\n"
	want := map[string]bool{"title": true, "usage": true, "usage-1": true, "usage-2": true, "custom": true}
	if diff := cmp.Diff(want, Anchors(doc)); diff != "" {
		t.Errorf("Anchors: repeated headings take -1, -2; fenced lines and 7 hashes are not headings (-want +got):\n%s", diff)
	}
}

func TestLinks(t *testing.T) {
	doc := "see [a](#a) and [b](docs/b.md#x \"title\") and ![img](pic.png)\n" +
		"`[not](a-link)` in code\n```\n[not](in-fence)\n```\n" +
		"[ref]: https://example.com/x\n<https://example.org>\n" +
		"a `span that\n[hides](this)` and [then](#c)\n"
	want := []Link{{1, "#a"}, {1, "docs/b.md#x"}, {1, "pic.png"}, {6, "https://example.com/x"}, {7, "https://example.org"}, {9, "#c"}}
	if diff := cmp.Diff(want, Links(doc)); diff != "" {
		t.Errorf("Links: inline, image, reference and autolinks; none in code, also a code span over two lines (-want +got):\n%s", diff)
	}
}
