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
	shown, dir := summarize(t)
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

// TestSummaryTimesPackages: after the run, make test lists each package's time, slowest first,
// marking the failed ones; the failures' own output still follows.
func TestSummaryTimesPackages(t *testing.T) {
	shown, _ := summarize(t)
	_, table, ok := strings.Cut(shown, "== time per package, slowest first\n")
	if !ok {
		t.Fatalf("no timing table:\n%s", shown)
	}
	table, failures, ok := strings.Cut(table, "\n== what failed")
	if !ok {
		t.Fatalf("the failures do not follow the timing table:\n%s", shown)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"49.9s ./controllers (FAIL)",
		"10.5s ./cmd/hookwarden (FAIL)",
		"0.2s ./internal/y",
		"0.1s ./internal/x (FAIL)",
		"60.7s in all (4 packages; they run in parallel, so more than the wall time)",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("timing table:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(failures, "SUBTEST-FAILURE-MESSAGE") {
		t.Errorf("the failed test's own output is not shown after the table:\n%s", shown)
	}
}

// summarize pipes testdata/go-test.log through hack/test-summary.sh and returns what it shows
// and the folder whose bin/test.log it wrote.
func summarize(t *testing.T) (string, string) {
	t.Helper()
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
	return string(out), dir
}
