package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestRecoveryOf: status.recovery is read by its JSON names, whatever the API types compiled in.
func TestRecoveryOf(t *testing.T) {
	cases := []struct {
		reason  string
		status  string
		handled string
		want    recoveryRun
	}{
		{"no recovery status yet", `{}`, "", recoveryRun{}},
		{"a run handled", `{"recovery":{"lastHandledRequestedAt":"t1","lastRun":{"recovered":3,"skipped":2,"beyondWindow":1}}}`, "t1", recoveryRun{Recovered: 3, Skipped: 2, BeyondWindow: 1}},
		{"handled, figures absent (nothing missed)", `{"recovery":{"lastHandledRequestedAt":"t2"}}`, "t2", recoveryRun{}},
	}
	for _, c := range cases {
		var status map[string]any
		if err := yaml.Unmarshal([]byte(c.status), &status); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
		handled, got := recoveryOf(u)
		if handled != c.handled {
			t.Errorf("%s: handled %q, want %q", c.reason, handled, c.handled)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.reason, diff)
		}
	}
}
