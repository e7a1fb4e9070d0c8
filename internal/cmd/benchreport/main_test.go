package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
goarch: amd64
pkg: example.com/a
cpu: AMD EPYC
BenchmarkToolsList/http-2   	     300	      1171 p50-us	       875.0 floor-p50-us	         1.338 ratio	         0 ns/op
BenchmarkToolsList/http-2 some log line
BenchmarkPollingCalls/github-2  20  333957 ns/op  1.000 calls/cr/cycle
PASS
`

func TestReportSplicesTheTableAndWritesJSON(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "bench.md")
	js := filepath.Join(dir, "out", "results.json")
	require.NoError(t, os.WriteFile(md, []byte("# B\n\nprose\n"+beginMarker+"\nold\n"+endMarker+"\nafter\n"), 0o644))
	var out bytes.Buffer
	require.NoError(t, run(strings.NewReader(sample), &out, md, js))

	doc, err := os.ReadFile(md)
	require.NoError(t, err)
	assert.Contains(t, string(doc), "prose\n")
	assert.Contains(t, string(doc), "after\n")
	assert.NotContains(t, string(doc), "old")
	assert.Contains(t, string(doc), "| a.ToolsList/http | ratio | 1.338 |")
	assert.NotContains(t, string(doc), "| a.ToolsList/http | ns/op", "a zeroed ns/op is not a figure")

	var rep Report
	data, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Len(t, rep.Results, 2)
	assert.Equal(t, "example.com/a", rep.Results[0].Package)
	assert.Equal(t, "BenchmarkToolsList/http", rep.Results[0].Name)
	assert.Equal(t, 1171.0, rep.Results[0].Metrics["p50-us"])
	assert.Equal(t, 1.0, rep.Results[1].Metrics["calls/cr/cycle"])
	assert.Equal(t, "AMD EPYC", rep.CPU)
}

func TestReportRefusesEmptyInputAndAMissingBlock(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "bench.md")
	require.NoError(t, os.WriteFile(md, []byte("no markers\n"), 0o644))
	assert.ErrorContains(t, run(strings.NewReader("PASS\n"), &bytes.Buffer{}, md, ""), "no benchmark results")
	assert.ErrorContains(t, run(strings.NewReader(sample), &bytes.Buffer{}, md, ""), beginMarker)
	doc, _ := os.ReadFile(md)
	assert.Equal(t, "no markers\n", string(doc), "a failed run leaves the file as it was")
}
