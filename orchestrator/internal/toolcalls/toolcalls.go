// Package toolcalls answers the tool calls agents make through agentctl.
// Tool visibility in an agent's list is discovery only, never security:
// every call is checked here, whatever the agent was shown — the session
// must exist and belong to the calling task, must not have ended, the tool
// must exist, and a provider tool needs its provider in the task's set,
// a workspace connection to it and a credential that resolves. A catalog
// tool (of an external MCP server) must be assigned to the task's
// workspace, its provider and itself enabled, and itself available; it is
// then forwarded to its server over a pooled connection.
//
// Failures are results, not errors: an agent reads a stable code and a
// message it can act on. Credentials are resolved from their reference at
// call time and never appear in a result or a log line: every result leaves
// through CallHandler, scrubbed of the credentials the orchestrator
// resolved and of token-shaped strings (package scrub), whatever a
// provider echoed.
package toolcalls

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// Call is a tool call as its backend delivers it: executors.ToolCall, the
// one definition. OnLink says its session was created or re-adopted by
// this orchestrator on the agentctl link the call came on; a call without
// it is refused with session_not_on_link.
type Call = executors.ToolCall

// Result is the answer to a call.
type Result struct {
	IsError    bool
	Code       string // stable, machine-readable (toolapi.Code*); set when IsError
	Text       string
	Structured any // marshalled as the structured result, if set

	// repository is the repository a provider tool acted on, for the
	// audit record.
	repository string
	// wire is the result as it is sent, set by Handle (see bounded).
	wire *executors.ToolResult
}

func fail(code, format string, args ...any) Result {
	return Result{IsError: true, Code: code, Text: fmt.Sprintf(format, args...)}
}

// Dispatcher answers tool calls from the store and the providers' APIs.
type Dispatcher struct {
	store *store.Store
	log   *slog.Logger
	// auditRate bounds the tool.called events each session records.
	auditRate auditSessions
	// conns resolves, gates and builds the provider clients.
	conns *connections.Connections
	// addSources backs task_add_sources.
	addSources SourceAdder
	// deliver backs git_push.
	deliver Deliverer
	// external forwards calls to catalog tools; nil: there are none.
	external ExternalCaller
	// metrics counts the calls by tool and outcome; nil: not counted.
	metrics *metrics.Metrics
}

// New returns a dispatcher over st. log may be nil.
func New(st *store.Store, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{store: st, log: log, conns: connections.New(st, connections.Options{})}
}

// SetConnections installs the orchestrator's one connections component
// (shared with the lifecycle poller and the service); call it before the
// first call. Its secrets are what every result is scrubbed with, so the
// orchestrator's other resolvers (and its logs and events) should share
// them.
func (d *Dispatcher) SetConnections(c *connections.Connections) { d.conns = c }

// SetMetrics makes the dispatcher count every call it answers, by tool
// and outcome, with its latency; call it before the first call.
func (d *Dispatcher) SetMetrics(m *metrics.Metrics) { d.metrics = m }

// handler answers one task tool once the call is authorized.
type handler func(ctx context.Context, d *Dispatcher, s scope, args json.RawMessage) Result

// scope is what an authorized call may touch.
type scope struct {
	session model.Session
	task    model.Task
}

// builtin is how the dispatcher answers one tool of toolapi's table: a
// task tool with its handler, or a provider tool.
type builtin struct {
	toolapi.Tool
	task     handler
	provider providerTool
}

// builtins is the dispatch by name, derived from toolapi's table: every
// built-in tool and nothing else (dispatch panics at start-up on a table
// tool without a handler, or a handler of no tool).
var builtins = dispatch()

// taskTools answers the task tools. A tool the table says takes no
// arguments is refused any (see noArguments).
var taskTools = map[string]handler{
	toolapi.TaskInfoTool:    taskInfo,
	toolapi.SessionInfoTool: sessionInfo,
	toolapi.TaskInboxTool:   inbox,
	toolapi.AddSourcesTool:  addSources,
	toolapi.GitPushTool:     gitPush,
}

func dispatch() map[string]builtin {
	out := map[string]builtin{}
	used := map[string]bool{}
	for _, t := range toolapi.Tools() {
		b := builtin{Tool: t}
		if p, ok := t.Group.Provider(); ok {
			handle, key := changeHandlers[t.Name], t.Name
			if handle == nil {
				handle, key = changeHandlers[t.Counterpart], t.Counterpart
			}
			if handle == nil {
				panic("toolcalls: no handler for provider tool " + t.Name)
			}
			used[key] = true
			b.provider = providerTool{provider: p, handle: handle,
				needsChange: slices.Contains(t.Codes, toolapi.CodeNoChangeRequest),
				repoOnly:    t.Args == reflect.TypeFor[toolapi.RepoArgs]()}
		} else {
			h := taskTools[t.Name]
			if h == nil {
				panic("toolcalls: no handler for task tool " + t.Name)
			}
			if t.Args == nil {
				h = noArguments(h)
			}
			b.task = h
		}
		out[t.Name] = b
	}
	for name := range changeHandlers {
		if !used[name] {
			panic("toolcalls: handler of " + name + ", which is not a provider tool of toolapi's table")
		}
	}
	for name := range taskTools {
		if t, ok := toolapi.Lookup(name); !ok || t.Group != toolapi.GroupTask {
			panic("toolcalls: handler of " + name + ", which is not a task tool of toolapi's table")
		}
	}
	return out
}

