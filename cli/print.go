package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// table is a kubectl-style table: upper-case headers, columns two spaces apart.
type table struct{ rows [][]string }

func (t *table) header(cols ...string) { t.rows = append(t.rows, cols) }
func (t *table) row(cols ...string)    { t.rows = append(t.rows, cols) }

func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range t.rows {
		if _, err := fmt.Fprintln(tw, strings.TrimRight(strings.Join(r, "\t"), "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// print writes v as -o asks: yaml, json, or the table fill makes.
func (g *globals) print(w io.Writer, v any, fill func(*table)) error {
	switch g.output {
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var t table
	fill(&t)
	return t.write(w)
}
