// Package testsummary tests hack/test-summary.sh, the filter `make test` pipes `go test -v`
// through.
package testsummary

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryShowsWhatFailed: on a failure, make test's output holds the failed test's own
// lines (a golden's diff, a subtest's message), a failed Ginkgo spec's report, build errors and
// panics, not only the test's name; passing tests' chatter and the manager's JSON log lines stay
// in the log file only, which keeps everything.
func TestSummaryShowsWhatFailed(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "test-summary.sh"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(filepath.Join("testdata", "go-test.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dir := t.TempDir()
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	cmd.Stdin = in
	cmd.Env = append(os.Environ(), "TEST_LOG="+filepath.Join(dir, "bin", "test.log"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	shown := string(out)
	for _, want := range []string{
		`-   "GOLDEN-WANT-LINE",`, `+   "GOLDEN-GOT-LINE",`, "SUBTEST-FAILURE-MESSAGE",
		"GINKGO-SPEC-NAME", "GINKGO-FAILURE-DETAIL", "BUILD-ERROR-MESSAGE", "PANIC-STACK-FRAME",
		"FAIL\tgithub.com/hookwarden/hookwarden/controllers",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the summary does not show %q:\n%s", want, shown)
		}
	}
	for _, hidden := range []string{"PASSING-TEST-CHATTER", "MANAGER-JSON-LINE"} {
		if strings.Contains(shown, hidden) {
			t.Errorf("the summary shows %q:\n%s", hidden, shown)
		}
	}
	kept, err := os.ReadFile(filepath.Join(dir, "bin", "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kept), "MANAGER-JSON-LINE") || !strings.Contains(string(kept), "PASSING-TEST-CHATTER") {
		t.Errorf("the log file does not keep everything")
	}
}
