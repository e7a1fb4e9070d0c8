// Package modeltest serves scripted model endpoints on loopback for tests
// that run real agent CLIs: the streaming Messages API Claude Code calls
// (ANTHROPIC_BASE_URL) and the streaming Responses API Codex calls through
// a custom model provider (wire_api = "responses"). No real model and no
// network: a Script decides each turn, and every request is recorded.
//
// A turn is one request of the agent's loop (one that offers tools); the
// Script answers it with tool calls or with a final text. Requests
// outside the loop (a title, a quota probe, count_tokens) get a short
// text and are recorded too.
package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Call is a tool call the model makes.
type Call struct {
	// Name is the tool's name as the agent offers it (Claude Code:
	// mcp__toolscope__task_info, or ToolSearch; Codex: task_info in the
	// namespace Namespace).
	Name      string
	Namespace string
	Input     any
	// Code, for a freeform tool (Codex's exec: JavaScript), is its input
	// text; Input is then unused.
	Code string
}

// Reply is the model's answer to a turn: tool calls, or, when there are
// none, a final text that ends the agent's run.
type Reply struct {
	Calls []Call
	Text  string
}

// Turn is one request of the agent's loop.
type Turn struct {
	// N counts the turns from 1.
	N int
	// Body is the request's JSON body, as sent.
	Body []byte
	// Tools are the names of the tools the request offers the model,
	// namespaced ones as namespace.name (Codex) and deferred ones (Claude
	// Code's system reminder) included.
	Tools []string
	// Deferred names the tool namespaces the request announces without
	// their tools (Codex's deferred MCP servers).
	Deferred []string
	// ToolDefinitionBytes is the size of what the request tells the model
	// of the tools of the MCP server named at New: the JSON of their
	// definitions where the request carries them, and, for deferred tools,
	// the lines naming them (Claude Code: one per tool; Codex: one per
	// server).
	ToolDefinitionBytes int
	// Results are the texts of the tool results the request carries
	// after the model's last turn, in order.
	Results []string
}

// Script answers the turns of an agent's loop, one at a time.
type Script func(*Turn) Reply

// Server is a scripted model endpoint.
type Server struct {
	URL string

	script  Script
	api     api
	mu      sync.Mutex
	turns   []*Turn
	other   []string // method and path of requests outside the loop
	unknown []string
}

type api interface {
	// parse reads a loop request; ok is false for requests outside it.
	parse(body []byte, server string) (t *Turn, ok bool, err error)
	// answer writes reply as the API's event stream.
	answer(w http.ResponseWriter, turn int, r Reply)
	// side answers a request outside the loop.
	side(w http.ResponseWriter, r *http.Request, body []byte) bool
}

func newServer(t testing.TB, a api, server string, script Script) *Server {
	s := &Server{script: script, api: a}
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readAll(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		turn, ok, err := a.parse(body, server)
		if err != nil {
			t.Errorf("modeltest: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !ok {
			s.mu.Lock()
			s.other = append(s.other, r.Method+" "+r.URL.Path)
			s.mu.Unlock()
			if !a.side(w, r, body) {
				s.mu.Lock()
				s.unknown = append(s.unknown, r.Method+" "+r.URL.String())
				s.mu.Unlock()
				http.NotFound(w, r)
			}
			return
		}
		s.mu.Lock()
		turn.N = len(s.turns) + 1
		s.turns = append(s.turns, turn)
		s.mu.Unlock()
		a.answer(w, turn.N, s.script(turn))
	}))
	t.Cleanup(h.Close)
	s.URL = h.URL
	return s
}

// Turns returns the loop's requests so far.
func (s *Server) Turns() []*Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.turns)
}

// Other returns the method and path of the requests outside the loop, and
// of those no API path matched.
func (s *Server) Other() (answered, unknown []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.other), slices.Clone(s.unknown)
}

// Steps is a Script that answers turn i with steps[i-1] and every later
// turn with a final text.
func Steps(steps ...Script) Script {
	return func(t *Turn) Reply {
		if t.N <= len(steps) {
			return steps[t.N-1](t)
		}
		return Reply{Text: "done"}
	}
}

func readAll(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	return io.ReadAll(r.Body)
}

// sse writes one server-sent event.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func mustJSON(v any) string {
	if v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// HasTool reports whether t offers a tool whose name ends with name (so
// "task_info" matches mcp__toolscope__task_info and mcp__toolscope.task_info).
func (t *Turn) HasTool(name string) bool {
	return slices.ContainsFunc(t.Tools, func(n string) bool {
		return n == name || strings.HasSuffix(n, "__"+name) || strings.HasSuffix(n, "."+name)
	})
}

// ServerTools returns the names of the tools of the MCP server named
// server that t offers, without the agent's prefix, sorted.
func (t *Turn) ServerTools(server string) []string {
	var out []string
	for _, n := range t.Tools {
		for _, prefix := range []string{"mcp__" + server + "__", "mcp__" + server + "."} {
			if rest, ok := strings.CutPrefix(n, prefix); ok {
				out = append(out, rest)
			}
		}
	}
	slices.Sort(out)
	return out
}

// LastResult returns the last tool result text of t, or "".
func (t *Turn) LastResult() string {
	if len(t.Results) == 0 {
		return ""
	}
	return t.Results[len(t.Results)-1]
}

var mcpName = regexp.MustCompile(`mcp__[A-Za-z0-9_-]+__[A-Za-z0-9_-]+`)
