// Package version reports which build of Hookwarden is running (--version on both binaries).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and revision are set at link time (make build: -ldflags "-X <this
// package>.version=0.3.0 -X <this package>.revision=<commit>", the same values the image
// labels carry); empty means "ask the build info", which knows the module version of a `go
// install m@v` build and the VCS revision of a build from a checkout (not of a build without
// .git, -buildvcs=false, or a cross build in some setups).
var version, revision string

// Info is what --version prints.
type Info struct {
	Version   string
	Revision  string // VCS commit, "" when the build had none
	Modified  bool   // built from a dirty tree
	GoVersion string
}

// Get returns the running binary's version.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(version, revision, bi)
}

// fromBuild prefers the linked version, then the module version, then "devel"; and the linked
// revision, then the build info's. The build info's dirty flag counts only for its own
// revision.
func fromBuild(linked, linkedRevision string, bi *debug.BuildInfo) Info {
	info := Info{Version: linked, Revision: linkedRevision, GoVersion: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = "devel"
		}
		return info
	}
	info.GoVersion = bi.GoVersion
	var vcsRevision string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			vcsRevision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if info.Revision == "" {
		info.Revision = vcsRevision
	}
	info.Modified = modified && vcsRevision != "" && vcsRevision == info.Revision
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}

// String is the one line --version prints, e.g.
// "manager 0.3.0 (commit 1a2b3c4d5e6f, go1.26.8)".
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev == "":
		rev = "no commit"
	case i.Modified:
		rev = "commit " + rev + "-dirty"
	default:
		rev = "commit " + rev
	}
	return fmt.Sprintf("%s (%s, %s)", i.Version, rev, i.GoVersion)
}
