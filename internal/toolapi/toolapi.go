// Package toolapi is toolscope's built-in tool surface, stated once for
// both sides of the Attach stream: the tool table (tools.go: every
// built-in tool with its group, texts, read-only flag, argument and result
// types, refusal codes and parity counterpart), the refusal codes
// (codes.go), and the argument and result types the orchestrator decodes
// and fills and agentctl advertises as schemas (generated from the types
// into schemas_gen.go by `make docs`).
//
// SessionInfo is credential-free by construction: it has no field that
// could carry a token, secret, e-mail address, scope or expiry, and no
// free-form map or interface field that could smuggle one in. A test pins
// its shape.
package toolapi

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxArgumentBytes bounds one tool call's arguments, as JSON. agentctl
// refuses larger arguments before they leave the host and the orchestrator
// checks again; both answer CodeArgumentsTooLarge. It leaves room for the
// longest text a provider takes: GitHub's 65,536-character bodies and
// comments in any script, GitLab's 1,000,000-character descriptions in
// ASCII.
const MaxArgumentBytes = 1 << 20

// CodeArgumentsTooLarge is the stable code of a call refused for
// arguments over MaxArgumentBytes.
const CodeArgumentsTooLarge = "arguments_too_large"

// ArgumentsTooLarge is the refusal's message for arguments of n bytes.
func ArgumentsTooLarge(n int) string {
	return fmt.Sprintf("the arguments are %d bytes; the limit is %d: shorten the text or split the work into several calls", n, MaxArgumentBytes)
}

// MaxResultBytes bounds one tool call's result as it leaves the
// orchestrator: its text plus its encoded structured content, counted in
// bytes, as sent. A result travels to agentctl in one gRPC message, and
// agentctl's end of the link receives messages of at most 4 MiB (gRPC's
// default, which neither end raises): a larger one ends the link's Attach
// stream, and every call in flight on it with the one that broke it. Half
// of that leaves room for the message's envelope (ids, code, framing) with
// a wide margin, and is already far more than an agent can use in one
// turn (over half a million tokens). A result over it is answered
// CodeResultTooLarge instead, and audited so.
const MaxResultBytes = 2 << 20

// CodeResultTooLarge is the stable code of a call whose result was over
// MaxResultBytes: the call ran, its result was not returned.
const CodeResultTooLarge = "result_too_large"

// ResultTooLarge is the message of a call whose result from tool is n
// bytes, over MaxResultBytes; with more, n is only what was read of it
// before reading stopped (the result is larger still).
func ResultTooLarge(tool string, n int64, more bool) string {
	size := fmt.Sprintf("%d bytes", n)
	if more {
		size = "more than " + size
	}
	return fmt.Sprintf("the result of %s is %s; the limit for one result is %d bytes, so it was not returned: "+
		"ask for less (a narrower query or filter, fewer items or a smaller page, one repository or file at a time) and call again",
		tool, size, MaxResultBytes)
}

// ResultTooLargeError is a result found over the bound while it was read
// (a catalog server's answer, cut off before it was held whole): Bytes is
// its size, or with More what was read of it or what it announced.
type ResultTooLargeError struct {
	Bytes int64
	More  bool
}

func (e *ResultTooLargeError) Error() string {
	if e.More {
		return fmt.Sprintf("the answer is more than %d bytes", e.Bytes)
	}
	return fmt.Sprintf("the answer is %d bytes", e.Bytes)
}

// TaskInfo is the result of task_info.
type TaskInfo struct {
	TaskID       string       `json:"task_id"`
	WorkspaceID  string       `json:"workspace_id"`
	Title        string       `json:"title"`
	Description  string       `json:"description,omitempty"`
	Repositories []Repository `json:"repositories"`
	// Providers is the task's provider set: the review providers whose
	// tools the agent has.
	Providers  []string `json:"providers"`
	Generation uint64   `json:"generation"`
	// Available are the workspace's repositories not attached to the task:
	// what task_add_sources can attach.
	Available []Repository `json:"available"`
	// Orientation says, for each provider whose tools are not shown or
	// cannot succeed, and each catalog tool of the workspace that is
	// blocked, which state holds and what to do (issue 19).
	Orientation []Orientation `json:"orientation,omitempty"`
}

// Orientation is one reason tools are missing or calls cannot succeed.
type Orientation struct {
	State    string `json:"state" jsonschema:"One of no_repository, not_connected, credential_unresolved, plan_mode, catalog_tool_disabled, catalog_tool_unavailable."`
	Provider string `json:"provider,omitempty"`
	Tool     string `json:"tool,omitempty"`
	// Message says what holds and what to do.
	Message string `json:"message"`
}

// Orientation states.
const (
	OrientNoRepository           = "no_repository"
	OrientNotConnected           = "not_connected"
	OrientCredentialUnresolved   = "credential_unresolved"
	OrientPlanMode               = "plan_mode"
	OrientCatalogToolDisabled    = "catalog_tool_disabled"
	OrientCatalogToolUnavailable = "catalog_tool_unavailable"
)

