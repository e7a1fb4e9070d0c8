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
}

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
}

// Repository is one repository attached to a task.
type Repository struct {
	ID        string `json:"id"`
	Provider  string `json:"provider"`
	Host      string `json:"host,omitempty"`
	Path      string `json:"path"`
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

// OutputSchema returns the JSON Schema of T, for a tool's outputSchema.
func OutputSchema[T any]() json.RawMessage { return ReflectSchema(reflect.TypeFor[T]()) }

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
