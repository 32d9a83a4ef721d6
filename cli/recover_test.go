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
		{"a run handled", `{"recovery":{"lastHandledRequestedAt":"t1","lastRun":{"result":"Succeeded","recovered":3,"skipped":2,"beyondWindow":1}}}`, "t1", recoveryRun{Result: "Succeeded", Recovered: 3, Skipped: 2, BeyondWindow: 1}},
		{"handled, figures absent (nothing missed)", `{"recovery":{"lastHandledRequestedAt":"t2","lastRun":{"result":"Succeeded"}}}`, "t2", recoveryRun{Result: "Succeeded"}},
		{"a failed run: its result and message", `{"recovery":{"lastHandledRequestedAt":"t3","lastRun":{"result":"Failed","message":"listing events: 500"}}}`, "t3", recoveryRun{Result: "Failed", Message: "listing events: 500"}},
		{"refused: the message, not the figures of an older run", `{"recovery":{"lastHandledRequestedAt":"t4","message":"recovery mode is Off","lastRun":{"result":"Succeeded","recovered":3}}}`, "t4", recoveryRun{Result: "Refused", Message: "recovery mode is Off"}},
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