// AddSourcesArgs attaches repositories of the workspace to the task.
type AddSourcesArgs struct {
	RepositoryIDs []string `json:"repository_ids" jsonschema:"Ids of workspace repositories to attach, from task_info's available list; all or none."`
}

// AddSourcesResult is the task's provider set after the batch, or, when
// the workspace's policy holds the batch for a person's approval, the
// request that holds it and the task's unchanged set.
type AddSourcesResult struct {
	Providers  []string `json:"providers"`
	Generation uint64   `json:"generation"`
	// Pending says nothing is attached yet: a person approves or rejects
	// request RequestID, and task_inbox says which.
	Pending   bool   `json:"pending,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// ToolsAdded names the tools the batch made available to the calling
	// session. agentctl fills it in, once the session applied the new
	// provider set and its clients were told (a self-triggered change is
	// adopted before its result is released; see SelfChange).
	ToolsAdded []string `json:"tools_added,omitempty"`
	// CallWith and InputSchemas are set for MCP clients that never
	// re-list (ADR 0019): call the new tools through CallWith (call_tool),
	// with these input schemas.
	CallWith     string         `json:"call_with,omitempty"`
	InputSchemas map[string]any `json:"input_schemas,omitempty"`
}

// SelfChange is the part of a tool's structured result that says the call
// changed the calling session's own surface: any result that carries
// tools_added is released only once the session's clients were sent
// notifications/tools/list_changed (and the caller, if it re-lists, has
// listed the new surface).
type SelfChange struct {
	ToolsAdded []string `json:"tools_added,omitempty"`
}

// CallTool is the entry point offered only to MCP clients that never
// re-list their tools (Codex): it calls a tool of the session by name, so
// a tool that appeared mid-run can still be used (ADR 0019).
const CallTool = "call_tool"

// CallToolArgs are the arguments of CallTool.
type CallToolArgs struct {
	Name      string         `json:"name" jsonschema:"The tool to call, as named by task_add_sources or task_info."`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"The tool's arguments, a JSON object matching its input schema."`
}

// Repository is one repository of a task or its workspace.
type Repository struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Host     string `json:"host,omitempty"`
	// Path is the repository's path on its review provider (owner/name);
	// empty for a repository of no review provider.
	Path string `json:"path,omitempty"`
	// LocalPath is the repository's directory next to the agent: for a
	// repository checked out in the session's workspace, its checkout (on
	// the session's branch); for a repository of no review provider, its
	// directory on the machine it was recorded on. Colocated-only
	// (ColocatedOnly): a hosted surface has no such field.
	LocalPath string `json:"local_path,omitempty"`
	RemoteURL string `json:"remote_url,omitempty"`
	Primary   bool   `json:"primary"`
}

// SessionInfo is the result of session_info: who the session acts as.
type SessionInfo struct {
	SessionID   string `json:"session_id"`
	TaskID      string `json:"task_id"`
	WorkspaceID string `json:"workspace_id"`
	// Agent is the agent command's name, empty when the session only
	// serves MCP.
	Agent     string   `json:"agent"`
	Mode      string   `json:"mode"`
	Providers []string `json:"providers"`
	// Accounts lists, per connected provider, the username the provider
	// reported for the workspace's credential.
	Accounts []Account `json:"accounts"`
}

// Account is the identity a workspace acts as on one provider.
type Account struct {
	Provider string `json:"provider"`
	Username string `json:"username"`
	// Validated is false while the connection's username has not been
	// confirmed by the provider.
	Validated bool `json:"validated"`
}

// OutputSchema returns the JSON Schema of T, for a tool's outputSchema:
// computed at build time for the types of SchemaTypes, by reflection for
// any other.
func OutputSchema[T any]() json.RawMessage { return schemaOf(reflect.TypeFor[T]()) }

// InputSchema returns the JSON Schema of T for a tool's inputSchema (a
// struct's refuses unknown arguments). The built-in tools' come from the
// table (Tool.InputSchema); this is for agentctl's own call_tool.
func InputSchema[T any]() json.RawMessage { return OutputSchema[T]() }

// ReflectSchema derives the JSON Schema of typ by reflection. The table's
// types are derived at build time instead (go generate; see
// schemas_gen.go), so agentctl's start-up does no reflection.
func ReflectSchema(typ reflect.Type) json.RawMessage {
	s, err := jsonschema.ForType(typ, nil)
	if err != nil {
		panic(fmt.Sprintf("toolapi: schema of %s: %v", typ, err))
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("toolapi: schema of %s: %v", typ, err))
	}
	return b
}

// InboxMessage is a prompt toolscope left for the agent.
type InboxMessage struct {
	Text string `json:"text"`
	Link string `json:"link,omitempty"`
	// Time is when it was written, RFC 3339.
	Time string `json:"time"`
}

// Inbox is the result of task_inbox: the messages not read before.
type Inbox struct {
	Messages []InboxMessage `json:"messages"`
}
