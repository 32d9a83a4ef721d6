// Package mdlinks reads the headings and links of a Markdown document the way GitHub renders it,
// so tests can check that every link in the docs, and every alert's runbook URL, lands on a
// heading that exists.
package mdlinks

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Slug is the fragment GitHub gives a heading's text: lower case, every character other than a
// letter, a digit, '-' or '_' dropped, each space a '-'. Inline Markdown (code spans, emphasis,
// links) is reduced to its text first, as GitHub slugs the rendered heading.
func Slug(heading string) string {
	text := linkRE.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors returns the fragment of every heading in doc (ATX headings outside fenced code; a
// repeated heading gets GitHub's suffix -1, -2, ...) and of every <a id> or <a name>.
func Anchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines(doc) {
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(l.text, -1) {
			anchors[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := Slug(closingHashesRE.ReplaceAllString(m[1], ""))
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// Link is one link target in a document and the line (from 1) it is on.
type Link struct {
	Line   int
	Target string
}

// Links returns the targets of the inline links and images ([text](target "title")), the
// reference definitions ([name]: target) and the autolinks (<https://...>) of doc, leaving out
// fenced code blocks and code spans.
func Links(doc string) []Link {
	var links []Link
	for _, l := range lines(withoutCodeSpans(doc)) {
		text := l.text
		for _, m := range inlineLinkRE.FindAllStringSubmatch(text, -1) {
			links = append(links, Link{l.n, m[1]})
		}
		if m := refDefRE.FindStringSubmatch(text); m != nil {
			links = append(links, Link{l.n, m[1]})
		}
		for _, m := range autolinkRE.FindAllStringSubmatch(text, -1) {
			links = append(links, Link{l.n, m[1]})
		}
	}
	return links
}

var (
	headingRE       = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*)$`)
	closingHashesRE = regexp.MustCompile(`[ \t]+#+[ \t]*$`)
	fenceRE         = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	linkRE          = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	inlineLinkRE    = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE        = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	autolinkRE      = regexp.MustCompile(`<(https?://[^>\s]+)>`)
	htmlAnchorRE    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// withoutCodeSpans blanks the code spans of doc (a run of backticks up to the next run of the
// same length, across lines but not across a blank line or a fence), keeping its line breaks;
// fenced code is left for lines to drop.
func withoutCodeSpans(doc string) string {
	var fenced []bool // per line
	for _, t := range strings.Split(doc, "\n") {
		fenced = append(fenced, fenceRE.MatchString(t))
	}
	b := []byte(doc)
	line := 0
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\n':
			line++
		case b[i] == '`' && !fenced[line]:
			n := runLen(b, i)
			end := closingRun(b, i+n, n, line, fenced)
			if end < 0 {
				i += n - 1
				continue
			}
			for ; i < end; i++ {
				if b[i] == '\n' {
					line++
				} else {
					b[i] = ' '
				}
			}
			i--
		}
	}
	return string(b)
}

// closingRun returns the end of the first run of exactly n backticks from j (on line), or -1
// when the paragraph ends first (a blank line, a fence line).
func closingRun(b []byte, j, n, line int, fenced []bool) int {
	for ; j < len(b); j++ {
		switch b[j] {
		case '\n':
			line++
			if j+1 == len(b) || b[j+1] == '\n' || fenced[line] {
				return -1
			}
		case '`':
			m := runLen(b, j)
			if m == n {
				return j + m
			}
			j += m - 1
		}
	}
	return -1
}

func runLen(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] == '`' {
		n++
	}
	return n
}

type line struct {
	n    int
	text string
}

// lines returns the lines of doc outside fenced code blocks, numbered from 1.
func lines(doc string) []line {
	var out []line
	fence := ""
	for i, t := range strings.Split(doc, "\n") {
		if m := fenceRE.FindStringSubmatch(t); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(t) == m[1]:
				fence = ""
				continue
			}
		}
		if fence == "" {
			out = append(out, line{i + 1, t})
		}
	}
	return out
}
