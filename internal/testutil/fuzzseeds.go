package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// EnvWriteFuzzSeeds, set to 1, makes AddFuzzSeeds also write each seed
// into the package's committed corpus (testdata/fuzz/<FuzzName>/), in the
// `go test fuzz v1` format. Regenerate a corpus with, for example:
//
//	TOOLSCOPE_WRITE_FUZZ_SEEDS=1 go test -run FuzzRequests ./orchestrator/internal/api
const EnvWriteFuzzSeeds = "TOOLSCOPE_WRITE_FUZZ_SEEDS"

// FuzzSeed is one named seed input of a fuzz target: its arguments, in
// the order the fuzz function takes them.
type FuzzSeed struct {
	Name string
	Args []any
}

var unsafeSeedName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// AddFuzzSeeds adds seeds to f and, when EnvWriteFuzzSeeds is 1, writes
// them to testdata/fuzz/<f's name>/seed-<name> as well, replacing the
// seed-* files written before. Arguments may be string, []byte, bool,
// uint8, int, int64 or uint64.
func AddFuzzSeeds(f *testing.F, seeds []FuzzSeed) {
	f.Helper()
	write := os.Getenv(EnvWriteFuzzSeeds) == "1"
	dir := filepath.Join("testdata", "fuzz", f.Name())
	if write {
		// Seeds written before are replaced; other entries, such as
		// crashers the fuzzer found, are kept.
		old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, o := range old {
			if err := os.Remove(o); err != nil {
				f.Fatal(err)
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for _, s := range seeds {
		f.Add(s.Args...)
		if !write {
			continue
		}
		text, err := EncodeFuzzSeed(s.Args...)
		if err != nil {
			f.Fatalf("seed %s: %v", s.Name, err)
		}
		name := "seed-" + strings.Trim(unsafeSeedName.ReplaceAllString(s.Name, "-"), "-")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			f.Fatal(err)
		}
	}
}

// EncodeFuzzSeed returns the `go test fuzz v1` file of one input.
func EncodeFuzzSeed(args ...any) (string, error) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case string:
			fmt.Fprintf(&b, "string(%+q)\n", v)
		case []byte:
			fmt.Fprintf(&b, "[]byte(%+q)\n", v)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		case uint8:
			fmt.Fprintf(&b, "byte(%+q)\n", v)
		case int:
			fmt.Fprintf(&b, "int(%d)\n", v)
		case int64:
			fmt.Fprintf(&b, "int64(%d)\n", v)
		case uint64:
			fmt.Fprintf(&b, "uint64(%d)\n", v)
		default:
			return "", fmt.Errorf("cannot encode a %T in a fuzz corpus file", a)
		}
	}
	return b.String(), nil
}
