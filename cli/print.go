package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
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

// surface names the kind of registration a subscription keeps where its provider has more than
// one: a Stripe v2 event destination ("v2/thin", "v2/snapshot"; a v1 endpoint is ""), a GitHub
// App's webhook ("app"). A v1 endpoint and a v2 destination on one URL are two subscriptions
// whose rows would read alike without it.
func surface(p *hookv1.ProviderSpec) string {
	switch {
	case p.Stripe != nil && p.Stripe.APIVersion == hookv1.StripeV2:
		payload := p.Stripe.EventPayload
		if payload == "" {
			payload = hookv1.StripeThin
		}
		return "v2/" + string(payload)
	case p.GitHub != nil && p.GitHub.App != nil:
		return "app"
	}
	return ""
}

// providerColumn is the PROVIDER cell of a table: the type, and the surface where there is one.
func providerColumn(provider, surface string) string {
	if surface == "" {
		return provider
	}
	return provider + " " + surface
}