// noArguments wraps a task tool that takes no arguments: anything given
// is refused, as agentctl's schema does.
func noArguments(h handler) handler {
	return func(ctx context.Context, d *Dispatcher, s scope, args json.RawMessage) Result {
		if err := decode(args, &struct{}{}); err != nil {
			return fail(toolapi.CodeInvalidArguments, "this tool takes no arguments: %v", err)
		}
		return h(ctx, d, s, args)
	}
}

func inbox(ctx context.Context, d *Dispatcher, s scope, _ json.RawMessage) Result {
	prompts, err := d.store.TakePrompts(ctx, s.task.ID)
	if err != nil {
		return fail(toolapi.CodeInternal, "the inbox could not be read; retry")
	}
	out := toolapi.Inbox{Messages: []toolapi.InboxMessage{}}
	var lines []string
	for _, p := range prompts {
		out.Messages = append(out.Messages, toolapi.InboxMessage{Text: p.Text, Link: p.Link, Time: p.CreatedAt.Format(time.RFC3339)})
		lines = append(lines, "- "+p.Text)
	}
	if len(lines) == 0 {
		return Result{Text: "No new messages.", Structured: out}
	}
	return Result{Text: strings.Join(lines, "\n"), Structured: out}
}

// SourceAdder applies the task's workspace policy to a batch the agent of
// a session asks for: the orchestrator's own path, so an attached batch
// follows the same recompute and pushes as the API's. An error matching
// store.ErrSourceAdditionDenied is the deny policy.
type SourceAdder func(ctx context.Context, sessionID, taskID string, repoIDs []string) (SourceOutcome, error)

// SourceOutcome is what became of an agent's batch: attached, with the
// task's provider set after it, or held for approval as Request.
type SourceOutcome struct {
	Providers model.ProviderSet
	Request   *model.SourceRequest
}

// SetSourceAdder installs the handler behind task_add_sources.
func (d *Dispatcher) SetSourceAdder(add SourceAdder) { d.addSources = add }

func addSources(ctx context.Context, d *Dispatcher, s scope, args json.RawMessage) Result {
	var in toolapi.AddSourcesArgs
	if err := decode(args, &in); err != nil {
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	}
	if d.addSources == nil {
		return fail(toolapi.CodeInternal, "this orchestrator cannot attach sources")
	}
	ctx = model.WithActor(ctx, model.Actor{Kind: model.ActorSession, Name: s.session.ID})
	out, err := d.addSources(ctx, s.session.ID, s.task.ID, in.RepositoryIDs)
	switch {
	case errors.Is(err, store.ErrSourceAdditionDenied):
		return fail(toolapi.CodeSourceAdditionDenied, "%v", err)
	case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrNotFound):
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	case errors.Is(err, errdefs.ErrAlreadyExists):
		return fail(toolapi.CodeAlreadyExists, "%v", err)
	case err != nil:
		return d.internal(ctx, Call{TaskID: s.task.ID, Tool: toolapi.AddSourcesTool}, err)
	}
	if req := out.Request; req != nil {
		return Result{
			Text: fmt.Sprintf("Source request %s is pending: the workspace's policy holds agent-initiated additions for a person's approval. "+
				"Nothing is attached yet; call task_inbox later to learn the outcome, and do not ask again meanwhile.", req.ID),
			Structured: toolapi.AddSourcesResult{Providers: s.task.Providers.Set.Strings(), Generation: s.task.Providers.Generation,
				Pending: true, RequestID: req.ID},
		}
	}
	set := out.Providers
	return Result{
		Text:       fmt.Sprintf("Attached %d repositories; providers now %s (generation %d)", len(in.RepositoryIDs), describe(set.Set), set.Generation),
		Structured: toolapi.AddSourcesResult{Providers: set.Set.Strings(), Generation: set.Generation},
	}
}

// CallHandler answers calls as executors deliver them; it is what the
// orchestrator installs in every backend, and the single exit of results
// toward agents: each leaves scrubbed and within toolapi.MaxResultBytes
// (see bounded).
func (d *Dispatcher) CallHandler(ctx context.Context, c executors.ToolCall) executors.ToolResult {
	return d.result(d.Handle(ctx, c))
}

