package api

import (
	"context"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// catalogServer serves CatalogService: the governed catalog of external
// MCP tool providers.
type catalogServer struct {
	pb.UnimplementedCatalogServiceServer
	svc *service.Service
}

func (h *catalogServer) CreateToolProvider(ctx context.Context, req *pb.CreateToolProviderRequest) (*pb.CreateToolProviderResponse, error) {
	p, counts, err := h.svc.CreateToolProvider(ctx, fromToolProvider(req.GetProvider()))
	if err != nil {
		return nil, err
	}
	return &pb.CreateToolProviderResponse{Provider: toToolProvider(p), Counts: toCounts(counts)}, nil
}

func (h *catalogServer) UpdateToolProvider(ctx context.Context, req *pb.UpdateToolProviderRequest) (*pb.UpdateToolProviderResponse, error) {
	p, counts, err := h.svc.UpdateToolProvider(ctx, fromToolProvider(req.GetProvider()))
	if err != nil {
		return nil, err
	}
	return &pb.UpdateToolProviderResponse{Provider: toToolProvider(p), Counts: toCounts(counts)}, nil
}

func (h *catalogServer) GetToolProvider(ctx context.Context, req *pb.GetToolProviderRequest) (*pb.GetToolProviderResponse, error) {
	p, err := h.svc.GetToolProvider(ctx, req.GetProvider())
	if err != nil {
		return nil, err
	}
	return &pb.GetToolProviderResponse{Provider: toToolProvider(p)}, nil
}

func (h *catalogServer) ListToolProviders(ctx context.Context, _ *pb.ListToolProvidersRequest) (*pb.ListToolProvidersResponse, error) {
	list, err := h.svc.ListToolProviders(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ListToolProvidersResponse{Providers: []*pb.ToolProvider{}}
	for _, p := range list {
		out.Providers = append(out.Providers, toToolProvider(p))
	}
	return out, nil
}

func (h *catalogServer) TestToolProvider(ctx context.Context, req *pb.TestToolProviderRequest) (*pb.TestToolProviderResponse, error) {
	res, err := h.svc.TestToolProvider(ctx, req.GetProvider())
	if err != nil {
		return nil, err
	}
	return &pb.TestToolProviderResponse{ServerName: res.ServerName, ServerVersion: res.ServerVersion, ToolNames: res.ToolNames}, nil
}

func (h *catalogServer) RefreshToolProvider(ctx context.Context, req *pb.RefreshToolProviderRequest) (*pb.RefreshToolProviderResponse, error) {
	p, counts, err := h.svc.RefreshToolProvider(ctx, req.GetProvider())
	if err != nil {
		return nil, err
	}
	return &pb.RefreshToolProviderResponse{Provider: toToolProvider(p), Counts: toCounts(counts)}, nil
}

func (h *catalogServer) SetToolProviderEnabled(ctx context.Context, req *pb.SetToolProviderEnabledRequest) (*pb.SetToolProviderEnabledResponse, error) {
	p, err := h.svc.SetToolProviderEnabled(ctx, req.GetProvider(), req.GetEnabled())
	if err != nil {
		return nil, err
	}
	return &pb.SetToolProviderEnabledResponse{Provider: toToolProvider(p)}, nil
}

func (h *catalogServer) ListCatalogTools(ctx context.Context, req *pb.ListCatalogToolsRequest) (*pb.ListCatalogToolsResponse, error) {
	list, err := h.svc.ListCatalogTools(ctx, req.GetProvider())
	if err != nil {
		return nil, err
	}
	out := &pb.ListCatalogToolsResponse{Tools: []*pb.CatalogTool{}}
	for _, ct := range list {
		out.Tools = append(out.Tools, toCatalogTool(ct))
	}
	return out, nil
}

func (h *catalogServer) GetCatalogTool(ctx context.Context, req *pb.GetCatalogToolRequest) (*pb.GetCatalogToolResponse, error) {
	ct, err := h.svc.GetCatalogTool(ctx, req.GetTool())
	if err != nil {
		return nil, err
	}
	return &pb.GetCatalogToolResponse{Tool: toCatalogTool(ct)}, nil
}

func (h *catalogServer) SetCatalogToolEnabled(ctx context.Context, req *pb.SetCatalogToolEnabledRequest) (*pb.SetCatalogToolEnabledResponse, error) {
	ct, err := h.svc.SetCatalogToolEnabled(ctx, req.GetTool(), req.GetEnabled())
	if err != nil {
		return nil, err
	}
	return &pb.SetCatalogToolEnabledResponse{Tool: toCatalogTool(ct)}, nil
}

func (h *catalogServer) AssignCatalogTool(ctx context.Context, req *pb.AssignCatalogToolRequest) (*pb.AssignCatalogToolResponse, error) {
	ct, err := h.svc.AssignCatalogTool(ctx, req.GetTool(), req.GetWorkspaceId(), req.GetAssigned())
	if err != nil {
		return nil, err
	}
	return &pb.AssignCatalogToolResponse{Tool: toCatalogTool(ct)}, nil
}

// fromToolProvider converts the request's provider; the service validates
// it. id is kept (UpdateToolProvider names the provider by it), the
// enablement and discovery fields are ignored.
func fromToolProvider(p *pb.ToolProvider) model.ToolProvider {
	out := model.ToolProvider{ID: p.GetId(), Name: p.GetName()}
	switch t := p.GetTransport().(type) {
	case *pb.ToolProvider_Stdio:
		s := &model.StdioTransport{Command: t.Stdio.GetCommand(), Args: t.Stdio.GetArgs(), WorkingDir: t.Stdio.GetWorkingDir()}
		for _, e := range t.Stdio.GetEnv() {
			s.Env = append(s.Env, model.EnvReference{Name: e.GetName(), FromEnv: e.GetFromEnv()})
		}
		out.Transport, out.Stdio = model.TransportStdio, s
	case *pb.ToolProvider_Http:
		h := &model.HTTPTransport{URL: t.Http.GetUrl()}
		for _, hr := range t.Http.GetHeaders() {
			h.Headers = append(h.Headers, model.HeaderReference{Name: hr.GetName(), Value: fromCredential(hr.GetValue()), Prefix: hr.GetPrefix()})
		}
		out.Transport, out.HTTP = model.TransportHTTP, h
	}
	return out
}

func toToolProvider(p model.ToolProvider) *pb.ToolProvider {
	out := &pb.ToolProvider{
		Id: p.ID, Name: p.Name, Enabled: p.Enabled, DiscoverTime: ts(p.DiscoveredAt), DiscoveryError: p.DiscoveryError,
		CreateTime: ts(p.CreatedAt), UpdateTime: ts(p.UpdatedAt),
	}
	switch {
	case p.Stdio != nil:
		s := &pb.StdioTransport{Command: p.Stdio.Command, Args: p.Stdio.Args, WorkingDir: p.Stdio.WorkingDir}
		for _, e := range p.Stdio.Env {
			s.Env = append(s.Env, &pb.EnvReference{Name: e.Name, FromEnv: e.FromEnv})
		}
		out.Transport = &pb.ToolProvider_Stdio{Stdio: s}
	case p.HTTP != nil:
		h := &pb.HttpTransport{Url: p.HTTP.URL}
		for _, hr := range p.HTTP.Headers {
			h.Headers = append(h.Headers, &pb.HeaderReference{Name: hr.Name, Value: toCredential(hr.Value), Prefix: hr.Prefix})
		}
		out.Transport = &pb.ToolProvider_Http{Http: h}
	}
	return out
}

func toCredential(c model.CredentialRef) *pb.CredentialRef {
	out := &pb.CredentialRef{}
	switch c.Kind {
	case model.CredentialEnv:
		out.Source = &pb.CredentialRef_EnvVar{EnvVar: c.Ref}
	case model.CredentialFile:
		out.Source = &pb.CredentialRef_FilePath{FilePath: c.Ref}
	}
	return out
}

func toCatalogTool(ct model.CatalogTool) *pb.CatalogTool {
	return &pb.CatalogTool{
		Id: ct.ID, ProviderId: ct.ProviderID, ExternalName: ct.ExternalName, ExposedName: ct.ExposedName,
		Title: ct.Title, Description: ct.Description, InputSchemaJson: string(ct.InputSchema),
		OutputSchemaJson: string(ct.OutputSchema), SchemaHash: ct.SchemaHash, ReadOnly: ct.ReadOnly,
		Enabled: ct.Enabled, Available: ct.Available, WorkspaceIds: ct.WorkspaceIDs,
		FirstSeenTime: ts(ct.FirstSeen), LastSeenTime: ts(ct.LastSeen),
	}
}

func toCounts(c model.DiscoveryCounts) *pb.DiscoveryCounts {
	return &pb.DiscoveryCounts{
		New: uint32(c.New), Changed: uint32(c.Changed), Unchanged: uint32(c.Unchanged),
		Unavailable: uint32(c.Unavailable), Restored: uint32(c.Restored), Total: uint32(c.Total),
	}
}
