// Package toolcalls answers the tool calls agents make through agentctl.
// Tool visibility in an agent's list is discovery only, never security:
// every call is checked here, whatever the agent was shown — the session
// must exist and belong to the calling task, must not have ended, the tool
// must exist, and a provider tool needs its provider in the task's set,
// a workspace connection to it and a credential that resolves.
//
// Failures are results, not errors: an agent reads a stable code and a
// message it can act on. Credentials are resolved from their reference at
// call time and never appear in a result or a log line.
package toolcalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// Call is one tool call, with the identity agentctl bound to it.
type Call struct {
	SessionID string
	TaskID    string
	Tool      string
	Arguments json.RawMessage
}

// Result is the answer to a call.
type Result struct {
	IsError    bool
	Code       string // stable, machine-readable; set when IsError
	Text       string
	Structured any // marshalled as the structured result, if set
}

// Stable error codes.
const (
	CodeUnknownSession        = "unknown_session"
	CodePermissionDenied      = "permission_denied"
	CodeSessionEnded          = "session_ended"
	CodeUnknownTool           = "unknown_tool"
	CodeInvalidArguments      = "invalid_arguments"
	CodeProviderNotAttached   = "provider_not_attached"
	CodeNotConnected          = "provider_not_connected"
	CodeCredentialUnavailable = "credential_unavailable"
	CodeNotAvailable          = "not_available"
	CodeInternal              = "internal"
)

func fail(code, format string, args ...any) Result {
	return Result{IsError: true, Code: code, Text: fmt.Sprintf(format, args...)}
}

// Dispatcher answers tool calls from the store.
type Dispatcher struct {
	store *store.Store
	log   *slog.Logger
	// env looks up environment variables; tests replace it.
	env func(string) (string, bool)
}

// New returns a dispatcher over st. log may be nil.
func New(st *store.Store, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{store: st, log: log, env: os.LookupEnv}
}

// handler answers one tool once the call is authorized.
type handler func(ctx context.Context, d *Dispatcher, s scope, args json.RawMessage) Result

// scope is what an authorized call may touch.
type scope struct {
	session model.Session
	task    model.Task
}

type tool struct {
	provider providers.Provider // "" for task tools
	handle   handler
}

// tools is every tool the orchestrator answers, one entry per name.
var tools = map[string]tool{
	"task_info":        {handle: taskInfo},
	"session_info":     {handle: sessionInfo},
	"github_pr_status": {provider: providers.GitHub, handle: notYet("GitHub pull request status")},
	"gitlab_mr_status": {provider: providers.GitLab, handle: notYet("GitLab merge request status")},
}

// CallHandler answers calls as executors deliver them; it is what the
// orchestrator installs in every backend.
func (d *Dispatcher) CallHandler(ctx context.Context, c executors.ToolCall) executors.ToolResult {
	res := d.Handle(ctx, Call{SessionID: c.SessionID, TaskID: c.TaskID, Tool: c.Tool, Arguments: c.Arguments})
	out := executors.ToolResult{IsError: res.IsError, Code: res.Code, Text: res.Text}
	if res.Structured != nil {
		b, err := json.Marshal(res.Structured)
		if err != nil {
			return executors.ToolResult{IsError: true, Code: CodeInternal, Text: "the answer could not be encoded"}
		}
		out.Structured = b
	}
	return out
}

// Handle authorizes and answers one call.
func (d *Dispatcher) Handle(ctx context.Context, c Call) Result {
	res := d.handle(ctx, c)
	if res.IsError {
		d.log.InfoContext(ctx, "tool call refused", "session_id", c.SessionID, "task_id", c.TaskID, "tool", c.Tool, "code", res.Code)
	}
	return res
}

func (d *Dispatcher) handle(ctx context.Context, c Call) Result {
	sess, err := d.store.GetSession(ctx, c.SessionID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return fail(CodeUnknownSession, "session %q is not known to the orchestrator", c.SessionID)
	} else if err != nil {
		return d.internal(ctx, c, err)
	}
	if sess.TaskID != c.TaskID {
		return fail(CodePermissionDenied, "session %q does not work on task %q", c.SessionID, c.TaskID)
	}
	if sess.State == model.SessionStopped || sess.State == model.SessionFailed {
		return fail(CodeSessionEnded, "session %q has %s; resume it to use tools", c.SessionID, sess.State)
	}
	t, ok := tools[c.Tool]
	if !ok {
		return fail(CodeUnknownTool, "there is no tool %q", c.Tool)
	}
	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if !json.Valid(args) || !strings.HasPrefix(strings.TrimSpace(string(args)), "{") {
		return fail(CodeInvalidArguments, "arguments must be a JSON object")
	}
	task, err := d.store.GetTask(ctx, sess.TaskID)
	if err != nil {
		return d.internal(ctx, c, err)
	}
	if t.provider != "" {
		if res, ok := d.authorizeProvider(ctx, task, t.provider); !ok {
			return res
		}
	}
	return t.handle(ctx, d, scope{session: sess, task: task}, args)
}

