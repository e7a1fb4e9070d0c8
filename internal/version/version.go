// Package version reports which build of toolscope is running, from the
// module and VCS information the Go toolchain stamps into every binary.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// stamp is the build's version when the build sets it: make build passes
// `git describe --always --dirty` with -ldflags -X, since Go stamps no VCS
// information in workspace mode (go.work), where every binary here is
// built.
var stamp string

// String returns the build's version: the stamp make build sets, else the
// module version, or the VCS revision (with "+dirty" for a modified tree)
// when built from a checkout outside workspace mode; plus the Go version.
func String() string {
	if stamp != "" {
		return fmt.Sprintf("%s (%s)", stamp, runtime.Version())
	}
	v := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "+dirty"
				}
			}
		}
		if rev != "" && (v == "" || v == "(devel)") {
			v = shortRev(rev) + modified
		}
	}
	return fmt.Sprintf("%s (%s)", v, runtime.Version())
}

func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// Stamped reports whether v, a String, names a build: a module version or
// a VCS revision, not a binary built without them (a test binary, "go
// build" outside a checkout), whose String says "(devel)" or "unknown".
func Stamped(v string) bool {
	return v != "" && !strings.HasPrefix(v, "(") && !strings.HasPrefix(v, " ") && !strings.HasPrefix(v, "unknown")
}
