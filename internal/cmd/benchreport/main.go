// Command benchreport turns `go test -bench` output into the benchmark
// report: a Markdown table spliced into docs/benchmarks.md between
// generated-block markers (the prose around it is kept) and the same
// figures as JSON with stable keys, for scripts.
//
//	go test -run '^$' -bench . ./... | benchreport -md docs/benchmarks.md -json bench/results.json
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Markers delimit the generated block in the Markdown file.
const (
	beginMarker = "<!-- benchreport:begin -->"
	endMarker   = "<!-- benchreport:end -->"
)

// Report is the JSON document. Keys are stable.
type Report struct {
	Date    string   `json:"date"`
	Go      string   `json:"go"`
	OS      string   `json:"os"`
	Arch    string   `json:"arch"`
	CPU     string   `json:"cpu"`
	CPUs    int      `json:"cpus"`
	Results []Result `json:"results"`
}

// Result is one benchmark line: its package, name (without the -N
// GOMAXPROCS suffix), iterations and every reported metric by unit.
type Result struct {
	Package    string             `json:"package"`
	Name       string             `json:"name"`
	Iterations int64              `json:"iterations"`
	Metrics    map[string]float64 `json:"metrics"`
}

func main() {
	md := flag.String("md", "", "Markdown file whose generated block is replaced")
	js := flag.String("json", "", "JSON file to write")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *md, *js); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, mdPath, jsonPath string) error {
	rep, err := parse(in)
	if err != nil {
		return err
	}
	if len(rep.Results) == 0 {
		return errors.New("no benchmark results on stdin")
	}
	table := render(rep)
	fmt.Fprint(out, table)
	if jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := writeAtomic(jsonPath, append(data, '\n')); err != nil {
			return err
		}
	}
	if mdPath != "" {
		doc, err := os.ReadFile(mdPath)
		if err != nil {
			return err
		}
		spliced, err := splice(string(doc), table)
		if err != nil {
			return fmt.Errorf("%s: %w", mdPath, err)
		}
		return writeAtomic(mdPath, []byte(spliced))
	}
	return nil
}

// parse reads the standard benchmark format: "pkg:" and "cpu:" headers,
// then lines "BenchmarkName-N iterations value unit value unit ...".
func parse(in io.Reader) (Report, error) {
	rep := Report{Date: time.Now().UTC().Format("2006-01-02"), Go: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	pkg := ""
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimPrefix(line, "pkg: ")
		case strings.HasPrefix(line, "cpu: "):
			rep.CPU = strings.TrimPrefix(line, "cpu: ")
		case strings.HasPrefix(line, "Benchmark"):
			f := strings.Fields(line)
			if len(f) < 2 || len(f)%2 != 0 {
				continue // a benchmark's own log line, not a result
			}
			iters, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue
			}
			r := Result{Package: pkg, Name: trimProcs(f[0]), Iterations: iters, Metrics: map[string]float64{}}
			for i := 2; i+1 < len(f); i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return rep, fmt.Errorf("%s: metric %q: %w", r.Name, f[i+1], err)
				}
				if f[i+1] == "ns/op" && v == 0 {
					continue // benchmarks that time figure and floor by hand zero it
				}
				r.Metrics[f[i+1]] = v
			}
			rep.Results = append(rep.Results, r)
		}
	}
	return rep, sc.Err()
}

// trimProcs drops the -N GOMAXPROCS suffix.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// render prints one table row per result and metric, ratios included;
// a benchmark is named by its package's last element and its name.
func render(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s · %s · %s/%s · %s · %d CPUs\n\n", rep.Date, rep.Go, rep.OS, rep.Arch, rep.CPU, rep.CPUs)
	b.WriteString("| benchmark | metric | value |\n|---|---|---:|\n")
	for _, r := range rep.Results {
		units := make([]string, 0, len(r.Metrics))
		for u := range r.Metrics {
			units = append(units, u)
		}
		sort.Strings(units)
		for _, u := range units {
			fmt.Fprintf(&b, "| %s.%s | %s | %s |\n", path.Base(r.Package), strings.TrimPrefix(r.Name, "Benchmark"), u,
				strconv.FormatFloat(r.Metrics[u], 'g', 6, 64))
		}
	}
	return b.String()
}

// splice replaces the text between the markers with table.
func splice(doc, table string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("missing %s ... %s block", beginMarker, endMarker)
	}
	return doc[:i+len(beginMarker)] + "\n" + table + doc[j:], nil
}

// writeAtomic writes through a temporary file in the same directory, so a
// failed run never leaves a half-written report.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".benchreport-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