// authorizeProvider checks the provider is attached to the task, connected
// in the workspace, and that its credential resolves.
func (d *Dispatcher) authorizeProvider(ctx context.Context, task model.Task, p providers.Provider) (Result, bool) {
	if !task.Providers.Set.Has(p) {
		return fail(CodeProviderNotAttached, "no %s repository is attached to this task (its providers: %s); "+
			"attach one with task_add_sources or use the tools of an attached provider", p, describe(task.Providers.Set)), false
	}
	ws, err := d.store.GetWorkspace(ctx, task.WorkspaceID)
	if err != nil {
		return fail(CodeInternal, "the workspace could not be read"), false
	}
	for _, conn := range ws.Connections {
		if conn.Provider != p {
			continue
		}
		if err := d.resolvable(conn.Credential); err != nil {
			return fail(CodeCredentialUnavailable, "the workspace's %s credential is not available to the orchestrator (%v); "+
				"ask the operator to fix the connection", p, err), false
		}
		return Result{}, true
	}
	return fail(CodeNotConnected, "the workspace is not connected to %s; ask the operator to run "+
		"'toolscope workspace connect %s --provider %s'", p, task.WorkspaceID, p), false
}

// resolvable checks a credential reference without reading the secret into
// anything that is returned or logged. Its error names the reference only.
func (d *Dispatcher) resolvable(ref model.CredentialRef) error {
	switch ref.Kind {
	case model.CredentialEnv:
		if v, ok := d.env(ref.Ref); !ok || strings.TrimSpace(v) == "" {
			return fmt.Errorf("environment variable %s is not set", ref.Ref)
		}
	case model.CredentialFile:
		info, err := os.Stat(ref.Ref)
		if err != nil || info.IsDir() || info.Size() == 0 {
			return fmt.Errorf("file %s is missing or empty", ref.Ref)
		}
	default:
		return errors.New("the connection has no credential reference")
	}
	return nil
}

func (d *Dispatcher) internal(ctx context.Context, c Call, err error) Result {
	d.log.ErrorContext(ctx, "tool call failed", "session_id", c.SessionID, "tool", c.Tool, "error", err.Error())
	return fail(CodeInternal, "the orchestrator could not answer; retry later")
}

func taskInfo(_ context.Context, _ *Dispatcher, s scope, _ json.RawMessage) Result {
	info := toolapi.TaskInfo{
		TaskID: s.task.ID, WorkspaceID: s.task.WorkspaceID, Title: s.task.Title, Description: s.task.Description,
		Providers: s.task.Providers.Set.Strings(), Generation: s.task.Providers.Generation,
		Repositories: []toolapi.Repository{},
	}
	var lines []string
	for _, r := range s.task.Repositories {
		info.Repositories = append(info.Repositories, toolapi.Repository{
			ID: r.ID, Provider: r.Provider, Host: r.Host, Path: r.Path, RemoteURL: r.RemoteURL, Primary: r.Primary,
		})
		name := r.Path
		if r.Host != "" {
			name = r.Host + "/" + r.Path
		}
		lines = append(lines, fmt.Sprintf("- %s %s (%s)", r.ID, name, r.Provider))
	}
	text := fmt.Sprintf("Task %s: %s\nProviders: %s\nRepositories:\n%s", s.task.ID, s.task.Title,
		describe(s.task.Providers.Set), strings.Join(lines, "\n"))
	return Result{Text: text, Structured: info}
}

func sessionInfo(ctx context.Context, d *Dispatcher, s scope, _ json.RawMessage) Result {
	ws, err := d.store.GetWorkspace(ctx, s.task.WorkspaceID)
	if err != nil {
		return fail(CodeInternal, "the workspace could not be read")
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

// notYet answers a provider tool whose handler this build does not have:
// after every check passed, so the agent learns exactly that.
func notYet(what string) handler {
	return func(context.Context, *Dispatcher, scope, json.RawMessage) Result {
		return fail(CodeNotAvailable, "%s is not served by this orchestrator yet", what)
	}
}

func describe(s providers.Set) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
