package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvSkips names the file skipped tests are recorded in; `make test` sets
// it and prints the file at the end of the run, so a skip is never silent.
const EnvSkips = "TOOLSCOPE_SKIPS"

// EnvCI is set under CI, where everything a test needs is present: a
// test that would skip for want of it fails instead.
const EnvCI = "CI"

// Skip skips t, giving why (what is missing, and how to run the test),
// and records "package: test: why" in the EnvSkips file when it names one.
// Lines are written with O_APPEND in one write each, as Figure's are.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if path := os.Getenv(EnvSkips); path != "" {
		pkg := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
		line := fmt.Sprintf("%s: %s: %s\n", pkg, t.Name(), strings.ReplaceAll(why, "\n", " "))
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("record skip: %v", err)
		} else {
			_, err = f.WriteString(line)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Errorf("record skip: %v", err)
			}
		}
	}
	t.Skip("SKIPPED: " + why)
}

// SkipOrFailUnderCI skips t as Skip does, for what a developer's machine
// may lack (root, Docker, node); under CI (EnvCI set), which has all of
// it, it fails t with the same reason instead.
func SkipOrFailUnderCI(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("%s (CI must run this test)", fmt.Sprintf(format, args...))
	}
	Skip(t, format, args...)
}
