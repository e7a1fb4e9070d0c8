// Package catalogtest runs real external MCP servers for tests of the
// governed catalog: a go-sdk server over stdio, built from source once per
// test process, whose tool list is a file the test rewrites; and an
// in-process go-sdk server over streamable HTTP whose tool list the test
// sets directly.
package catalogtest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest/fakeserver"
)

// ToolSpec is one tool of a test server.
type ToolSpec = fakeserver.ToolSpec

// Start is what the stdio server records when it starts.
type Start = fakeserver.Start

var stdioServer = testutil.Binary{Package: "github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest/stdioserver", Name: "stdioserver"}

// StdioServer builds the stdio test server (package stdioserver) once per
// test process, in the go.work workspace, and returns its path.
func StdioServer(t testing.TB) string {
	t.Helper()
	return stdioServer.Path(t)
}

// RemoveBuilds deletes what StdioServer built; call it from TestMain.
func RemoveBuilds() { stdioServer.Remove() }

// StdioFiles are the files a stdio test server reads and writes: give
// their paths to it through TOOLS_FILE, STARTS_FILE and CALLS_FILE.
type StdioFiles struct {
	ToolsFile, StartsFile, CallsFile string
}

// NewStdioFiles returns the files in a temporary directory, with an empty
// tool list.
func NewStdioFiles(t testing.TB) *StdioFiles {
	t.Helper()
	dir := t.TempDir()
	f := &StdioFiles{
		ToolsFile:  filepath.Join(dir, "tools.json"),
		StartsFile: filepath.Join(dir, "starts.jsonl"),
		CallsFile:  filepath.Join(dir, "calls.txt"),
	}
	f.SetTools(t)
	return f
}

// SetTools replaces the server's tool list; it takes effect at the
// server's next request. The file is replaced atomically.
func (f *StdioFiles) SetTools(t testing.TB, specs ...ToolSpec) {
	t.Helper()
	if specs == nil {
		specs = []ToolSpec{}
	}
	b, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	tmp := f.ToolsFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.ToolsFile); err != nil {
		t.Fatal(err)
	}
}

// Starts returns what the server recorded at each start, oldest first.
func (f *StdioFiles) Starts(t testing.TB) []Start {
	t.Helper()
	var out []Start
	for _, line := range lines(t, f.StartsFile) {
		var s Start
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("starts file: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// CallNames returns the tools called so far, in order.
func (f *StdioFiles) CallNames(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, line := range lines(t, f.CallsFile) {
		var name string
		if err := json.Unmarshal([]byte(line), &name); err != nil {
			t.Fatalf("calls file: %v", err)
		}
		out = append(out, name)
	}
	return out
}

func lines(t testing.TB, path string) []string {
	t.Helper()
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var out []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// HTTPOptions configure an HTTPServer.
type HTTPOptions struct {
	// Header and Value, if set, are required on every request; others are
	// refused with 401.
	Header, Value string
	// PageSize is the tools per tools/list page; 0 is the SDK's default.
	PageSize int
	// JSONResponse makes the server answer calls with a JSON body rather
	// than an event stream.
	JSONResponse bool
}

// HTTPServer is an in-process go-sdk MCP server over streamable HTTP
// (stateful), on a loopback port.
type HTTPServer struct {
	URL string

	srv   *httptest.Server
	tools *fakeserver.Toolset

	mu       sync.Mutex
	calls    []string
	refused  int
	requests int
}

// NewHTTPServer starts a server with no tools; it stops when the test
// ends.
func NewHTTPServer(t testing.TB, opts HTTPOptions) *HTTPServer {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "httpserver", Version: "4.5.6"}, &mcp.ServerOptions{
		PageSize:     opts.PageSize,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	s := &HTTPServer{tools: fakeserver.New(server)}
	s.tools.OnCall = func(name string, _ json.RawMessage) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls = append(s.calls, name)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{JSONResponse: opts.JSONResponse})
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		ok := opts.Header == "" || r.Header.Get(opts.Header) == opts.Value
		if !ok {
			s.refused++
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, "missing or wrong credentials", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL + "/mcp"
	t.Cleanup(s.Close)
	return s
}

// SetTools replaces the server's tool list.
func (s *HTTPServer) SetTools(specs ...ToolSpec) { s.tools.Set(specs) }

// CallNames returns the tools called so far, in order.
func (s *HTTPServer) CallNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Refused returns how many requests lacked the required header.
func (s *HTTPServer) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Close stops the server, ending its connections: the provider is gone.
func (s *HTTPServer) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}
