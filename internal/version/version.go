// Package version reports which build of toolscope is running, from the
// module and VCS information the Go toolchain stamps into every binary.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// String returns the module version, or the VCS revision (with "+dirty"
// for a modified tree) when built from a checkout, plus the Go version.
func String() string {
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
