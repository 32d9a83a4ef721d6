package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	cases := []struct {
		reason           string
		linked, revision string
		bi               *debug.BuildInfo
		want             string
	}{
		{"the linked version wins over the module version", "1.2.3", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}}, "1.2.3 (no commit, go1.26.8)"},
		{"go install m@v: the module version", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}}, "v0.9.0 (no commit, go1.26.8)"},
		{"a checkout build: devel with its dirty commit", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "devel (commit 0123456789ab-dirty, go1.26.8)"},
		{"make build without a VCS stamp: the Makefile's revision, as the image labels", "0.1.0", "fedcba9876543210fedc",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "0.1.0 (commit fedcba987654, go1.26.8)"},
		{"make build with a stamp of the same commit: still dirty", "0.1.0", "0123456789abcdef0123",
			&debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs}, "0.1.0 (commit 0123456789ab-dirty, go1.26.8)"},
		{"a linked revision and a stamp of another: the linked one, not called dirty", "0.1.0", "fedcba9876543210fedc",
			&debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs}, "0.1.0 (commit fedcba987654, go1.26.8)"},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, fromBuild(c.linked, c.revision, c.bi).String()); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", c.reason, diff)
		}
	}
	if got := fromBuild("", "", nil).Version; got != "devel" {
		t.Errorf("no build info: version %q, want devel", got)
	}
}
