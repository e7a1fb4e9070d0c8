package toolcalls

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// orientation says, for task_info, why tools the agent may expect are not
// shown or cannot succeed, and what would bring them (issue 19): per
// provider, the task has no repository of it, the workspace is not
// connected to it, or its credential does not resolve; the session is in
// plan mode; a catalog tool assigned to the workspace is disabled (or its
// server is) or unavailable. It reads the same records the call checks
// read, so what it says is what a call would meet. Catalog tools not
// assigned to the workspace are not named: the catalog is an admin's
// (ADR 0010), and a call of one is refused with its own orientation.
func (d *Dispatcher) orientation(ctx context.Context, s scope) ([]toolapi.Orientation, error) {
	var out []toolapi.Orientation
	for _, p := range providers.All() {
		if !s.task.Providers.Set.Has(p) {
			out = append(out, toolapi.NoRepository(p))
			continue
		}
		conn, err := d.conns.Lookup(ctx, s.task.WorkspaceID, p)
		if errors.Is(err, connections.ErrNotConnected) {
			out = append(out, toolapi.Orientation{State: toolapi.OrientNotConnected, Provider: string(p),
				Message: fmt.Sprintf("The workspace is not connected to %s: the %s tools are shown but their calls fail with not_connected. "+
					"Ask the operator to run 'toolscope workspace connect %s --provider %s'.", p, p, s.task.WorkspaceID, p)})
			continue
		} else if err != nil {
			return nil, err
		}
		if err := d.conns.CheckCredential(conn); err != nil {
			out = append(out, toolapi.Orientation{State: toolapi.OrientCredentialUnresolved, Provider: string(p),
				Message: fmt.Sprintf("The workspace's %s credential does not resolve (%v): the %s tools' calls fail with credential_unavailable. "+
					"Ask the operator to fix the connection's credential reference.", p, err, p)})
		}
	}
	if readOnlySession(s.session) {
		out = append(out, toolapi.PlanMode(s.task.Providers.Set))
	}
	catalog, err := d.store.ListCatalogTools(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, t := range catalog {
		if !slices.Contains(t.WorkspaceIDs, s.task.WorkspaceID) {
			continue
		}
		target, err := d.store.CatalogToolForCall(ctx, t.ExposedName)
		if err != nil {
			return nil, err
		}
		switch target.Gate(s.task.WorkspaceID) {
		case model.BlockServerDisabled:
			out = append(out, toolapi.Orientation{State: toolapi.OrientCatalogToolDisabled, Tool: t.ExposedName,
				Message: fmt.Sprintf("%s is not shown: its MCP server %q is disabled. Ask the operator to enable it.", t.ExposedName, t.ServerName)})
		case model.BlockToolDisabled:
			out = append(out, toolapi.Orientation{State: toolapi.OrientCatalogToolDisabled, Tool: t.ExposedName,
				Message: fmt.Sprintf("%s is not shown: it is disabled in the catalog. Ask the operator to enable it.", t.ExposedName)})
		case model.BlockToolUnavailable:
			out = append(out, toolapi.Orientation{State: toolapi.OrientCatalogToolUnavailable, Tool: t.ExposedName,
				Message: fmt.Sprintf("%s is not shown: its server %q no longer offers it (its last discovery did not list it). "+
					"Ask the operator to check the server and refresh it.", t.ExposedName, t.ServerName)})
		}
	}
	return out, nil
}

// Orientation is task_info's orientation of the session: what the
// orchestrator pushes with a surface (and gives a hosted session's
// instructions), so that the server instructions say it too.
func (d *Dispatcher) Orientation(ctx context.Context, sessionID string) ([]toolapi.Orientation, error) {
	sess, err := d.store.GetSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	task, err := d.store.GetTask(ctx, sess.TaskID)
	if err != nil {
		return nil, err
	}
	return d.orientation(ctx, scope{session: sess, task: task})
}
