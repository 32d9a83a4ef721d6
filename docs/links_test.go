// Package docs holds the user documentation (Markdown beside this file) and its tests.
package docs

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/mdlinks"
)

// repoBlob is how the docs, the chart and the alerts link a file of this repository by URL
// (runbooks); such links are checked here against the files, never fetched.
const repoBlob = "https://github.com/hookwarden/hookwarden/blob/main/"

// docFiles are the documents checked: the README and every Markdown file in docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no docs/*.md")
	}
	out := []string{"README.md"}
	for _, f := range files {
		out = append(out, filepath.Join("docs", f))
	}
	return out
}

// Every relative link and every #anchor in README.md and docs/*.md lands on a file that exists
// and, with an anchor, on a heading of that file (GitHub's slugs, repeated headings -1, -2);
// http(s) links are only checked for their form (nothing here reaches another host).
func TestLinksResolve(t *testing.T) {
	root := ".."
	anchors := map[string]map[string]bool{} // repository path → the anchors of that Markdown file
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		anchors[path] = mdlinks.Anchors(string(b))
		return anchors[path], nil
	}
	checked := 0
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range mdlinks.Links(string(b)) {
			checked++
			if problem := checkLink(root, doc, l.Target, anchorsOf); problem != "" {
				t.Errorf("%s:%d: link %q: %s", doc, l.Line, l.Target, problem)
			}
		}
	}
	if !t.Failed() {
		t.Logf("REPORT docs links: %d links in %d files, each resolved", checked, len(docFiles(t)))
	}
}

// checkLink says what is wrong with target, a link in the file doc (a repository path), or "".
func checkLink(root, doc, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if target == "" {
		return "empty target"
	}
	if local, ok := strings.CutPrefix(target, repoBlob); ok {
		target = "/" + local
	} else if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		u, err := url.Parse(target)
		switch {
		case err != nil:
			return err.Error()
		case u.Host == "" || strings.ContainsAny(u.Host, " \t"):
			return "no host"
		}
		return ""
	} else if strings.HasPrefix(target, "mailto:") {
		return ""
	}
	u, err := url.Parse(target)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return "neither a relative path nor an http(s) URL"
	}
	path := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), u.Path)))
	if strings.HasPrefix(u.Path, "/") {
		path = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(u.Path)), "/")
	}
	if u.Path == "" {
		path = doc
	}
	if path == ".." || strings.HasPrefix(path, "../") {
		return "points outside the repository"
	}
	if _, err := os.Stat(filepath.Join(root, path)); err != nil {
		return "no such file " + path
	}
	if u.Fragment == "" {
		return ""
	}
	if !strings.HasSuffix(path, ".md") {
		return "an anchor into " + path + ", which is not Markdown"
	}
	a, err := anchorsOf(path)
	if err != nil {
		return err.Error()
	}
	if !a[u.Fragment] {
		return "no heading #" + u.Fragment + " in " + path
	}
	return ""
}

// The README is the entrance: every file in docs/ is linked from it.
func TestREADMELinksEveryDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range mdlinks.Links(string(b)) {
		linked[strings.SplitN(l.Target, "#", 2)[0]] = true
	}
	for _, doc := range docFiles(t)[1:] {
		if !linked[filepath.ToSlash(doc)] {
			t.Errorf("README.md links no %s: a reader starting there cannot find it", doc)
		}
	}
}