// Handle authorizes and answers one call, bounds its result (see
// bounded), and records it as a tool.called event (see audit.go).
func (d *Dispatcher) Handle(ctx context.Context, c Call) Result {
	ctx, span := startSpan(ctx, c)
	start := time.Now()
	var a auditRecord
	res := d.bounded(ctx, c, d.handle(ctx, c, &a))
	if res.IsError {
		d.log.InfoContext(ctx, "tool call refused", "session_id", shown(c.SessionID), "task_id", shown(c.TaskID), "tool", shown(c.Tool), "code", res.Code)
	}
	took := time.Since(start)
	d.audit(ctx, c, &a, res, took)
	_, builtin := builtins[c.Tool]
	d.metrics.ToolCall(c.Tool, builtin, outcomeOf(res), took)
	endSpan(span, &a, res)
	return res
}

func (d *Dispatcher) handle(ctx context.Context, c Call, a *auditRecord) Result {
	if !c.OnLink {
		// Identity is the link's, not the message's: whatever this call
		// claims, it came on an agentctl that does not carry that session.
		return fail(toolapi.CodeSessionNotOnLink, "session %q was not started by the orchestrator on this agentctl; "+
			"this agentctl's sessions can use tools only as themselves", c.SessionID)
	}
	sess, err := d.store.GetSession(ctx, c.SessionID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return fail(toolapi.CodeUnknownSession, "session %q is not known to the orchestrator", c.SessionID)
	} else if err != nil {
		return d.internal(ctx, c, err)
	}
	// From here the task and the mode are the orchestrator's records of
	// the session, never what the message (or a replayed CreateSession)
	// says.
	a.taskID, a.sessionID = sess.TaskID, sess.ID
	if sess.TaskID != c.TaskID {
		a.claimedTask = c.TaskID
		return fail(toolapi.CodePermissionDenied, "session %q does not work on task %q", c.SessionID, c.TaskID)
	}
	if c.Refused != "" {
		// Refused on the session's MCP endpoint: on the record, with the
		// code it was refused with, and nothing more (it carries no
		// arguments and wants no answer).
		return fail(endpointRefusal(c.Refused), "refused by the session's MCP endpoint before it reached the orchestrator")
	}
	if sess.State == model.SessionStopped || sess.State == model.SessionFailed {
		return fail(toolapi.CodeSessionEnded, "session %q has %s; resume it to use tools", c.SessionID, sess.State)
	}
	tracing.Stage(ctx, "session: on the link, known, on its task, running")
	args := c.Arguments
	if len(args) > toolapi.MaxArgumentBytes {
		return fail(toolapi.CodeArgumentsTooLarge, "%s", toolapi.ArgumentsTooLarge(len(args)))
	}
	if trimmed := strings.TrimSpace(string(args)); trimmed == "" || trimmed == "null" {
		args = json.RawMessage(`{}`)
	}
	if !json.Valid(args) || !strings.HasPrefix(strings.TrimSpace(string(args)), "{") {
		return fail(toolapi.CodeInvalidArguments, "arguments must be a JSON object")
	}
	tracing.Stage(ctx, "arguments: a JSON object within bounds")
	task, err := d.store.GetTask(ctx, sess.TaskID)
	if err != nil {
		return d.internal(ctx, c, err)
	}
	s := scope{session: sess, task: task}
	if b, ok := builtins[c.Tool]; ok {
		// The mode check and the provider check come from the table: its
		// read-only flag says what a plan session may call, its group
		// which provider the tool acts on.
		if readOnlySession(sess) && !b.ReadOnly {
			return readOnlyRefusal(c.Tool)
		}
		tracing.Stage(ctx, "mode: the session may call the tool")
		if b.task != nil {
			return b.task(ctx, d, s, args)
		}
		return d.handleProvider(ctx, c, s, b.provider, args)
	}
	if res, ok := d.handleExternal(ctx, c, s, args); ok {
		return res
	}
	return fail(toolapi.CodeUnknownTool, "there is no tool %q", c.Tool)
}

// readOnlySession reports whether a session may call read-only tools
// only: plan mode, and any mode the orchestrator does not know (the
// narrowest surface, as agentctl's registry treats it).
// endpointRefusal is a report's code as recorded: one of
// toolapi.EndpointRefusals, else malformed, so that what a report claims
// never writes free text to the audit or a label to the metrics.
func endpointRefusal(code string) string {
	if toolapi.EndpointRefusals[code] {
		return code
	}
	return malformed
}

func readOnlySession(s model.Session) bool { return s.Mode != model.ModeTask }

func readOnlyRefusal(tool string) Result {
	return fail(toolapi.CodeReadOnlySession, "%s changes things, and this session is in plan mode (read-only tools only); "+
		"launch a task-mode session to use it", tool)
}

