package receiver_test

import (
	"regexp"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/receiver"
)

// Alerts on a result (absent(), rate() over a series that appears mid-window) break when the
// series only exists after the first such request, so every result is exported at 0 from start.
func TestEveryResultSeriesExistsFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	receiver.NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	label := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for _, f := range families {
		if f.GetName() != "hookwarden_receiver_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "result" {
					continue
				}
				if !label.MatchString(l.GetValue()) {
					t.Errorf("result %q is not snake_case like the other label values", l.GetValue())
				}
				if v := m.GetCounter().GetValue(); v != 0 {
					t.Errorf("result %q starts at %v, want 0", l.GetValue(), v)
				}
				got = append(got, l.GetValue())
			}
		}
	}
	want := receiver.Results()
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result series at start (-want +got)\n%s", diff)
	}
}
