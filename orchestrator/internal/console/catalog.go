package console

import (
	"context"
	"net/http"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// serverRow is an MCP server with its tools, as the catalog page lists it.
type serverRow struct {
	model.MCPServer
	Tools []model.CatalogTool
}

func (c *Console) catalogPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	c.renderCatalog(ctx, w, r, me, nil)
}

func (c *Console) renderCatalog(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me, result map[string]any) {
	servers, err := c.svc.ListMCPServers(ctx)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	rows := make([]serverRow, 0, len(servers))
	for _, s := range servers {
		tools, err := c.svc.ListCatalogTools(ctx, s.ID)
		if err != nil {
			c.failErr(w, r, me, err)
			return
		}
		rows = append(rows, serverRow{MCPServer: s, Tools: tools})
	}
	wss, err := c.svc.ListWorkspaces(ctx)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	names := map[string]string{}
	for _, ws := range wss {
		names[ws.ID] = ws.Name
	}
	c.render(w, r, http.StatusOK, "catalog", me, map[string]any{"Title": "Catalog", "Servers": rows,
		"Workspaces": wss, "WorkspaceNames": names, "Result": result})
}

func (c *Console) catalogToolPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	t, err := c.svc.GetCatalogTool(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	wss, err := c.svc.ListWorkspaces(ctx)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	assigned := map[string]bool{}
	for _, id := range t.WorkspaceIDs {
		assigned[id] = true
	}
	c.render(w, r, http.StatusOK, "tool", me, map[string]any{"Title": "Tool " + t.ExposedName, "Tool": t,
		"Workspaces": wss, "Assigned": assigned})
}

func (c *Console) testServer(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	res := map[string]any{"Server": r.PathValue("id"), "Action": "test"}
	if t, err := c.svc.TestMCPServer(ctx, r.PathValue("id")); err != nil {
		res["Error"] = c.explain(r, err)
	} else {
		res["Test"] = t
	}
	c.renderCatalog(ctx, w, r, me, res)
}

func (c *Console) refreshServer(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	res := map[string]any{"Server": r.PathValue("id"), "Action": "refresh"}
	if _, counts, err := c.svc.RefreshMCPServer(ctx, r.PathValue("id")); err != nil {
		res["Error"] = c.explain(r, err)
	} else {
		res["Counts"] = counts
	}
	c.renderCatalog(ctx, w, r, me, res)
}

func (c *Console) enableServer(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	if _, err := c.svc.SetMCPServerEnabled(ctx, r.PathValue("id"), r.PostFormValue("enabled") == "true"); err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/catalog")
}

func (c *Console) enableTool(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	t, err := c.svc.SetCatalogToolEnabled(ctx, r.PathValue("id"), r.PostFormValue("enabled") == "true")
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/catalog/tools/%s", t.ID)
}

func (c *Console) assignTool(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	t, err := c.svc.AssignCatalogTool(ctx, r.PathValue("id"), r.PostFormValue("workspace"), r.PostFormValue("assigned") == "true")
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/catalog/tools/%s", t.ID)
}