func (d *Dispatcher) internal(ctx context.Context, c Call, err error) Result {
	d.log.ErrorContext(ctx, "tool call failed", "session_id", c.SessionID, "tool", c.Tool, "error", err.Error())
	return fail(toolapi.CodeInternal, "the orchestrator could not answer; retry later")
}

func taskInfo(ctx context.Context, d *Dispatcher, s scope, _ json.RawMessage) Result {
	info := toolapi.TaskInfo{
		TaskID: s.task.ID, WorkspaceID: s.task.WorkspaceID, Title: s.task.Title, Description: s.task.Description,
		Providers: s.task.Providers.Set.Strings(), Generation: s.task.Providers.Generation,
		Repositories: []toolapi.Repository{}, Available: []toolapi.Repository{},
	}
	attached := map[string]bool{}
	for _, r := range s.task.Repositories {
		attached[r.ID] = true
	}
	all, err := d.store.ListRepositories(ctx, s.task.WorkspaceID)
	if err != nil {
		return fail(toolapi.CodeInternal, "the workspace's repositories could not be read")
	}
	transport := s.session.Transport()
	for _, r := range all {
		if !attached[r.ID] {
			info.Available = append(info.Available, repository(r, false, transport))
		}
	}
	var lines []string
	for _, r := range s.task.Repositories {
		repo := repository(r.Repository, r.Primary, transport)
		name := cmp.Or(repo.Path, repo.LocalPath)
		if repo.Host != "" {
			name = repo.Host + "/" + repo.Path
		}
		line := strings.TrimSpace(fmt.Sprintf("- %s %s", r.ID, name)) + " (" + r.Provider + ")"
		if c, ok := s.session.Checkouts.OfRepository(r.ID); ok && transport == toolapi.TransportColocated {
			if c.Path != "" {
				repo.LocalPath = c.Path
				line += ", checked out at " + c.Path + " on branch " + c.Branch
			} else {
				line += ", not checked out: " + c.Error
			}
		}
		info.Repositories = append(info.Repositories, repo)
		lines = append(lines, line)
	}
	if info.Orientation, err = d.orientation(ctx, s); err != nil {
		return fail(toolapi.CodeInternal, "the task's tool states could not be read")
	}
	text := fmt.Sprintf("Task %s: %s\nProviders: %s\nRepositories:\n%s", s.task.ID, s.task.Title,
		describe(s.task.Providers.Set), strings.Join(lines, "\n"))
	if len(info.Orientation) > 0 {
		text += "\nWhy some tools are missing or would fail:"
		for _, o := range info.Orientation {
			text += "\n- [" + o.State + "] " + o.Message
		}
	}
	return Result{Text: text, Structured: info}
}

// repository is r as task_info shows it to a session served over
// transport: a repository of no review provider has a directory for a
// path, which is colocated-only (toolapi.ColocatedOnly): a colocated
// session reads it as local_path, a hosted one not at all; nor does a
// hosted session read a file: remote URL. (A checked-out repository's
// local_path is its checkout, set by taskInfo.)
func repository(r model.Repository, primary bool, transport toolapi.Transport) toolapi.Repository {
	out := toolapi.Repository{ID: r.ID, Provider: r.Provider, Host: r.Host, Path: r.Path, RemoteURL: r.RemoteURL, Primary: primary}
	if providers.Of(r.Provider).IsEmpty() {
		out.Path = ""
		if transport == toolapi.TransportColocated {
			out.LocalPath = r.Path
		}
	}
	if transport != toolapi.TransportColocated && strings.HasPrefix(strings.ToLower(out.RemoteURL), "file:") {
		out.RemoteURL = "" // a directory on the orchestrator's machine
	}
	return out
}

func sessionInfo(ctx context.Context, d *Dispatcher, s scope, _ json.RawMessage) Result {
	ws, err := d.store.GetWorkspace(ctx, s.task.WorkspaceID)
	if err != nil {
		return fail(toolapi.CodeInternal, "the workspace could not be read")
	}
	info := toolapi.SessionInfo{
		SessionID: s.session.ID, TaskID: s.task.ID, WorkspaceID: ws.ID, Mode: string(s.session.Mode),
		Providers: s.task.Providers.Set.Strings(), Accounts: []toolapi.Account{},
	}
	if len(s.session.AgentArgv) > 0 {
		info.Agent = filepath.Base(s.session.AgentArgv[0])
	}
	for _, c := range ws.Connections {
		info.Accounts = append(info.Accounts, toolapi.Account{Provider: string(c.Provider), Username: c.Username, Validated: !c.ValidatedAt.IsZero()})
	}
	text := fmt.Sprintf("Session %s on task %s in workspace %s (mode %s, providers %s)", info.SessionID, info.TaskID,
		info.WorkspaceID, info.Mode, describe(s.task.Providers.Set))
	return Result{Text: text, Structured: info}
}

func describe(s providers.Set) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
