package charts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/internal/mdlinks"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// Metrics the alerts and the dashboard may use before a binary serves them. Each must still be
// missing: when it appears, delete it here. (Issue 9's manager metrics are all served now.)
var pendingManagerMetrics = map[string]bool{}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (make promtool installs Debian's prometheus package): %v", err)
	}
	return p
}

func TestAlertRules(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	p := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", filepath.Join(chartDir, "files", "alerts.yaml")},
		{"test", "rules", "alerts_test.yaml"},
	} {
		out, err := exec.Command(p, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				t.Logf("REPORT promtool %s %s: %s", args[0], args[1], l)
			}
		}
	}
}

type query struct{ where, expr string }

func alertQueries(t *testing.T) (qs []query, recorded map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	recorded = map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
			qs = append(qs, query{"rule " + r.Record + r.Alert, r.Expr})
		}
	}
	return qs, recorded
}

func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var qs []query
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			qs = append(qs, query{"panel " + p.Title, tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if m := regexp.MustCompile(`^label_values\((\w+),`).FindStringSubmatch(v.Definition); m != nil {
			qs = append(qs, query{"variable " + v.Name, m[1]})
		}
	}
	return qs
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promGroups   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// metricNames returns the metric names an expression selects (the identifiers that are not
// functions, keywords, label names or strings). promtool checks the syntax separately.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promGroups.ReplaceAllString(e, " ")
	e = promMatchers.ReplaceAllString(e, " ")
	var names []string
	for _, m := range promIdent.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || promKeywords[strings.ToLower(m)] {
			continue
		}
		names = append(names, m)
	}
	return names
}

// targetLabels are added by the scrape (Prometheus Operator's relabelling), not by the binaries.
var targetLabels = map[string]bool{"namespace": true, "pod": true, "job": true, "instance": true, "service": true, "container": true, "endpoint": true}

// checkMetricNames: every query of the alerts and the dashboard parses (promtool), names only
// metrics the binaries serve, recorded rules, or the pending manager metrics, and groups and
// selects only on labels those metrics carry (or the scrape adds).
func checkMetricNames(t *testing.T, served map[string]bool, labels map[string]map[string]bool, managerMetrics string) {
	t.Helper()
	alerts, recorded := alertQueries(t)
	qs := append(alerts, dashboardQueries(t)...)

	// Syntax: the dashboard's queries as recording rules, with Grafana's variables filled in.
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	for i, q := range qs {
		b, _ := json.Marshal(strings.ReplaceAll(q.expr, "$namespace", ".*"))
		fmt.Fprintf(&rules, "  - record: dashboard:query_%d\n    expr: %s\n", i, b)
	}
	path := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("a dashboard or alert query does not parse: %v\n%s", err, out)
	}

	used := map[string]bool{}
	for _, q := range qs {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: found no metric in %q", q.where, q.expr)
		}
		known := map[string]bool{}
		servedOnly := true
		for _, n := range names {
			used[n] = true
			if !served[n] && !recorded[n] && !pendingManagerMetrics[n] {
				t.Errorf("%s names %s, which neither binary serves", q.where, n)
			}
			servedOnly = servedOnly && served[n]
			for l := range labels[n] {
				known[l] = true
			}
		}
		if !servedOnly {
			continue // a recorded or pending series: its labels are not served
		}
		for _, l := range queryLabels(q.expr) {
			if !known[l] && !targetLabels[l] {
				t.Errorf("%s uses label %q, which %v do not carry (served: %v)", q.where, l, names, sortedKeys(known))
			}
		}
	}
	var pending []string
	for n := range pendingManagerMetrics {
		if served[n] {
			t.Errorf("%s is served now: remove it from pendingManagerMetrics", n)
		}
		if !used[n] {
			t.Errorf("%s is pending but no query uses it", n)
		}
		pending = append(pending, n)
	}
	sort.Strings(pending)
	t.Logf("REPORT metrics: %d queries name %d metrics, every one served; pending: %d %v", len(qs), len(used), len(pending), pending)
	// Label values the dashboard selects on must exist too.
	for _, want := range []string{`controller="webhooksubscription"`, `name="webhooksubscription"`} {
		if !strings.Contains(managerMetrics, want) {
			t.Errorf("the manager serves no series with %s, which the dashboard selects", want)
		}
	}
}

var (
	promGroupLabels = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promMatcherSets = regexp.MustCompile(`\{([^}]*)\}`)
	promMatcher     = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// queryLabels returns the label names an expression groups by or matches on.
func queryLabels(expr string) []string {
	var out []string
	for _, m := range promGroupLabels.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	for _, m := range promMatcherSets.FindAllStringSubmatch(promStrings.ReplaceAllString(expr, `""`), -1) {
		for _, mm := range promMatcher.FindAllStringSubmatch(m[1], -1) {
			out = append(out, mm[1])
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestMetricNamesParser(t *testing.T) {
	cases := []struct{ expr, want string }{
		{`sum by (result) (rate(hookwarden_receiver_requests_total{namespace=~"$namespace"}[5m]))`, "hookwarden_receiver_requests_total"},
		{`histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y"}[5m]))) > 0 and on (ns) b`, "a_bucket b"},
		{`hookwarden:receiver_duplicate_ratio:rate15m > 0.3`, "hookwarden:receiver_duplicate_ratio:rate15m"},
	}
	for _, c := range cases {
		if got := strings.Join(metricNames(c.expr), " "); got != c.want {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
	labelCases := []struct{ expr, want string }{
		{`sum by (provider, operation, outcome) (rate(x_total[5m]))`, "provider operation outcome"},
		{`x{result=~"a|b", namespace!="{x}"} / on (ns) y`, "ns result namespace"},
		{`hookwarden_subscription_ready == 0`, ""},
	}
	for _, c := range labelCases {
		if got := strings.Join(queryLabels(c.expr), " "); got != c.want {
			t.Errorf("queryLabels(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// runbookDoc holds the runbooks, one section per alert; runbookBase is how the alerts link it.
const (
	runbookDoc  = "docs/operations.md"
	runbookBase = "https://github.com/hookwarden/hookwarden/blob/main/" + runbookDoc + "#"
)

// Every alert links a runbook: a section of docs/operations.md that exists, one per alert.
func TestAlertRunbooks(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(runbookDoc)))
	if err != nil {
		t.Fatal(err)
	}
	anchors := mdlinks.Anchors(string(doc))
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookBase)
			switch {
			case !ok:
				t.Errorf("%s: runbook_url %q does not point into the runbooks (%s...)", r.Alert, url, runbookBase)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook_url anchor %q, want the alert's own section #%s", r.Alert, anchor, strings.ToLower(r.Alert))
			case !anchors[anchor]:
				t.Errorf("%s: %s has no heading for #%s", r.Alert, runbookDoc, anchor)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts")
	}
	t.Logf("REPORT alerts: %d alerts, each with a runbook section in %s", n, runbookDoc)
}
