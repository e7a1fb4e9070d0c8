package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/version"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// listedTool is one tool as the session's MCP endpoint lists it.
type listedTool struct {
	Name, Title, Description string
	ReadOnly                 bool
}

// maxToolsListed bounds the tools a session's list shows.
const maxToolsListed = 1000

// sessionTools lists the tools the session's MCP clients see now: the
// console is one more client of the session's endpoint for the length of
// a tools/list. It uses the session's bearer token on the server side and
// never renders it, so a viewer (GetSession) sees the names, not the
// token (GetSessionMCP, member).
func (c *Console) sessionTools(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	s, err := c.session(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	d := map[string]any{"S": s}
	if s.State != model.SessionRunning {
		d["Problem"] = fmt.Sprintf("The session is %s: no MCP client reaches it now.", s.State)
		c.fragment(w, "tools", me, d)
		return
	}
	tools, err := c.listTools(ctx, s.ID)
	if err != nil {
		d["Problem"] = "The session's MCP endpoint did not list its tools: " + c.explain(r, err)
	}
	d["Tools"] = tools
	c.fragment(w, "tools", me, d)
}

func (c *Console) listTools(ctx context.Context, id string) ([]listedTool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ToolsTimeout)
	defer cancel()
	m, err := c.svc.GetSessionMCP(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.BearerToken == "" {
		// A hosted session's token was shown once, at attach, and only
		// its hash is kept (ADR 0026).
		return nil, errdefs.FailedPrecondition("this is a hosted session: its token was shown once, at attach, and the console does not hold it")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolscope-console", Version: version.String()}, nil)
	httpc := &http.Client{Transport: bearer{token: m.BearerToken}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m.URL, HTTPClient: httpc, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	var out []listedTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		lt := listedTool{Name: t.Name, Title: t.Title, Description: t.Description}
		if t.Annotations != nil {
			lt.ReadOnly = t.Annotations.ReadOnlyHint
		}
		out = append(out, lt)
		if len(out) == maxToolsListed {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// changesTools are the events after which a session's tool list or state
// may differ.
var changesTools = map[model.EventKind]bool{
	model.EventProvidersPushed: true, model.EventProvidersPushFailed: true,
	model.EventExternalToolsPushed: true, model.EventExternalToolsPushFailed: true,
	model.EventSessionStarted: true, model.EventSessionEnded: true, model.EventAgentExited: true,
}

// sessionLive is the session page's event stream: a "changed" event
// whenever the session's tools or state may have changed since the page
// was rendered (?since, in Unix nanoseconds), after which the page fetches
// its tool list again.
func (c *Console) sessionLive(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	s, err := c.svc.GetSession(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	sse, ok := c.startSSE(w)
	if !ok {
		return
	}
	defer sse.end()
	err = c.svc.WatchTaskEvents(ctx, s.TaskID, 0, func(e model.Event) error {
		if !changesTools[e.Kind] || (e.SessionID != "" && e.SessionID != s.ID) || e.Time.UnixNano() < since {
			return nil
		}
		return sse.send("changed", e.Seq, strconv.FormatUint(e.Seq, 10))
	})
	if err != nil {
		c.opts.Log.Debug("console: session stream ended", "session_id", s.ID, "error", err.Error())
	}
}

// eventsStream is a task's event log as server-sent events, each an HTML
// table row: the stored backlog, then each event as it commits
// (WatchTaskEvents: gap-free, repeat-free). A reconnecting browser resumes
// after its Last-Event-ID.
func (c *Console) eventsStream(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	taskID := r.PathValue("id")
	if _, err := c.svc.GetTask(ctx, taskID); err != nil {
		c.failErr(w, r, me, err)
		return
	}
	after, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	sse, ok := c.startSSE(w)
	if !ok {
		return
	}
	defer sse.end()
	err := c.svc.WatchTaskEvents(ctx, taskID, after, func(e model.Event) error {
		var b bytes.Buffer
		if err := c.pages.byName["partials"].ExecuteTemplate(&b, "event", view{Me: me, D: map[string]any{"E": eventRow{e}}}); err != nil {
			return err
		}
		return sse.send("event", e.Seq, b.String())
	})
	if err != nil {
		c.opts.Log.Debug("console: event stream ended", "task_id", taskID, "error", err.Error())
	}
}

// eventRow is an event as the events page shows it.
type eventRow struct{ model.Event }

// Outcome is a tool call's outcome code ("ok" or why it was refused or
// failed), read from its audit message; "" for other events.
func (e eventRow) Outcome() string {
	if e.Kind != model.EventToolCalled {
		return ""
	}
	for _, f := range strings.Fields(e.Message) {
		if v, ok := strings.CutPrefix(f, "outcome="); ok {
			return v
		}
	}
	return ""
}

// Refused reports a tool call that did not succeed.
func (e eventRow) Refused() bool { o := e.Outcome(); return o != "" && o != "ok" }

// Failed reports an event that records a failure.
func (e eventRow) Failed() bool {
	return e.Refused() || e.Kind == model.EventProvidersPushFailed || e.Kind == model.EventExternalToolsPushFailed
}

type sseWriter struct {
	w       http.ResponseWriter
	f       http.Flusher
	release func()
}

// startSSE takes a place among the streams and starts answering with
// server-sent events; the caller calls the returned writer's end. Without a
// place it answers 503 with Retry-After.
func (c *Console) startSSE(w http.ResponseWriter) (*sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	select {
	case c.streams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("the console already serves %d event streams, its limit (serve --console-max-streams); retry later", cap(c.streams)),
			http.StatusServiceUnavailable)
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": toolscope\n\n")
	f.Flush()
	return &sseWriter{w: w, f: f, release: func() { <-c.streams }}, true
}

// end gives the stream's place back.
func (s *sseWriter) end() { s.release() }

// send writes one event; data's lines become data lines.
func (s *sseWriter) send(event string, id uint64, data string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "event: %s\nid: %d\n", event, id)
	for _, line := range strings.Split(strings.ReplaceAll(data, "\r", ""), "\n") {
		fmt.Fprintf(&b, "data: %s\n", line)
	}
	b.WriteString("\n")
	if _, err := fmt.Fprint(s.w, b.String()); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}
