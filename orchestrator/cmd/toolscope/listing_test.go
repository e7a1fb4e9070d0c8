package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolscope/toolscope/internal/tracing/tracingtest"
)

// `session list`, `task list` and `repo list` with no task or workspace are one call
// each (the API's "-"), not one per workspace and per task: counted as
// the RPCs the orchestrator served, from its own spans.
func TestListingsAcrossTasksAreOneCall(t *testing.T) {
	t.Parallel()
	recv := tracingtest.Start(t)
	srv := startServerEnv(t, filepath.Join(t.TempDir(), "data"), recv.Env())
	var ws string
	for _, name := range []string{"acme", "globex"} {
		ws = srv.id(t, "workspace", "workspace", "create", name)
		repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", name+"/api")
		for range 3 {
			srv.ok(t, "task", "create", "--workspace", ws, "--title", "t", "--repo", repo)
		}
	}
	served := func(spans []tracingtest.Span, method string) int {
		n := 0
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasSuffix(s.Name, "/"+method) {
				n++
			}
		}
		return n
	}

	assert.Equal(t, 7, strings.Count(srv.ok(t, "task", "list"), "\n"), "a header and 6 tasks")
	srv.ok(t, "session", "list")
	assert.Equal(t, 3, strings.Count(srv.ok(t, "repo", "list"), "\n"), "a header and 2 repositories")
	// Spans leave in the order they end: once the last command's is in,
	// every earlier one is.
	srv.ok(t, "workspace", "get", ws)
	spans := recv.Wait(t, time.Minute, "the orchestrator's span of GetWorkspace", func(spans []tracingtest.Span) bool {
		return served(spans, "GetWorkspace") > 0
	})
	assert.Equal(t, 1, served(spans, "ListTasks"), "task list, and none for session list")
	assert.Equal(t, 1, served(spans, "ListSessions"))
	assert.Equal(t, 1, served(spans, "ListRepositories"))
	assert.Equal(t, 0, served(spans, "ListWorkspaces"))
}
