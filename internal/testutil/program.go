package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TrivialProgram is the source of the floor benchmarks measure process
// and container start against: it prints "ready" and exits, or with the
// argument "wait" blocks on stdin first, so it can be measured alive.
const TrivialProgram = `package main

import "os"

func main() {
	os.Stdout.WriteString("ready\n")
	if len(os.Args) > 1 && os.Args[1] == "wait" {
		os.Stdin.Read(make([]byte, 1))
	}
}
`

// BuildProgram builds a static Go program from the source of its
// main.go, outside the workspace, into dir, and returns its path.
func BuildProgram(t testing.TB, dir, source string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"go.mod": "module trivial\n\ngo 1.24\n", "main.go": source} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "program")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", src, err, b)
	}
	return out
}
