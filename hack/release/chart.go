package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// Helm's OCI media types (helm push writes these; helm pull and install read them).
const (
	helmConfigMediaType  types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	helmContentMediaType types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

var (
	chartVersionLine    = regexp.MustCompile(`(?m)^version: .*$`)
	chartAppVersionLine = regexp.MustCompile(`(?m)^appVersion: .*$`)
	// The default image.registry (the first "  registry:" line of values.yaml, under image:).
	valuesRegistryLine = regexp.MustCompile(`(?m)^  registry: "".*$`)
)

// packageChart is `helm package` made reproducible: the chart's files (less .helmignore's) in
// a gzipped tar under <name>/, fixed times and owners, in path order, with Chart.yaml's version
// and appVersion set to version and values.yaml's image.registry to registry, so the chart
// pulled from the release runs the release's images with no value set. It returns the archive
// and Chart.yaml.
func packageChart(dir, version, registry string, mtime time.Time) (archive, chartYAML []byte, err error) {
	ignore, err := helmIgnore(dir)
	if err != nil {
		return nil, nil, err
	}
	base := filepath.Base(filepath.Clean(dir))
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf) // no name, no time in the header
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignored(ignore, rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch rel {
		case "Chart.yaml":
			if b, err = setLine(b, chartVersionLine, "version: "+version); err != nil {
				return fmt.Errorf("Chart.yaml: %w", err) //nolint:staticcheck // ST1005: a file name, spelled as it is
			}
			if b, err = setLine(b, chartAppVersionLine, "appVersion: "+fmt.Sprintf("%q", version)); err != nil {
				return fmt.Errorf("Chart.yaml: %w", err) //nolint:staticcheck // ST1005: a file name, spelled as it is
			}
			chartYAML = b
		case "values.yaml":
			if b, err = setLine(b, valuesRegistryLine, fmt.Sprintf("  registry: %q   # where this release's images are", registry)); err != nil {
				return fmt.Errorf("values.yaml image.registry: %w", err)
			}
		}
		h := &tar.Header{Name: base + "/" + rel, Mode: 0o644, Size: int64(len(b)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil && chartYAML == nil {
		err = fmt.Errorf("%s has no Chart.yaml", dir)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), chartYAML, nil
}

// setLine replaces the one line re matches with line.
func setLine(b []byte, re *regexp.Regexp, line string) ([]byte, error) {
	if n := len(re.FindAllIndex(b, -1)); n != 1 {
		return nil, fmt.Errorf("%d lines match %s, want 1", n, re)
	}
	return re.ReplaceAllLiteral(b, []byte(line)), nil
}

// helmIgnore reads the chart's .helmignore patterns (none if it has none).
func helmIgnore(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, ".helmignore"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// ignored applies .helmignore's patterns as helm does for the forms a chart uses: a pattern
// matches the base name or the whole path; one ending in / only folders. Negations are refused
// by no pattern here, so they are not read.
func ignored(patterns []string, rel string, dir bool) bool {
	for _, p := range patterns {
		if strings.HasSuffix(p, "/") {
			if !dir {
				continue
			}
			p = strings.TrimSuffix(p, "/")
		}
		if ok, _ := path.Match(p, path.Base(rel)); ok {
			return true
		}
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// publishChart packages the chart for the release, writes it to the out folder, pushes it as
// Helm's OCI artifact to <registry>/charts/<name>:<version> and signs it.
func (r *release) publishChart() error {
	version := strings.TrimPrefix(r.spec.Version, "v")
	archive, chartYAML, err := packageChart(r.chart, version, r.registry, r.spec.Created)
	if err != nil {
		return err
	}
	config, err := yaml.YAMLToJSON(chartYAML)
	if err != nil {
		return err
	}
	var meta struct {
		Name, Description string
	}
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.out, meta.Name+"-"+version+".tgz"), archive, 0o644); err != nil {
		return err
	}
	ref, err := name.NewTag(r.registry + "/charts/" + meta.Name + ":" + version)
	if err != nil {
		return err
	}
	a := artifact{config: blob{mediaType: helmConfigMediaType, data: config},
		layers: []blob{{mediaType: helmContentMediaType, data: archive}},
		annotations: map[string]string{
			"org.opencontainers.image.title":       meta.Name,
			"org.opencontainers.image.version":     version,
			"org.opencontainers.image.description": meta.Description,
			"org.opencontainers.image.created":     r.spec.Created.UTC().Format(time.RFC3339),
			"org.opencontainers.image.source":      "https://github.com/hookwarden/hookwarden",
		}}
	digest, err := a.push(func(v1.Hash) name.Reference { return ref }, r.remote)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.log, "chart  oci://%s@%s\n", ref, digest)
	d := ref.Context().Digest(digest.String())
	sig, err := r.signer.sign(d, r.remote)
	if err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	fmt.Fprintf(r.log, "signed %s %s\n", d, sig)
	return nil
}
