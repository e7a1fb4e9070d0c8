package testutil

import (
	"fmt"
	"os"
	"testing"
)

// EnvFigures names the file reliability tests append their figures to;
// `make test` sets it and prints the file at the end of the run.
const EnvFigures = "TOOLSCOPE_FIGURES"

// Figure records one measured figure of a reliability test (a detection
// time, a count of calls refused, fuzz executions run): it is logged on
// t, and when EnvFigures names a file it is appended there as one line,
// "case: figure", so a run of every package ends with one table of them.
// Lines are written with O_APPEND in one write each, so test binaries
// running in parallel do not interleave them.
func Figure(t testing.TB, name, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", name, fmt.Sprintf(format, args...))
	t.Log("figure " + line)
	path := os.Getenv(EnvFigures)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("record figure: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Errorf("record figure: %v", err)
	}
}
