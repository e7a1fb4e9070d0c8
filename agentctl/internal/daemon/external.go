package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// External tools are tools of external MCP servers that the orchestrator's
// governed catalog exposes to a session. agentctl knows them only as
// descriptors: it lists them, validates a call's arguments against the
// descriptor's input schema, and forwards the call over Attach like any
// other (tool_name is the exposed name); the orchestrator checks the call
// again and forwards it to the server.
//
// A set is validated as a whole and refused as a whole: one bad descriptor
// fails the push (or the launch) with a FieldError naming it, and the
// session keeps what it had. A descriptor named like a built-in tool is not
// an error: the registry drops it (a built-in is never shadowed), and the
// daemon logs it.

// SetExternalTools implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) SetExternalTools(_ context.Context, req *agentctlv1.SetExternalToolsRequest) (*agentctlv1.SetExternalToolsResponse, error) {
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	set := req.GetExternalTools()
	if set == nil {
		return nil, errdefs.RequiredField("external_tools")
	}
	tools, err := d.externalTools("external_tools", set)
	if err != nil {
		return nil, err
	}
	res := d.apply(s, newSurface(nil, set, tools))
	return &agentctlv1.SetExternalToolsResponse{AppliedGeneration: res.GetAppliedExternalToolsGeneration(), Accepted: res.GetAccepted(), ToolsChanged: res.GetToolsChanged()}, nil
}

// logShadowed warns about descriptors the registry drops because a
// built-in tool has their name.
func (d *Daemon) logShadowed(sessionID string, tools []registry.Tool) {
	var shadowed []string
	for _, t := range tools {
		if registry.Builtin(t.Name) {
			shadowed = append(shadowed, t.Name)
		}
	}
	if len(shadowed) > 0 {
		d.log.Warn("external tools named like built-in tools are not exposed", "session_id", sessionID, "names", shadowed)
	}
}

// externalTools validates a pushed set and converts it to registry tools.
// field is where the set sits in the request ("external_tools",
// "spec.external_tools"); errors name the descriptor's field below it.
func (d *Daemon) externalTools(field string, set *agentctlv1.ExternalToolSet) ([]registry.Tool, error) {
	tools := make([]registry.Tool, 0, len(set.GetTools()))
	seen := make(map[string]int, len(set.GetTools()))
	for i, et := range set.GetTools() {
		at := fmt.Sprintf("%s.tools[%d].", field, i)
		switch first, dup := seen[et.GetName()]; {
		case et.GetName() == "":
			return nil, errdefs.RequiredField(at + "name")
		case toolapi.CheckExternalName(et.GetName()) != nil:
			return nil, errdefs.InvalidField(at+"name", "%v", toolapi.CheckExternalName(et.GetName()))
		case dup:
			return nil, errdefs.InvalidField(at+"name", "%q is also the name of tools[%d]", et.GetName(), first)
		}
		seen[et.GetName()] = i
		if err := d.checkSchema(et.GetInputSchemaJson(), true); err != nil {
			return nil, errdefs.InvalidField(at+"input_schema_json", "%v", err)
		}
		if len(et.GetOutputSchemaJson()) > 0 {
			if err := d.checkSchema(et.GetOutputSchemaJson(), false); err != nil {
				return nil, errdefs.InvalidField(at+"output_schema_json", "%v", err)
			}
		}
		t := registry.Tool{
			Name: et.GetName(), Title: et.GetTitle(), Description: et.GetDescription(),
			InputSchema: json.RawMessage(et.GetInputSchemaJson()), OutputSchema: json.RawMessage(et.GetOutputSchemaJson()),
			ReadOnly: et.GetReadOnly(),
			// The descriptor says only whether the tool is read-only; for
			// the rest, the hints a client should be most careful with: it
			// reaches outside the task, and a tool that writes may destroy.
			Destructive: !et.GetReadOnly(),
			OpenWorld:   true,
		}
		if len(t.OutputSchema) == 0 {
			t.OutputSchema = nil
		}
		// The go-sdk panics on a definition it refuses; find out here.
		if err := mcpserver.Check(registry.Tool{Name: t.Name, InputSchema: t.InputSchema}); err != nil {
			return nil, errdefs.InvalidField(at+"input_schema_json", "the MCP server library refuses it: %v", err)
		}
		if err := mcpserver.Check(t); err != nil {
			return nil, errdefs.InvalidField(at+"output_schema_json", "the MCP server library refuses it: %v", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// checkSchema checks that raw is an external tool schema agentctl can
// work with (toolapi.CheckExternalSchema). Input schemas are then resolved
// through the daemon's cache, which calls validate against.
func (d *Daemon) checkSchema(raw []byte, input bool) error {
	if err := toolapi.CheckExternalSchema(raw); err != nil {
		return err
	}
	if input {
		if _, err := d.schemas.Resolve(raw); err != nil {
			return fmt.Errorf("is not a JSON Schema agentctl can validate with: %s", strings.TrimSpace(err.Error()))
		}
	}
	return nil
}
