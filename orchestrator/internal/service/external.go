package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// External tools are a part of a session's surface: a session's set is
// what store.ExternalTools selects for its workspace (assigned, provider
// enabled, tool enabled, available), ordered by the catalog generation. It
// is given at launch and brought to every running session by the
// reconciler after each catalog change.

// externalTools returns a workspace's external tool set as executors take
// it, with the catalog generation it reflects.
func (s *Service) externalTools(ctx context.Context, workspaceID string) ([]executors.ExternalTool, uint64, error) {
	tools, gen, err := s.store.ExternalTools(ctx, workspaceID)
	if err != nil {
		return nil, 0, err
	}
	out := make([]executors.ExternalTool, 0, len(tools))
	for _, t := range tools {
		// agentctl refuses a whole set holding a tool it cannot serve; such
		// a tool stays in the catalog but is left out of every set.
		if err := usable(t); err != nil {
			s.log.WarnContext(ctx, "a catalog tool cannot be exposed", "tool", t.ExposedName, "reason", err.Error())
			continue
		}
		out = append(out, executors.ExternalTool{Name: t.ExposedName, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, ReadOnly: t.ReadOnly})
	}
	return out, gen, nil
}

// usable reports why agentctl could not serve a catalog tool, or nil.
func usable(t model.CatalogTool) error {
	if err := toolapi.CheckExternalName(t.ExposedName); err != nil {
		return fmt.Errorf("name %v", err)
	}
	if err := toolapi.CheckExternalSchema(t.InputSchema); err != nil {
		return fmt.Errorf("input schema %v", err)
	}
	if len(t.OutputSchema) > 0 {
		if err := toolapi.CheckExternalSchema(t.OutputSchema); err != nil {
			return fmt.Errorf("output schema %v", err)
		}
	}
	return nil
}

// describeExternal says which external tools a session now exposes.
func describeExternal(tools []executors.ExternalTool, gen uint64) string {
	if len(tools) == 0 {
		return fmt.Sprintf("no external tools (catalog generation %d)", gen)
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return fmt.Sprintf("external tools %s (catalog generation %d)", strings.Join(names, ", "), gen)
}
