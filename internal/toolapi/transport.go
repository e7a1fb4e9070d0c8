package toolapi

import (
	"encoding/json"
	"slices"
)

// Transport says where a session's MCP surface is served from, relative
// to the task's files. It is one input to assembling the surface (like
// the mode and the provider set), never a branch in a tool's handler.
//
// Colocated surfaces are served by agentctl next to the agent and its
// checkout. Hosted surfaces are served by the orchestrator to an agent
// that runs elsewhere (an IDE on a laptop, a hosted agent that can only
// reach a URL); they omit every field that only makes sense next to the
// files (local paths, state directories, stdio commands), in the schemas
// as well as in the values.
type Transport string

// Transports.
const (
	TransportColocated Transport = "colocated"
	TransportHosted    Transport = "hosted"
)

// Valid reports whether t is a transport.
func (t Transport) Valid() bool { return t == TransportColocated || t == TransportHosted }

// Field is a property of the built-in tools' schemas, by its JSON name
// (wherever it appears), with the Go field it comes from and why it is
// classified as it is.
type Field struct {
	Name, GoField, Why string
}

// ColocatedOnly is the written list of the fields that only make sense
// next to the task's files: local repository paths, state directories,
// stdio commands. A hosted surface omits them from every built-in tool's
// input and output schema (HostedSchema) and its results leave them
// empty. A schema property whose name looks like a path, a directory, a
// file or a command is either here or in HostedFields, or toolapi's
// tests fail.
var ColocatedOnly = []Field{
	{Name: "local_path", GoField: "Repository.LocalPath",
		Why: "a repository's checkout in the session's workspace, or the directory of a repository of no review provider on the machine it was recorded on: a hosted agent has no vocabulary to name the server's disk, and no workspace"},
}

// HostedFields are the path-like fields that keep their meaning on a
// hosted surface, each with the reason.
var HostedFields = []Field{
	{Name: "path", GoField: "Repository.Path, Comment.Path",
		Why: "a repository's path on its review provider (owner/name), or a file's path inside the repository a review comment is on; both name the provider's copy, not a disk"},
	{Name: "url", GoField: "ChangeRequest.URL",
		Why: "the change request's web page on its provider"},
	{Name: "remote_url", GoField: "Repository.RemoteURL",
		Why: "the repository's clone address on its provider; a file: URL (a directory) is left out of a hosted session's results"},
}

// colocatedOnly is ColocatedOnly by name.
var colocatedOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range ColocatedOnly {
		m[f.Name] = true
	}
	return m
}()

// HostedSchema returns schema without the ColocatedOnly properties, at any
// depth (and without them in "required"): the schema a hosted surface
// publishes. A schema that names none of them is returned as it is.
func HostedSchema(schema json.RawMessage) json.RawMessage {
	if len(schema) == 0 {
		return schema
	}
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return schema
	}
	if !omitLocal(doc) {
		return schema
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return schema
	}
	return out
}

// omitLocal removes the colocated-only properties from every object
// schema under v, and reports whether it removed any.
func omitLocal(v any) bool {
	removed := false
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for name := range props {
				if colocatedOnly[name] {
					delete(props, name)
					removed = true
				}
			}
			if req, ok := v["required"].([]any); ok {
				v["required"] = slices.DeleteFunc(req, func(r any) bool { s, _ := r.(string); return colocatedOnly[s] })
			}
		}
		for _, sub := range v {
			removed = omitLocal(sub) || removed
		}
	case []any:
		for _, sub := range v {
			removed = omitLocal(sub) || removed
		}
	}
	return removed
}

// Schemas returns t's input and output schemas as a surface served over
// transport publishes them: a hosted surface's (and an unknown
// transport's, the safer of the two) omit the ColocatedOnly fields.
func (t Tool) Schemas(transport Transport) (in, out json.RawMessage) {
	in, out = t.InputSchema(), t.OutputSchema()
	if transport == TransportColocated {
		return in, out
	}
	return HostedSchema(in), HostedSchema(out)
}
